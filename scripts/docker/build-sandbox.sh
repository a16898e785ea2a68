#!/usr/bin/env bash
# Build the sandbox image from sandbox/ (called by `make sandbox-image`).
# Skips the build when the image exists and was built from the same inputs (the content
# of sandbox/ and the base image): the image carries a `planact.inputs` label with their hash.
# Environment:
#   SANDBOX_IMAGE         image to build         (default planact-sandbox:latest)
#   BASE_IMAGE            base image build arg    (default python:3.12-slim-bookworm)
#   DOCKER_BUILD_NETWORK  --network for RUN steps (e.g. host where dockerd runs --bridge=none)
#   FORCE=1               build even when up to date
set -euo pipefail
cd "$(dirname "$0")/../.."

image=${SANDBOX_IMAGE:-planact-sandbox:latest}
base=${BASE_IMAGE:-python:3.12-slim-bookworm}
say() { echo "build-sandbox.sh: $*" >&2; }

# inputs: every file under sandbox/ (path + content) and the base (name + local id if any)
base_id=$(docker image inspect -f '{{.Id}}' "$base" 2>/dev/null || echo "$base")
inputs=$( { find sandbox -type f -print0 | sort -z | xargs -0 sha256sum; \
            echo "base=$base $base_id"; } | sha256sum | cut -c1-32)

current=$(docker image inspect -f '{{index .Config.Labels "planact.inputs"}}' "$image" 2>/dev/null || true)
if [ "${FORCE:-0}" != 1 ] && [ "$current" = "$inputs" ]; then
  say "$image is up to date ($inputs)"
  exit 0
fi

args=(--build-arg "BASE_IMAGE=$base" --label "planact.inputs=$inputs" -t "$image")
[ -n "${DOCKER_BUILD_NETWORK:-}" ] && args+=(--network "$DOCKER_BUILD_NETWORK")
say "building $image from $base"
docker build "${args[@]}" sandbox
docker run --rm --network none --read-only "$image" sh /usr/local/lib/planact/check.sh >/dev/null
say "built $image"
