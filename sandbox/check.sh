#!/bin/sh
# Smoke check run by scripts/docker/build-sandbox.sh after a build: the tools are there.
set -eu
for tool in bash setsid sleep timeout kill python3 git gcc make; do
  command -v "$tool" >/dev/null 2>&1 || { echo "sandbox image lacks $tool" >&2; exit 1; }
done
python3 -c 'import venv, ssl' 
echo ok
