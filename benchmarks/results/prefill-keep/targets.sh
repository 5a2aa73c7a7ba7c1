#!/usr/bin/env bash
# The issues' targets (benchmarks/targets.py) for the shipped db at today's code, on the H200's committed sets:
# off-grid seeds 1-4 (issue 24) and mixed seeds 1-4 (issue 25).
#   bash benchmarks/results/prefill-keep/targets.sh > benchmarks/results/prefill-keep/targets.txt
set -euo pipefail
R=benchmarks/results; W=$(mktemp -d); trap 'rm -rf "$W"' EXIT; PY=${PY:-$PWD/.venv/bin/python}
xz -dc $R/h200-2026-12-05/offgrid-seed1.db.xz > $W/offgrid1.db; xz -dc $R/h200-2026-12-06/offgrid2.db.xz > $W/offgrid2.db
xz -dc $R/prefill-tiles/offgrid3.db.xz > $W/offgrid3.db; xz -dc $R/h200-offgrid4-waves/offgrid4.db.xz > $W/offgrid4.db
xz -dc $R/h200-2026-12-06/mixed1.db.xz > $W/mixed1.db; xz -dc $R/h200-2026-12-06/mixed2.db.xz > $W/mixed2.db
xz -dc $R/h200-2026-12-06/mixed3.db.xz > $W/mixed3.db; xz -dc $R/prefill-tiles/mixed4.db.xz > $W/mixed4.db
for s in offgrid1 offgrid2 offgrid3 offgrid4 mixed1 mixed2 mixed3 mixed4; do
  $PY -m tuner evaluate --db heuristics.db --device "NVIDIA H200" --offgrid $W/$s.db --json > $W/$s.json &
done; wait
(root=$PWD; cd $W && $PY "$root/benchmarks/targets.py" offgrid1.json offgrid2.json offgrid3.json offgrid4.json mixed1.json \
  mixed2.json mixed3.json mixed4.json)
echo "== worst shapes over 1.10 (1.15 for mixed batches), of each configuration's three worst"
for s in offgrid1 offgrid2 offgrid3 offgrid4 mixed1 mixed2 mixed3 mixed4; do
  $PY -c "
import json, sys
r = json.load(open(sys.argv[1])); lim = 1.15 if 'mixed' in sys.argv[2] else 1.10
for k, c in r['configs'].items():
    for w in c['learned']['worst']:
        if w['regret'] > lim:
            print(f\"{sys.argv[2]}: {k}: {w['shape']}: {w['regret']:.3f}x, chose {w['chose']} {w['chose_us']:.1f} us, best {w['best']} {w['best_us']:.1f} us\")
" $W/$s.json $s
done
