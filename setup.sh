#!/usr/bin/env bash
# One command to set Switchyard up on a fresh machine: ./setup.sh
# Makes .venv, takes the CPU build of torch where there is no NVIDIA GPU (a bare `torch`
# requirement would pull a multi-GB CUDA build), then installs Switchyard with its test extras;
# with a GPU it adds the flashinfer extra.
set -euo pipefail
cd "$(dirname "$0")"
PY=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$PY" -m venv .venv
pip() { .venv/bin/python -m pip "$@"; }
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
  pip install -q -e '.[dev,cuda]'
else
  .venv/bin/python -c 'import torch' 2>/dev/null || pip install -q "torch==${TORCH_CPU_VERSION:-2.13.0}"
  pip install -q -e '.[dev]'
fi
.venv/bin/tuner --help >/dev/null
echo "ready: source .venv/bin/activate  (then: tuner sweep --model llama4-scout)"
