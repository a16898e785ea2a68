#!/usr/bin/env bash
# CI: bubblewrap for the local runtime's sandbox (LOCAL_SANDBOX). Installs Debian's
# bubblewrap when missing, checks that a sandboxed command runs, and exports REQUIRE_BWRAP=1
# so that the local-bwrap tests fail instead of skipping.
set -euo pipefail
say() { echo "15-bubblewrap.sh: $*" >&2; }

if ! command -v bwrap >/dev/null 2>&1; then
  say "installing bubblewrap"
  apt-get update -q >/dev/null
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q bubblewrap >/dev/null
fi
if ! bwrap --unshare-all --die-with-parent --ro-bind /usr /usr --symlink usr/bin /bin \
    --symlink usr/lib /lib --symlink usr/lib64 /lib64 --proc /proc --dev /dev true; then
  say "bwrap is installed but cannot create a sandbox here (user namespaces?)"
  exit 1
fi
say "$(bwrap --version) works"
echo "REQUIRE_BWRAP=1" >> "${CI_ENV_FILE:?CI_ENV_FILE is set by .ci/run}"
