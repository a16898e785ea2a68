#!/usr/bin/env bash
# Web UI prerequisites for CI: Chromium for the browser tests in tests/ui (from apt, never
# a Playwright browser download) and the frontend's node modules. Afterwards the browser
# tests are mandatory: REQUIRE_BROWSER=1 makes them fail instead of skip without Chromium.
set -euo pipefail
cd "$(dirname "$0")/../.."

say() { echo "30-chromium.sh: $*" >&2; }

sudo_=()
[ "$(id -u)" -eq 0 ] || sudo_=(sudo -n)

if [ ! -x /usr/bin/chromium ]; then
  say "installing chromium"
  # another apt may hold the lock (e.g. a provisioning step): wait for it
  for _ in $(seq 1 300); do
    if ! "${sudo_[@]}" fuser /var/lib/dpkg/lock-frontend >/dev/null 2>&1 \
        && ! "${sudo_[@]}" fuser /var/lib/dpkg/lock >/dev/null 2>&1; then
      break
    fi
    sleep 1
  done
  export DEBIAN_FRONTEND=noninteractive
  "${sudo_[@]}" apt-get update
  "${sudo_[@]}" apt-get install -y --no-install-recommends chromium
fi
/usr/bin/chromium --version >&2 || true

if ! command -v npm >/dev/null 2>&1; then
  say "npm is missing: installing nodejs and npm"
  export DEBIAN_FRONTEND=noninteractive
  "${sudo_[@]}" apt-get update
  "${sudo_[@]}" apt-get install -y --no-install-recommends nodejs npm
fi

# node deps (npm ci) and the built UI, only when out of date
make frontend

if [ -n "${CI_ENV_FILE:-}" ]; then
  echo "REQUIRE_BROWSER=1" >>"$CI_ENV_FILE"
fi
