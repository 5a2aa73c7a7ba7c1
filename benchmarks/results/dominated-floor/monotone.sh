#!/usr/bin/env bash
# usage (repository root): bash benchmarks/results/dominated-floor/monotone.sh > benchmarks/results/dominated-floor/monotone.txt
set -euo pipefail
D=benchmarks/results/dominated-floor; W=$(mktemp -d); trap 'rm -rf "$W"' EXIT; PY=.venv/bin/python
echo "tree $(git rev-parse --short HEAD)"
$PY $D/monotone.py heuristics.db "NVIDIA H200"
xz -dc benchmarks/results/h100-2026-12-06-grid/h100grid.db.xz > $W/h100grid.db
$PY $D/monotone.py $W/h100grid.db "NVIDIA H100 80GB HBM3"
