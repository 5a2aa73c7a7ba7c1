#!/usr/bin/env bash
# usage (repository root): bash benchmarks/results/waves/score.sh > benchmarks/results/waves/score.txt
# The shipped heuristics.db, and the shipped db plus the 1.5-wave batches measured here (one-long.db.xz and
# spread.db.xz, each imported into its own copy), scored on every measured set of random mixed batches (seeds
# 1 and 4 choose, 2 and 3 and the H100's seed 5 report), the serving replay and the off-grid sets, and on the
# grid hold-out (seeds 0-2; the uniform batches at 1.5 waves are among the one-long points).
set -euo pipefail
here=$(dirname "$0"); r=benchmarks/results; w=/tmp/waves; mkdir -p $w
T=".venv/bin/tuner"
unxz() { [ -f $w/$2.db ] || xz -dc $1 > $w/$2.db; }
for s in 1 2 3; do unxz $r/h200-2026-12-06/mixed$s.db.xz mixed$s; done
unxz $r/prefill-tiles/mixed4.db.xz mixed4
unxz $r/h200-2026-12-06/replay.db.xz replay
unxz $r/h200-2026-12-05/offgrid-seed1.db.xz offgrid1
unxz $r/h200-2026-12-06/offgrid2.db.xz offgrid2
unxz $r/prefill-tiles/offgrid3.db.xz offgrid3
unxz $r/h100-2026-12-05/mixed5.db.xz h100-mixed5a
unxz $r/h100-2026-12-05b/mixed5.db.xz h100-mixed5b
cp heuristics.db $w/shipped.db
dbs="shipped"
for layout in one-long spread; do
  [ -f $here/$layout.db.xz ] || continue
  unxz $here/$layout.db.xz points-$layout
  if [ ! -f $w/with-$layout.db ]; then
    $T export --db $w/points-$layout.db --out $w/points-$layout.jsonl > /dev/null
    cp heuristics.db $w/with-$layout.db && $T import $w/points-$layout.jsonl --db $w/with-$layout.db > /dev/null
  fi
  dbs="$dbs with-$layout"
done
score() {   # db set [--measured-on NAME]
  $T evaluate --db $w/$1.db --device "NVIDIA H200" --offgrid $w/$2.db "${@:3}" --json | python3 -c "
import json, sys
r = json.load(sys.stdin); o = r['overall']['learned']; c = r['configs']
fp8 = [v['learned'] for k, v in c.items() if 'kv=fp8' in k and 'decode' in k]
slow = sum(v['learned'].get('slower_than_vllm-2026', 0) for v in c.values())
print(f\"{sys.argv[1]:14s} {sys.argv[2]:13s} regret {o['regret_geomean']:.4f} over {o['n']}, max {o['regret_max']:.2f}, \"
      f\"FP8-KV decode configs gm<=1.03 and max<=1.15: \"
      f\"{sum(v['regret_geomean'] <= 1.03 and v['regret_max'] <= 1.15 for v in fp8)}/{len(fp8)}, \"
      f\"all batches slower than vllm-2026 beyond noise {slow}\")" $1 $2
}
for db in $dbs; do
  echo "== $db"
  for set in mixed1 mixed4 mixed2 mixed3 replay offgrid1 offgrid2 offgrid3; do score $db $set; done
  for set in h100-mixed5a h100-mixed5b; do score $db $set --measured-on "NVIDIA H100 80GB HBM3"; done
  for seed in 0 1 2; do
    $T evaluate --db $w/$db.db --device "NVIDIA H200" --seed $seed --json | python3 -c "
import json, sys
o = json.load(sys.stdin)['overall']['learned']
print(f'{sys.argv[1]:14s} grid hold-out seed {sys.argv[2]}: regret {o[\"regret_geomean\"]:.4f} over {o[\"n\"]}')" $db $seed
  done
done
