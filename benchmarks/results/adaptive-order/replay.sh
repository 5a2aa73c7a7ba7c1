#!/usr/bin/env bash
# usage: bash benchmarks/results/adaptive-order/replay.sh [REPO]   (REPO: the checkout whose code runs, default .)
# Grids first decompressed: xz -dc benchmarks/results/<folder>/<name>.db.xz > /tmp/grids/<folder>_<name>.db
db_here=$PWD/heuristics.db
cd "${1:-.}" || exit 1
for g in /tmp/grids/h200-2026-12-03c_call2-sweep.db /tmp/grids/h200-2026-12-04b_callBC-grid.db \
         /tmp/grids/h200-2026-12-04c_callA-warm-grid.db /tmp/grids/h200-2026-12-04c_callB-cold-grid.db \
         /tmp/grids/h200-2026-12-04c_callC-warm-grid.db "$db_here"; do
  PYTHONPATH=. /work/main/.venv/bin/python -m tuner evaluate --db "$g" --device "NVIDIA H200" --adaptive 0.33 --json |
  python3 -c "
import json, sys
d = json.load(sys.stdin)
a, r = d['adaptive_overall'], d['random_overall']
print(f\"{sys.argv[1]:38s} measured {d['measured']} of {d['cells']}: adaptive {a['regret_geomean']:.4f} \"
      f\"({a['configs_within_target']}/{a['configs']} within 1.02), random {r['regret_geomean']:.4f} \"
      f\"({r['configs_within_target']}/{r['configs']})\")" "$(basename "$g")"
done
