#!/usr/bin/env bash
# Seed 7 is one draw of 591 serving shapes. Other draws of 600 from the H100's measured off-grid seeds 3-7
# (2970 shapes): five at random and one by the grid model's doubt (the adaptive search's order), each added
# to the H100 grid as measured alone (and, for contrast, read as grid points: alone_k 0) and scored on seed 8.
# CPU replay:
#   bash benchmarks/results/h100-2026-12-07e-alone/draws.sh > benchmarks/results/h100-2026-12-07e-alone/draws.txt
set -euo pipefail
R=benchmarks/results; D=$R/h100-2026-12-07e-alone; W=$(mktemp -d); trap 'rm -rf $W' EXIT
T=.venv/bin/tuner; PY=.venv/bin/python; H100="NVIDIA H100 80GB HBM3"
echo "tree $(git rev-parse --short HEAD)"
u() { xz -dc $R/$1.db.xz > $W/$2.db; }
u h100-2026-12-06-grid/h100grid hgrid; u h100-2026-12-05/offgrid3 h3; u h100-2026-12-05/offgrid4 h4
u h100-offgrid5-tiered/offgrid5 h5; u h100-2026-12-07c-mixed-sweep/offgrid6 h6; u h100-2026-12-07e-alone/offgrid7 og7
u h100-2026-12-07e-alone/offgrid8 og8
echo '{"alone_k": 0}' > $W/grid.json
for mode in random:0 random:1 random:2 random:3 random:4 doubt; do
  PYTHONPATH=. $PY $D/select.py $W/hgrid.db "$H100" 600 $mode $W/pick.jsonl $W/h3.db $W/h4.db $W/h5.db $W/h6.db $W/og7.db > /dev/null
  cp $W/hgrid.db $W/t.db; $T import $W/pick.jsonl --db $W/t.db > /dev/null
  $T evaluate --db $W/t.db --device "$H100" --offgrid $W/og8.db --json > $W/t.json
  echo "$mode, measured alone: $($PY benchmarks/targets.py $W/t.json | cut -d: -f2-)"
  $T evaluate --db $W/t.db --device "$H100" --offgrid $W/og8.db --predictor-config $W/grid.json --json > $W/t.json
  echo "$mode, as grid points: $($PY benchmarks/targets.py $W/t.json | cut -d: -f2-)"
done
