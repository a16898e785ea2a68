#!/usr/bin/env bash
# Metrics prerequisites for CI: Debian's Prometheus, which the metrics tests start on a free
# port to scrape a real server and a real worker (tests/observe). Afterwards those tests are
# mandatory: REQUIRE_PROMETHEUS=1 makes them fail instead of skip without it.
set -euo pipefail

say() { echo "35-prometheus.sh: $*" >&2; }

sudo_=()
[ "$(id -u)" -eq 0 ] || sudo_=(sudo -n)

if ! command -v prometheus >/dev/null 2>&1; then
  say "installing prometheus"
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
  # the binary only: the package's service is not started by the tests (policy-rc.d aside,
  # a container has no init to start it)
  "${sudo_[@]}" apt-get install -y --no-install-recommends prometheus
fi
prometheus --version 2>&1 | head -1 >&2 || true

if [ -n "${CI_ENV_FILE:-}" ]; then
  echo "REQUIRE_PROMETHEUS=1" >>"$CI_ENV_FILE"
fi
