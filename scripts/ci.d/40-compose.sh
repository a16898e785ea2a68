#!/usr/bin/env bash
# CI: the containerized deployment really runs (docker compose): build the app, sandbox and
# PostgreSQL images from the local Debian base, up, a run against the fake model with the
# docker runtime, downloads, restart persistence, down -v. See scripts/compose/verify.sh.
# The engine and base image steps are idempotent (20-docker.sh normally did them already).
set -euo pipefail
cd "$(dirname "$0")/../.."
say() { echo "40-compose.sh: $*" >&2; }

bash scripts/docker/engine.sh
bash scripts/docker/base-image.sh
started=$(date +%s)
# bounded: a first run (cold build caches) takes about 3 minutes here
timeout --kill-after=30 "${COMPOSE_CI_TIMEOUT:-1500}" bash scripts/compose/verify.sh
say "deployment verified in $(( $(date +%s) - started ))s"
