# Docker sandbox image for RUNTIME=docker (see docs/docker.md).
#   make sandbox-image                                  official base (python:3.12-slim-bookworm)
#   make sandbox-image BASE_IMAGE=planact-base:bookworm  local base, no registry needed
# Rebuilds only when sandbox/ or the base image changed (FORCE=1 to force).
SANDBOX_IMAGE ?= planact-sandbox:latest
SANDBOX_BASE_IMAGE ?= $(or $(BASE_IMAGE),python:3.12-slim-bookworm)
DOCKER_BUILD_NETWORK ?=

.PHONY: sandbox-image docker-engine docker-base-image

sandbox-image:
	SANDBOX_IMAGE='$(SANDBOX_IMAGE)' BASE_IMAGE='$(SANDBOX_BASE_IMAGE)' \
	DOCKER_BUILD_NETWORK='$(DOCKER_BUILD_NETWORK)' bash scripts/docker/build-sandbox.sh

# start a Docker engine if none answers (installs docker.io on Debian when missing)
docker-engine:
	bash scripts/docker/engine.sh

# the local Debian base image planact-base:bookworm (debootstrap; no registry needed)
docker-base-image: docker-engine
	bash scripts/docker/base-image.sh
