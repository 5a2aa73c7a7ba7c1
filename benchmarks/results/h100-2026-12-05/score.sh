#!/usr/bin/env bash
# usage (repository root): bash benchmarks/results/h100-2026-12-05/score.sh > benchmarks/results/h100-2026-12-05/score.txt
# The shipped heuristics.db (learned on the H200) chooses for every shape of off-grid seeds 3 and 4 and mixed seed 5;
# each choice is scored with the times the H100 measured for it there (tuner evaluate --measured-on).
set -euo pipefail
here=$(dirname "$0"); w=/tmp/h100-2026-12-05; mkdir -p $w
T=".venv/bin/tuner"
for s in offgrid3 offgrid4 mixed5; do
  [ -f $w/$s.db ] || xz -dc $here/$s.db.xz > $w/$s.db
  echo "+ tuner evaluate --db heuristics.db --device \"NVIDIA H200\" --offgrid $s.db --measured-on \"NVIDIA H100 80GB HBM3\""
  COLUMNS=200 $T evaluate --db heuristics.db --device "NVIDIA H200" --offgrid $w/$s.db --measured-on "NVIDIA H100 80GB HBM3"
  $T evaluate --db heuristics.db --device "NVIDIA H200" --offgrid $w/$s.db --measured-on "NVIDIA H100 80GB HBM3" \
    --json > $w/$s.json
done
echo "+ python benchmarks/targets.py offgrid3.json offgrid4.json mixed5.json"
python3 benchmarks/targets.py $w/offgrid3.json $w/offgrid4.json $w/mixed5.json
