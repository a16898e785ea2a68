#!/usr/bin/env bash
# Make sure a Docker engine answers `docker info`.
# Idempotent: installs docker.io when `docker`/`dockerd` are missing (Debian/Ubuntu, as
# root), starts dockerd in the background when nothing answers, waits until it does.
# Environment:
#   DOCKERD_LOG      dockerd log file            (default /tmp/dockerd.log)
#   DOCKERD_ARGS     extra dockerd arguments      (default: none)
#   DOCKER_WAIT      seconds to wait for answers (default 60)
set -euo pipefail

log=${DOCKERD_LOG:-/tmp/dockerd.log}
wait_s=${DOCKER_WAIT:-60}

say() { echo "engine.sh: $*" >&2; }

if docker info >/dev/null 2>&1; then
  say "engine answers"
  exit 0
fi

sudo_=()
[ "$(id -u)" -eq 0 ] || sudo_=(sudo -n)

if ! command -v dockerd >/dev/null 2>&1; then
  say "installing docker.io"
  # another apt may be running (e.g. a provisioning step): wait for its lock
  for _ in $(seq 1 300); do
    if ! "${sudo_[@]}" fuser /var/lib/dpkg/lock-frontend >/dev/null 2>&1 \
        && ! "${sudo_[@]}" fuser /var/lib/dpkg/lock >/dev/null 2>&1; then
      break
    fi
    sleep 2
  done
  "${sudo_[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q docker.io \
    || { "${sudo_[@]}" apt-get update -q && \
         "${sudo_[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q docker.io; }
fi

start_dockerd() {
  local driver=$1
  say "starting dockerd (storage driver $driver), log: $log"
  # --bridge=none/--iptables=false: works in hosts without iptables/NAT (CI sandboxes);
  # the runtime's containers use network_mode=none by default anyway.
  # shellcheck disable=SC2086
  "${sudo_[@]}" nohup dockerd --iptables=false --bridge=none --storage-driver="$driver" \
    ${DOCKERD_ARGS:-} >>"$log" 2>&1 &
  local pid=$!
  for _ in $(seq 1 $((wait_s * 4))); do
    if docker info >/dev/null 2>&1; then
      say "engine answers (dockerd pid $pid)"
      return 0
    fi
    if ! kill -0 "$pid" 2>/dev/null; then
      say "dockerd exited; see $log"
      return 1
    fi
    sleep 0.25
  done
  say "dockerd did not answer within ${wait_s}s; see $log"
  "${sudo_[@]}" kill "$pid" 2>/dev/null || true
  return 1
}

if ! pgrep -x dockerd >/dev/null 2>&1; then
  start_dockerd overlay2 || start_dockerd vfs || { tail -20 "$log" >&2; exit 1; }
else
  say "dockerd is running; waiting for it to answer"
  for _ in $(seq 1 $((wait_s * 4))); do
    docker info >/dev/null 2>&1 && { say "engine answers"; exit 0; }
    sleep 0.25
  done
  say "dockerd runs but does not answer; see $log"
  exit 1
fi
