#!/usr/bin/env bash
# Two keep factors tried on the CPU after prefill_between_keep went to 12 (../prefill-keep/); neither landed.
#   bash benchmarks/results/tried-keep-factors/run.sh > benchmarks/results/tried-keep-factors/run.txt
# 1. ragged_keep (a mixed batch read from uniform ones) at 1-16, on the H200 mixed seeds 1-4 (choice sets for mixed
#    settings: 1 and 4) and the H100 mixed seeds 5-7 (shipped table, H100 times), benchmarks/targets.py's line each.
# 2. a decode keep factor at a decode batch size never measured (decode_keep.py), 1 (as shipped), 4 and 12, on the
#    H200 off-grid seeds 1-4 (shipped table) and the H100 off-grid seeds 3-5 (the H100's own grid).
set -euo pipefail
R=benchmarks/results; T=$R/tried-keep-factors; W=$(mktemp -d); trap 'rm -rf "$W"' EXIT
H="NVIDIA H100 80GB HBM3"; PY=${PY:-.venv/bin/python}
xz -dc $R/h200-2026-12-06/mixed1.db.xz > $W/m1.db; xz -dc $R/h200-2026-12-06/mixed2.db.xz > $W/m2.db
xz -dc $R/h200-2026-12-06/mixed3.db.xz > $W/m3.db; xz -dc $R/prefill-tiles/mixed4.db.xz > $W/m4.db
xz -dc $R/h100-2026-12-05b/mixed5.db.xz > $W/h5.db
for s in 6 7; do xz -dc $R/h100-mixed6-7/mixed$s.db.xz > $W/h$s.db; done
xz -dc $R/h200-2026-12-05/offgrid-seed1.db.xz > $W/og1.db; xz -dc $R/h200-2026-12-06/offgrid2.db.xz > $W/og2.db
xz -dc $R/prefill-tiles/offgrid3.db.xz > $W/og3.db; xz -dc $R/h200-offgrid4-waves/offgrid4.db.xz > $W/og4.db
xz -dc $R/h100-2026-12-05/offgrid3.db.xz > $W/ho3.db; xz -dc $R/h100-2026-12-05/offgrid4.db.xz > $W/ho4.db
xz -dc $R/h100-offgrid5-tiered/offgrid5.db.xz > $W/ho5.db
xz -dc $R/h100-2026-12-06-grid/h100grid.db.xz > $W/h100grid.db
echo "== 1. ragged_keep (shipped: 4)"
for k in 1 2 4 8 16; do
  echo "{\"ragged_keep\": $k}" > $W/rk$k.json
  for s in m1 m2 m3 m4; do
    $PY -m tuner evaluate --db heuristics.db --device "NVIDIA H200" --offgrid $W/$s.db --predictor-config $W/rk$k.json \
      --json > $W/$s-rk$k.json &
  done
  for s in h5 h6 h7; do
    $PY -m tuner evaluate --db heuristics.db --device "NVIDIA H200" --offgrid $W/$s.db --measured-on "$H" \
      --predictor-config $W/rk$k.json --json > $W/$s-rk$k.json &
  done; wait
  for s in m1 m4 m2 m3 h5 h6 h7; do echo -n "ragged_keep $k: "; $PY benchmarks/targets.py $W/$s-rk$k.json; done
done
echo "== 2. a decode keep factor at unmeasured decode batch sizes (shipped: none, i.e. 1)"
for k in 1 4 12; do
  for s in og1 og2 og3 og4; do
    DECODE_KEEP=$k $PY $T/decode_keep.py evaluate --db heuristics.db --device "NVIDIA H200" --offgrid $W/$s.db \
      --json > $W/$s-dk$k.json &
  done
  for s in ho3 ho4 ho5; do
    DECODE_KEEP=$k $PY $T/decode_keep.py evaluate --db $W/h100grid.db --device "$H" --offgrid $W/$s.db \
      --json > $W/$s-dk$k.json &
  done; wait
  for s in og1 og2 og3 og4 ho3 ho4 ho5; do $PY $R/prefill-keep/summarize.py "dk=$k" $W/$s-dk$k.json; done
done
