#!/usr/bin/env bash
# usage (repository root): bash benchmarks/results/h100-offgrid5-tiered/score.sh > benchmarks/results/h100-offgrid5-tiered/score.txt
# Off-grid seed 5 (measured here on an H100): the shipped heuristics.db (learned on the H200) chooses for each shape,
# scored with the H100's times (tuner evaluate --measured-on), and the issue's targets checked on that.
# The tiered layouts against the spread ones: ../waves/same_stats.sh (same_stats.txt there).
set -euo pipefail
here=$(dirname "$0"); w=/tmp/h100-offgrid5-tiered; mkdir -p $w
T=".venv/bin/tuner"
[ -f $w/offgrid5.db ] || xz -dc $here/offgrid5.db.xz > $w/offgrid5.db
echo "+ tuner evaluate --db heuristics.db --device \"NVIDIA H200\" --offgrid offgrid5.db --measured-on \"NVIDIA H100 80GB HBM3\""
$T evaluate --db heuristics.db --device "NVIDIA H200" --offgrid $w/offgrid5.db --measured-on "NVIDIA H100 80GB HBM3"
$T evaluate --db heuristics.db --device "NVIDIA H200" --offgrid $w/offgrid5.db --measured-on "NVIDIA H100 80GB HBM3" \
  --json > $w/offgrid5.json
echo "+ python benchmarks/targets.py offgrid5.json"
python3 benchmarks/targets.py $w/offgrid5.json
