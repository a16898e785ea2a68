#!/usr/bin/env bash
# CI: a Docker engine, the local base image and the sandbox image, then the docker tests
# must run (REQUIRE_DOCKER=1 turns their skip into a failure).
set -euo pipefail
cd "$(dirname "$0")/../.."
bash scripts/docker/engine.sh
bash scripts/docker/base-image.sh
# no registry in CI: build on the local Debian base; RUN steps that install use the host net
make sandbox-image BASE_IMAGE=planact-base:bookworm DOCKER_BUILD_NETWORK=host
echo "REQUIRE_DOCKER=1" >> "${CI_ENV_FILE:?CI_ENV_FILE is set by .ci/run}"
