#!/usr/bin/env bash
# The adaptive search's own time on this machine (2 CPU cores), replayed on the H100's finished FP8-skew
# `--mixed` sweep: before (d926232) and after (4ad7acc: predictions remembered where the search asks), each
# commit's own code from `git archive`, the same script (benchmarks/search_time.py) at both; the picks must match.
#   bash benchmarks/results/search-memo/run.sh > benchmarks/results/search-memo/run.txt
set -euo pipefail
R=$PWD; W=$(mktemp -d); trap 'rm -rf "$W"' EXIT
PY=${PY:-$R/.venv/bin/python}
xz -dc benchmarks/results/h100-2026-12-06-fp8skew-sweep/mixedsweep.db.xz > $W/mixedsweep.db
for side in before:d926232 after:4ad7acc; do
  name=${side%:*}; mkdir -p $W/$name
  git archive ${side#*:} | tar -x -C $W/$name
  git show b98b6cc:benchmarks/search_time.py > $W/$name/benchmarks/search_time.py   # the script run.txt ran
  for run in 1 2; do
    echo -n "$name (${side#*:}), run $run: "
    # PYTHONPATH: the commit's own dispatcher, not the editable install's; errors shown, not hidden
    (cd $W/$name && PYTHONPATH=$W/$name PYTHONHASHSEED=0 $PY benchmarks/search_time.py $W/mixedsweep.db \
      --picked $W/$name.txt 2>$W/$name.err) || { echo "failed:"; tail -5 $W/$name.err; exit 1; }
  done
done
cmp -s $W/before.txt $W/after.txt && echo "picks: the same $(wc -l < $W/after.txt) points, in the same order" ||
  echo "picks differ: $(diff $W/before.txt $W/after.txt | grep -c '^[<>]') lines"
