#!/usr/bin/env bash
# usage (repository root, layout-risk.patch applied; mixed seeds 1-3 decompressed by
# ../h200-2026-12-05-mixedsweep/score.sh, seed 4 by `xz -dc benchmarks/results/prefill-tiles/mixed4.db.xz >
# /tmp/prefill-tiles/mixed4.db`, the H100's seed 5 by ../h100-2026-12-05/score.sh):
#   git apply benchmarks/results/tried-2026-12-05/layout-risk.patch && bash benchmarks/results/tried-2026-12-05/layout_risk.sh
for w in 0 0.5 1; do
  echo "{\"layout_risk\": $w}" > /tmp/lr$w.json
  for s in m1:/tmp/h200-2026-12-05-mixedsweep/mixed1.db m4:/tmp/prefill-tiles/mixed4.db m2:/tmp/h200-2026-12-05-mixedsweep/mixed2.db m3:/tmp/h200-2026-12-05-mixedsweep/mixed3.db; do
    n=${s%%:*}; db=${s#*:}
    .venv/bin/tuner evaluate --db heuristics.db --device "NVIDIA H200" --offgrid $db --predictor-config /tmp/lr$w.json --json > /tmp/lr-$w-$n.json
  done
  .venv/bin/tuner evaluate --db heuristics.db --device "NVIDIA H200" --offgrid /tmp/h100-2026-12-05/mixed5.db --measured-on "NVIDIA H100 80GB HBM3" --predictor-config /tmp/lr$w.json --json > /tmp/lr-$w-m5h100.json
  echo "== layout_risk $w"; python3 benchmarks/targets.py /tmp/lr-$w-m1.json /tmp/lr-$w-m4.json /tmp/lr-$w-m2.json /tmp/lr-$w-m3.json /tmp/lr-$w-m5h100.json | cut -c1-400
done
