#!/usr/bin/env bash
# usage (repository root): bash benchmarks/results/h100-2026-12-06-grid/score.sh > benchmarks/results/h100-2026-12-06-grid/score.txt
# The H100's own table (h100grid.db) and the shipped H200 heuristics.db, each choosing for the sets measured on H100s
# (off-grid seeds 3, 4, 5; mixed seeds 5, 6, 7), scored with those H100 times; the H100 table's grid hold-out; and the
# two tables compared point by point.
set -euo pipefail
here=$(dirname "$0"); r=benchmarks/results; w=/tmp/h100grid; mkdir -p $w
T=".venv/bin/tuner"; H="NVIDIA H100 80GB HBM3"
[ -f $w/h100grid.db ] || xz -dc $here/h100grid.db.xz > $w/h100grid.db
sets="h100-2026-12-05/offgrid3 h100-2026-12-05/offgrid4 h100-offgrid5-tiered/offgrid5 h100-2026-12-05/mixed5 h100-mixed6-7/mixed6 h100-mixed6-7/mixed7"
for s in $sets; do n=${s//\//_}; [ -f $w/$n.db ] || xz -dc $r/$s.db.xz > $w/$n.db; done
echo "== each table's choices, scored with the H100's times (benchmarks/targets.py, then speedup over each rule)"
for s in $sets; do
  n=${s//\//_}
  $T evaluate --db $w/h100grid.db --device "$H" --offgrid $w/$n.db --json > $w/own_$n.json
  $T evaluate --db heuristics.db --device "NVIDIA H200" --offgrid $w/$n.db --measured-on "$H" --json > $w/h200_$n.json
  for who in own h200; do
    python3 benchmarks/targets.py $w/${who}_$n.json | sed "s|^|$s |"
    python3 -c "
import json, math, sys
r = json.load(open(sys.argv[1]))
def pooled(rule):
    v = [c['learned'] for c in r['configs'].values() if c['learned']['n']]
    n = sum(c['n'] for c in v)
    return math.exp(sum(c['n'] * math.log(c['speedup_vs_' + rule]) for c in v) / n)
print(f'{sys.argv[2]} {sys.argv[3]}: speedup over vllm-0.33 {pooled(\"vllm-0.33\"):.4f}, over vllm-2026 {pooled(\"vllm-2026\"):.4f}')
" $w/${who}_$n.json $s $who
  done
done
echo "== the H100 table's grid hold-out (tuner evaluate --seed N)"
for seed in 0 1 2; do
  $T evaluate --db $w/h100grid.db --device "$H" --seed $seed --json | python3 -c "
import json, sys
o = json.load(sys.stdin)['overall']['learned']
print(f'seed {sys.argv[1]}: regret {o[\"regret_geomean\"]:.4f} over {o[\"n\"]}, max {o[\"regret_max\"]:.2f}, '
      f'{o[\"configs_within_target\"]}/{o[\"configs\"]} configurations within gm {o[\"target\"]}')" $seed
done
echo "== the same points on both GPUs"
PYTHONPATH=. .venv/bin/python $here/same_points.py heuristics.db $w/h100grid.db
