#!/usr/bin/env bash
# usage (repository root): bash benchmarks/results/mixed-residual/run.sh > benchmarks/results/mixed-residual/run.txt
# Builds, from committed H200 measurements: the shipped heuristics.db as it was before dfcf39d plus the skew grid's mixed batches
# (FP8 KV, page 16: ../h200-2026-12-05/mixedgrid-fp8-pg16.db.xz, its max_kv_len > kv_len rows), and the
# shipped db plus two random mixed sets (../h200-2026-12-06/mixedN.db.xz); scores them on the mixed sets,
# the serving replay and the off-grid sets with mixed_residual_k = 0 (the measured cells as plane points,
# before), 4, 8, 16.
set -euo pipefail
w=/tmp/mixed-residual; mkdir -p $w
r=benchmarks/results
T=".venv/bin/tuner"
# the shipped db before the skew grid's mixed batches were added to it (dfcf39d)
[ -f $w/base.db ] || git show dfcf39d~1:heuristics.db > $w/base.db
for s in 1 2 3; do [ -f $w/mixed$s.db ] || xz -dc $r/h200-2026-12-06/mixed$s.db.xz > $w/mixed$s.db; done
[ -f $w/replay.db ] || xz -dc $r/h200-2026-12-06/replay.db.xz > $w/replay.db
[ -f $w/offgrid1.db ] || xz -dc $r/h200-2026-12-05/offgrid-seed1.db.xz > $w/offgrid1.db
[ -f $w/offgrid2.db ] || xz -dc $r/h200-2026-12-06/offgrid2.db.xz > $w/offgrid2.db
if [ ! -f $w/skewgrid.db ]; then
  xz -dc $r/h200-2026-12-05/mixedgrid-fp8-pg16.db.xz > $w/mixedgrid.db
  $T export --db $w/mixedgrid.db --out $w/mixedgrid.jsonl > /dev/null
  python3 -c "
import json, sys
with open('$w/mixedgrid.jsonl') as f, open('$w/skew.jsonl', 'w') as o:
    o.writelines(l for l in f if (m := json.loads(l)['measurement'])['max_kv_len'] > m['kv_len'])"
  cp $w/base.db $w/skewgrid.db && $T import $w/skew.jsonl --db $w/skewgrid.db
fi
for pair in 23 13 12; do
  if [ ! -f $w/train$pair.db ]; then
    cp $w/base.db $w/train$pair.db
    for s in $(echo $pair | fold -w1); do
      $T export --db $w/mixed$s.db --out $w/mixed$s.jsonl > /dev/null; $T import $w/mixed$s.jsonl --db $w/train$pair.db
    done
  fi
done
score() {   # db set k
  echo "{\"mixed_residual_k\": $3}" > $w/k.json
  $T evaluate --db $1 --device "NVIDIA H200" --offgrid $w/$2.db --predictor-config $w/k.json --json | python3 -c "
import json, sys
r = json.load(sys.stdin); o = r['overall']['learned']; c = r['configs']
fp8 = [v['learned'] for k, v in c.items() if 'kv=fp8' in k]
slow = sum(v['learned'].get('slower_than_vllm-2026', 0) for v in c.values())
print(f\"{sys.argv[1]:12s} {sys.argv[2]:9s} k={sys.argv[3]:2s} regret {o['regret_geomean']:.4f} over {o['n']}, max {o['regret_max']:.2f}, \"
      f\"FP8-KV configs gm<=1.03 {sum(v['regret_geomean'] <= 1.03 for v in fp8)}/{len(fp8)}, max<=1.15 \"
      f\"{sum(v['regret_max'] <= 1.15 for v in fp8)}/{len(fp8)}, slower than vllm-2026 {slow}\")" "$(basename $1)" $2 $3
}
echo "== the shipped db before dfcf39d (no mixed batch measured)"
for set in mixed1 mixed2 mixed3 replay; do score $w/base.db $set 4; done
echo "== + the skew grid's mixed batches (FP8 KV, page 16; canonical one-long layout)"
for k in 0 4 8 16; do for set in mixed1 mixed2 mixed3 replay offgrid1 offgrid2; do score $w/skewgrid.db $set $k; done; done
echo "== + two random mixed sets (their own layouts), scored on the third"
for k in 0 4 8 16; do
  score $w/train23.db mixed1 $k; score $w/train13.db mixed2 $k; score $w/train12.db mixed3 $k; score $w/train12.db replay $k
done
