#!/usr/bin/env bash
# usage (repository root): bash benchmarks/results/dominated-floor/search-time.sh > benchmarks/results/dominated-floor/search-time.txt
# The adaptive search's own time (benchmarks/search_time.py) over the 5fc01c5 H100 sweep's database, at 4a7e4be
# (the floor in the search's ranking too) and at this tree (ranking by the unfloored times), each from its own
# checkout; "not in" counts the points chosen that the database lacks (0: the points that sweep measured).
set -euo pipefail
W=$(mktemp -d); PY=$PWD/.venv/bin/python
trap 'git worktree remove --force $W/at4a7e4be 2>/dev/null || true; rm -rf "$W"' EXIT
xz -dc benchmarks/results/h100-2026-12-07c-mixed-sweep/mixed.db.xz > $W/mixed.db
git worktree add -q --detach $W/at4a7e4be 4a7e4be
echo "$(nproc) CPUs; tree $(git rev-parse --short HEAD)"
for run in 1 2; do
  echo -n "4a7e4be, run $run: "; (cd $W/at4a7e4be && PYTHONPATH=. $PY benchmarks/search_time.py $W/mixed.db 2>/dev/null)
  echo -n "this tree, run $run: "; PYTHONPATH=. $PY benchmarks/search_time.py $W/mixed.db 2>/dev/null
done
