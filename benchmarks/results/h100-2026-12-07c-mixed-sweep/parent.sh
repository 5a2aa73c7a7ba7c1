#!/usr/bin/env bash
# usage (repository root): bash benchmarks/results/h100-2026-12-07c-mixed-sweep/parent.sh > benchmarks/results/h100-2026-12-07c-mixed-sweep/parent.txt
# parent.py over call 1's database at 24affc0 (the earlier H100's tree) and at 5fc01c5 (this folder's), twice each,
# each from a git worktree of that commit (python -m and scripts put their own directory first on the path).
set -euo pipefail
R=benchmarks/results/h100-2026-12-07c-mixed-sweep; W=$(mktemp -d); PY=$PWD/.venv/bin/python
cleanup() { for c in 24affc0 5fc01c5; do git worktree remove --force $W/$c 2>/dev/null || true; done; rm -rf "$W"; }
trap cleanup EXIT
xz -dc $R/mixed.db.xz > $W/mixed.db
echo "$(nproc) CPUs: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2)"
for c in 24affc0 5fc01c5; do
  git worktree add -q --detach $W/$c $c
  cp $R/parent.py $W/$c/parent_time.py
  for run in 1 2; do echo -n "$c, run $run: "; (cd $W/$c && PYTHONPATH=. $PY parent_time.py $W/mixed.db 2>/dev/null); done
done
