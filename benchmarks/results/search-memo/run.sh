#!/usr/bin/env bash
# The adaptive search's own time on this machine (2 CPU cores), replayed on the H100's finished FP8-skew
# `--mixed` sweep, before (d926232) and after the model remembers its predictions; the picks must be the same.
#   bash benchmarks/results/search-memo/run.sh > benchmarks/results/search-memo/run.txt
set -euo pipefail
R=$PWD; W=$(mktemp -d); trap 'git worktree remove --force "$W/before" 2>/dev/null; rm -rf "$W"' EXIT
PY=${PY:-$R/.venv/bin/python}
xz -dc benchmarks/results/h100-2026-12-06-fp8skew-sweep/mixedsweep.db.xz > $W/mixedsweep.db
git worktree add -q "$W/before" d926232
cp benchmarks/search_time.py "$W/before/benchmarks/"       # the same script at both commits
# PYTHONPATH: each side imports its own dispatcher, not the editable install's
for side in before after; do
  dir=$R; [ $side = before ] && dir=$W/before
  for run in 1 2; do
    echo -n "$side, run $run: "
    (cd "$dir" && PYTHONPATH="$dir" PYTHONHASHSEED=0 $PY benchmarks/search_time.py $W/mixedsweep.db --picked $W/$side.txt 2>/dev/null)
  done
done
cmp -s $W/before.txt $W/after.txt && echo "picks: the same $(wc -l < $W/after.txt) points, in the same order" ||
  echo "picks differ: $(diff $W/before.txt $W/after.txt | grep -c '^[<>]') lines"
