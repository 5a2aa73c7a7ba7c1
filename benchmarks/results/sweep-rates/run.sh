#!/usr/bin/env bash
# usage (repository root): bash benchmarks/results/sweep-rates/run.sh > benchmarks/results/sweep-rates/rates.txt
set -euo pipefail
r=benchmarks/results; w=/tmp/sweep-rates; mkdir -p $w
for f in h200-2026-12-05/full-grid-cudnn h200-2026-12-05/mixedgrid-fp8-pg16 h200-2026-12-05/offgrid-seed1 \
         h200-2026-12-06/mixed3; do
  [ -f $w/$(basename $f).db ] || xz -dc $r/$f.db.xz > $w/$(basename $f).db
done
echo "+ python benchmarks/results/sweep-rates/rates.py (each database measured in one device call)"
python3 $r/sweep-rates/rates.py $w/full-grid-cudnn.db $w/offgrid-seed1.db $w/mixed3.db $w/mixedgrid-fp8-pg16.db
