#!/usr/bin/env bash
# usage (repository root): bash benchmarks/results/waves/same_stats.sh > benchmarks/results/waves/same_stats.txt
# Two layouts of the same batches: one-long against spread (two
# statistics alike), and spread against tiered (kv_balance alike too) where tiered has been measured
# (tiered*.db.xz beside the spread databases; `benchmarks/wave_points.py --layout tiered`).
set -euo pipefail
R=benchmarks/results/waves; H=$R/h100-waves-1.2-1.75; py=".venv/bin/python $R/same_stats.py"
export PYTHONPATH=.
$py $R/one-long.db.xz $R/spread.db.xz "H200, 1.5 waves: one-long (A) against spread (B)"
$py $R/h100/one-long.db.xz $R/h100/spread.db.xz "H100, 1.5 waves: one-long (A) against spread (B)"
$py $H/long12.db.xz $H/spread12.db.xz "H100, 1.2 waves: one-long (A) against spread (B)"
$py $H/long175.db.xz $H/spread175.db.xz "H100, 1.75 waves: one-long (A) against spread (B)"
# tiered on the H100: ../h100-offgrid5-tiered/ (another H100 and day than the spread runs; compared on the batches
# both have)
N=benchmarks/results/h100-offgrid5-tiered
for pair in "$R/spread.db.xz $R/tiered.db.xz H200-1.5" "$R/h100/spread.db.xz $N/tiered.db.xz H100-1.5" \
            "$H/spread12.db.xz $N/tiered12.db.xz H100-1.2" "$H/spread175.db.xz $N/tiered175.db.xz H100-1.75"; do
  set -- $pair
  if [ -f "$2" ]; then $py "$1" "$2" "$3 waves: spread (A) against tiered (B), kv_balance alike"
  else echo "== $3 waves: spread against tiered: $2 not measured yet"; fi
done
