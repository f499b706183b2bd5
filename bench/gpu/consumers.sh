#!/usr/bin/env bash
# The maskers' device lane: the consumer column on a machine with CUDA (never in CI). Installs what it needs
# from PyPI into a fresh venv (torch 2.13.0 — on a GPU machine PyPI's default wheel is the CUDA build —,
# transformers 5.24.0, this checkout's packoracle; flash-attn only with FLASH=1, as it compiles from source),
# then runs bench/gpu/consumers.py on the GPU and writes its table to ${OUT:-.}/consumers_gpu.md.
# Meant to finish in under 10 minutes on a machine with 16 cores (most of it building the core).
set -euo pipefail
cd "$(dirname "$0")/../.."
. scripts/stage.sh
venv=${VENV:-build-gpu-venv}
out=${OUT:-.}
deps() {
  if command -v apt-get >/dev/null; then ./scripts/setup.sh --deps; fi
}
install() {
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet torch==2.13.0
  "$venv/bin/pip" install --quiet --progress-bar off "transformers==5.24.0" "numpy==2.4.6"
  CMAKE_BUILD_PARALLEL_LEVEL=$(nproc) "$venv/bin/pip" install --quiet --progress-bar off .
  if [ "${FLASH:-0}" = 1 ]; then
    MAX_JOBS=$(nproc) timeout 1800 "$venv/bin/pip" install --quiet --no-build-isolation flash-attn ||
      echo "consumers.sh: flash-attn did not install: its cells are left out"
  fi
}
stage "Debian packages" deps
stage "venv: torch, transformers, packoracle" install
"$venv/bin/python" -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, torch.cuda.get_device_name())'
stage "consumer column on CUDA" "$venv/bin/python" bench/gpu/consumers.py --device cuda --out "$out/consumers_gpu.md"
cat "$out/consumers_gpu.md"
