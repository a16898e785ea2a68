#!/usr/bin/env bash
# Build the local Debian base image `planact-base:bookworm` from a debootstrap root
# filesystem, for machines without an image registry (CI). Skips when the image exists
# (FORCE=1 rebuilds). Holds what the sandbox and the app images need so that their builds
# need little network: python3 (+venv, pip, dev headers), ca-certificates, git, gcc/g++/make,
# curl, procps, tini, file, patch.
# Environment:
#   BASE_IMAGE_NAME  image name          (default planact-base:bookworm)
#   DEBIAN_MIRROR    Debian mirror URL   (default: taken from the host's apt sources,
#                                         else http://deb.debian.org/debian)
#   SUITE            Debian suite        (default bookworm)
set -euo pipefail

name=${BASE_IMAGE_NAME:-planact-base:bookworm}
suite=${SUITE:-bookworm}
say() { echo "base-image.sh: $*" >&2; }

if [ "${FORCE:-0}" != 1 ] && docker image inspect "$name" >/dev/null 2>&1; then
  say "$name exists; skipping (FORCE=1 rebuilds)"
  exit 0
fi

sudo_=()
[ "$(id -u)" -eq 0 ] || sudo_=(sudo -n)

if ! command -v debootstrap >/dev/null 2>&1; then
  say "installing debootstrap"
  "${sudo_[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q debootstrap \
    || { "${sudo_[@]}" apt-get update -q && \
         "${sudo_[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q debootstrap; }
fi

mirror=${DEBIAN_MIRROR:-}
if [ -z "$mirror" ]; then
  # first Debian main archive in the host's sources (deb822 or one-line form)
  mirror=$(cat /etc/apt/sources.list.d/*.sources /etc/apt/sources.list.d/*.list \
             /etc/apt/sources.list 2>/dev/null \
           | grep -oE 'https?://[^ ]*/debian/?( |$)' | grep -v security | head -1 | tr -d ' ' || true)
  mirror=${mirror:-http://deb.debian.org/debian}
fi
mirror=${mirror%/}

packages=python3,python3-venv,python3-pip,python3-dev,ca-certificates,git,gcc,g++,libc6-dev,make,curl,procps,tini,less,file,patch,xz-utils,bzip2,unzip
root=$(mktemp -d /var/tmp/planact-base.XXXXXX)
cleanup() { "${sudo_[@]}" rm -rf "$root"; }
trap cleanup EXIT

say "debootstrap $suite from $mirror into $root (a few minutes)"
"${sudo_[@]}" debootstrap --variant=minbase --include="$packages" "$suite" "$root" "$mirror" \
  >"$root.log" 2>&1 || { tail -30 "$root.log" >&2; exit 1; }
rm -f "$root.log"

# apt sources for later builds (updates + security), no caches, no host leftovers
"${sudo_[@]}" tee "$root/etc/apt/sources.list" >/dev/null <<SOURCES
deb $mirror $suite main
deb $mirror $suite-updates main
deb ${mirror%/debian}/debian-security $suite-security main
SOURCES
"${sudo_[@]}" rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/* \
  "$root"/tmp/* "$root"/var/log/* "$root"/etc/machine-id "$root"/etc/hostname
"${sudo_[@]}" ln -sf python3 "$root/usr/bin/python"

say "importing as $name"
"${sudo_[@]}" tar -C "$root" --numeric-owner -c . | docker import \
  --change 'ENV LANG=C.UTF-8' \
  --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
  --change 'CMD ["/bin/bash"]' \
  --message "planact local base: debootstrap $suite minbase" \
  - "$name" >/dev/null
say "built $name ($(docker image inspect -f '{{.Size}}' "$name" | awk '{printf "%.0f MB", $1/1e6}'))"
