#!/usr/bin/env bash
# The issues' targets (benchmarks/targets.py) for the decisions, and for each shape's decision from a second
# measurement of the same set on another H100 (tuner evaluate --remeasured: the noise ceiling), on both runs'
# times. CPU replay, from the repository root:
#   bash benchmarks/results/h100-2026-12-07f-remeasured/score.sh > benchmarks/results/h100-2026-12-07f-remeasured/score.txt
set -euo pipefail
R=benchmarks/results; D=$R/h100-2026-12-07f-remeasured; W=$(mktemp -d); trap 'rm -rf $W' EXIT
T=.venv/bin/tuner; PY=.venv/bin/python; H100="NVIDIA H100 80GB HBM3"
echo "tree $(git rev-parse --short HEAD), heuristics.db sha256 $(sha256sum heuristics.db | cut -c1-8)"
u() { xz -dc $R/$1.db.xz > $W/$2.db; }
u h100-2026-12-07e-alone/offgrid7 og7
for n in og7again og8again mixed9again mixed10again; do xz -dc $D/$n.db.xz > $W/$n.db; done
u h100-2026-12-07e-alone/offgrid8 og8; u h100-2026-12-07c-mixed-sweep/mixed9 mixed9
u h100-2026-12-07d-mixed-sweep/mixed10 mixed10; u h100-2026-12-05/mixed5 mixed5; u h100-2026-12-05b/mixed5 mixed5again
u h100-2026-12-06-grid/h100grid h100grid
PAIRS="og7:og7again og8:og8again mixed5:mixed5again mixed9:mixed9again mixed10:mixed10again"
pids=()
for pair in $PAIRS; do IFS=: read a b <<< "$pair"
  for dir in "$a $b" "$b $a"; do set -- $dir
    $T evaluate --db heuristics.db --device "NVIDIA H200" --measured-on "$H100" --offgrid $W/$1.db --remeasured $W/$2.db \
      --json > $W/shipped-$1.json & pids+=($!)
    $T evaluate --db $W/h100grid.db --device "$H100" --offgrid $W/$1.db --remeasured $W/$2.db --json > $W/h100grid-$1.json &
    pids+=($!)
  done
done
for p in "${pids[@]}"; do wait $p; done      # set -e: a failed evaluation stops the script
for table in shipped h100grid; do
  echo; echo "## Decided by $([ $table = shipped ] && echo "the shipped H200 table" || echo "the H100's own grid (../h100-2026-12-06-grid/)"), on each run's times"
  for pair in $PAIRS; do IFS=: read a b <<< "$pair"
    for s in $a $b; do $PY benchmarks/targets.py $W/$table-$s.json | sed "s|^$table-||"; done
  done
done
echo; echo "## Per configuration, the same decisions judged on run 1's times and on run 2's: verdicts that differ"
$PY $D/flips.py $W $PAIRS
