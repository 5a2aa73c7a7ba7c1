#!/usr/bin/env bash
# usage (repository root): bash benchmarks/results/h200-2026-12-05-mixedsweep/score.sh > benchmarks/results/h200-2026-12-05-mixedsweep/score.txt
# Scores the shipped heuristics.db, and the shipped db plus the mixed batches of the `--mixed` adaptive sweep
# measured here (its max_kv_len > kv_len rows, imported as ../mixed-residual/run.sh imports the skew grid's),
# on every measured set of random mixed batches, the serving replay and the off-grid sets.
set -euo pipefail
here=$(dirname "$0"); r=benchmarks/results; w=/tmp/h200-2026-12-05-mixedsweep; mkdir -p $w
T=".venv/bin/tuner"
unxz() { [ -f $w/$2.db ] || xz -dc $1 > $w/$2.db; }
unxz $here/mixedsweep.db.xz sweep
for s in 1 2 3; do unxz $r/h200-2026-12-06/mixed$s.db.xz mixed$s; done
unxz $r/h200-2026-12-06/replay.db.xz replay
unxz $r/h200-2026-12-05/offgrid-seed1.db.xz offgrid1
unxz $r/h200-2026-12-06/offgrid2.db.xz offgrid2
sets="mixed1 mixed2 mixed3 replay offgrid1 offgrid2"
[ -f $here/mixed4.db.xz ] && unxz $here/mixed4.db.xz mixed4 && sets="$sets mixed4"
[ -f $here/offgrid3.db.xz ] && unxz $here/offgrid3.db.xz offgrid3 && sets="$sets offgrid3"
cp heuristics.db $w/shipped.db
if [ ! -f $w/withsweep.db ]; then
  $T export --db $w/sweep.db --out $w/sweep.jsonl > /dev/null
  python3 -c "
import json
with open('$w/sweep.jsonl') as f, open('$w/sweep-mixed.jsonl', 'w') as o:
    o.writelines(l for l in f if (m := json.loads(l)['measurement'])['max_kv_len'] > m['kv_len'])"
  cp heuristics.db $w/withsweep.db && $T import $w/sweep-mixed.jsonl --db $w/withsweep.db
fi
score() {   # db set k
  echo "{\"mixed_residual_k\": $3}" > $w/k.json
  $T evaluate --db $w/$1.db --device "NVIDIA H200" --offgrid $w/$2.db --predictor-config $w/k.json --json | python3 -c "
import json, sys
r = json.load(sys.stdin); o = r['overall']['learned']; c = r['configs']
fp8 = [v['learned'] for k, v in c.items() if 'kv=fp8' in k]
slow = sum(v['learned'].get('slower_than_vllm-2026', 0) for v in c.values())
print(f\"{sys.argv[1]:10s} {sys.argv[2]:9s} k={sys.argv[3]:2s} regret {o['regret_geomean']:.4f} over {o['n']}, max {o['regret_max']:.2f}, \"
      f\"FP8-KV configs gm<=1.03 {sum(v['regret_geomean'] <= 1.03 for v in fp8)}/{len(fp8)}, max<=1.15 \"
      f\"{sum(v['regret_max'] <= 1.15 for v in fp8)}/{len(fp8)}, slower than vllm-2026 {slow}\")" $1 $2 $3
}
echo "== the shipped heuristics.db (the FP8 skew grid's 134 mixed batches in it)"
for set in $sets; do score shipped $set 4; done
echo "== + this sweep's mixed batches (every page-16 configuration)"
for k in 4 8; do for set in $sets; do score withsweep $set $k; done; done
