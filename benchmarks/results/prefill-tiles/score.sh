#!/usr/bin/env bash
# usage (repository root): bash benchmarks/results/prefill-tiles/score.sh > benchmarks/results/prefill-tiles/score.txt
# The heuristics.db before the tile set (7e2c13a, read with tile_weight 0: the model before dc31a72) and the
# shipped one (it plus the prefill tile set measured here, tiles.db.xz; tile_weight 8, the default), scored
# on the off-grid sets (seeds 1-2 chose the set and tile_weight; seed 3, measured in the same call, reports)
# and the grid hold-out on the cells of the db before.
set -euo pipefail
here=$(dirname "$0"); r=benchmarks/results; w=/tmp/prefill-tiles; mkdir -p $w
T=".venv/bin/tuner"
unxz() { [ -f $w/$2.db ] || xz -dc $1 > $w/$2.db; }
unxz $here/tiles.db.xz tiles
unxz $r/h200-2026-12-05/offgrid-seed1.db.xz offgrid1
unxz $r/h200-2026-12-06/offgrid2.db.xz offgrid2
unxz $here/offgrid3.db.xz offgrid3
git show 7e2c13a:heuristics.db > $w/before.db
echo '{"tile_weight": 0}' > $w/before.json
for db in $w/before.db heuristics.db; do
  cfg=(); [ $db = $w/before.db ] && cfg=(--predictor-config $w/before.json)
  echo "== $db ${cfg[*]}"
  for s in offgrid1 offgrid2 offgrid3; do
    $T evaluate --db $db --device "NVIDIA H200" --offgrid $w/$s.db "${cfg[@]}" --json | python3 -c "
import json, sys
r = json.load(sys.stdin); o = r['overall']['learned']; c = r['configs']
ok = sum(v['learned']['regret_geomean'] <= 1.02 and v['learned']['regret_max'] <= 1.10 for v in c.values())
slow = sum(v['learned']['speedup_vs_vllm-2026'] < 1 for v in c.values())
beyond = sum(v['learned']['slower_than_vllm-2026'] for v in c.values())
print(f\"{sys.argv[1]}: regret {o['regret_geomean']:.4f} over {o['n']}, max {o['regret_max']:.3f}; configs within gm 1.02 and max 1.10: \"
      f\"{ok}/{len(c)}; slower than vllm-2026 on average: {slow}, beyond noise: {beyond} shapes\")
for k, v in c.items():
    l = v['learned']
    if k.startswith('prefill'):
        print(f\"    {k:32s} gm {l['regret_geomean']:.4f} max {l['regret_max']:.3f} vs vllm-2026 {l['speedup_vs_vllm-2026']:.4f}\")
    for w in l['worst']:
        if w['regret'] > 1.10:
            print(f\"      {w['shape']}: {w['regret']:.3f} ({w['chose']}, best {w['best']})\")" $s
  done
done
echo "== grid hold-out on the cells of the db before (fit on the rest; \"with extra\": plus the tile set)"
PYTHONPATH=. .venv/bin/python $r/mixed-residual/holdout_same_cells.py heuristics.db $w/before.db
