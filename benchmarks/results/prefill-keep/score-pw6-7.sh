#!/usr/bin/env bash
# Prefill-wave seeds 6 and 7, drawn and measured (on an H100, COMMAND) after prefill_between_keep was set to 12:
# keep 4 against 12, each set decided by the H100's own grid and by the shipped H200 table, on its H100 times.
#   bash benchmarks/results/prefill-keep/score-pw6-7.sh > benchmarks/results/prefill-keep/score-pw6-7.txt
set -euo pipefail
R=benchmarks/results; D=$R/prefill-keep; W=$(mktemp -d); trap 'rm -rf "$W"' EXIT
H="NVIDIA H100 80GB HBM3"; PY=${PY:-.venv/bin/python}
xz -dc $R/h100-2026-12-06-grid/h100grid.db.xz > $W/h100grid.db
for s in 6 7; do xz -dc $D/pw$s.db.xz > $W/pw$s.db; done
for k in 4 12; do
  echo "{\"prefill_between_keep\": $k}" > $W/k$k.json
  for s in 6 7; do
    $PY -m tuner evaluate --db $W/h100grid.db --device "$H" --offgrid $W/pw$s.db --predictor-config $W/k$k.json \
      --json > $W/pw$s-h100-k$k.json
    $PY -m tuner evaluate --db heuristics.db --device "NVIDIA H200" --offgrid $W/pw$s.db --measured-on "$H" \
      --predictor-config $W/k$k.json --json > $W/pw$s-h200-k$k.json
    for t in h100 h200; do $PY $D/summarize.py "k=$k" $W/pw$s-$t-k$k.json; done
  done
done
echo "== the issues' targets at keep 12 (benchmarks/targets.py)"
for s in 6 7; do for t in h100 h200; do $PY benchmarks/targets.py $W/pw$s-$t-k12.json | sed "s|^|$t table: |"; done; done
