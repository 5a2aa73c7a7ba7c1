#!/usr/bin/env bash
# CPU replay of committed H200 and H100 databases (no device; setup.sh's .venv): measured mixed batches of a BF16
# KV cache, read as corrections to the ragged prior (PredictorConfig.mixed_residual_16bit_kv 1, as before) or left
# out of the model (0, the default now), on every measured set of random mixed batches of the same GPU.
#   bash benchmarks/results/bf16-mixed-corrections/run.sh > benchmarks/results/bf16-mixed-corrections/run.txt
set -euo pipefail
D=benchmarks/results/bf16-mixed-corrections; R=benchmarks/results
W=$(mktemp -d); trap 'rm -rf "$W"' EXIT
T=".venv/bin/tuner"; PY=".venv/bin/python"
unpack() { xz -dc $R/$1.db.xz > $W/$2.db; }
unpack h200-2026-12-05-mixedsweep/mixedsweep h200sweep; unpack h100-2026-12-06-mixedsweep/mixedsweep h100sweep
unpack h200-2026-12-06/mixed1 mixed1; unpack h200-2026-12-06/mixed2 mixed2; unpack h200-2026-12-06/mixed3 mixed3
unpack prefill-tiles/mixed4 mixed4; unpack h200-2026-12-06/replay replay
unpack h100-2026-12-05b/mixed5 mixed5; unpack h100-mixed6-7/mixed6 mixed6; unpack h100-mixed6-7/mixed7 mixed7
mixed_of() {   # DB OUT.jsonl [KV]: the mixed batches measured in DB (of KV-cache dtype KV only)
  $T export --db $1 --out $W/export.jsonl > /dev/null
  $PY -c "
import json, sys
with open(sys.argv[1]) as f, open(sys.argv[2], 'w') as o:
    o.writelines(l for l in f if (m := json.loads(l)['measurement'])['max_kv_len'] > m['kv_len']
                 and sys.argv[3] in ('', m['kv_dtype']))" $W/export.jsonl $2 "${3:-}"
}
# H200 tables: the shipped db; + the page-16 --mixed sweep's mixed batches (all eight decode configurations);
# + mixed seed 1's BF16-KV batches. H100: its whole --mixed adaptive sweep; its uniform points alone.
cp heuristics.db $W/shipped.db
mixed_of $W/h200sweep.db $W/sweep-mixed.jsonl; cp heuristics.db $W/h200sweep-table.db
$T import $W/sweep-mixed.jsonl --db $W/h200sweep-table.db > /dev/null
mixed_of $W/mixed1.db $W/seed1-bf16.jsonl bf16; cp heuristics.db $W/seed1bf16-table.db
$T import $W/seed1-bf16.jsonl --db $W/seed1bf16-table.db > /dev/null
cp $W/h100sweep.db $W/h100uniform.db
sqlite3 $W/h100uniform.db "delete from measurements where max_kv_len > kv_len; delete from winners where max_kv_len > kv_len;"
echo '{"mixed_residual_16bit_kv": 1}' > $W/with16.json; echo '{}' > $W/default.json
run() {   # TABLE DEVICE SETS...
  local table=$1 dev=$2; shift 2
  for s in "$@"; do for c in default with16; do
    $T evaluate --db $W/$table.db --device "$dev" --offgrid $W/$s.db --predictor-config $W/$c.json --json \
      > $W/$table-$s-$c.json 2>/dev/null &
  done; done; wait
}
H200="NVIDIA H200"; H100="NVIDIA H100 80GB HBM3"
run shipped "$H200" mixed1 mixed2 mixed3 mixed4 replay
run h200sweep-table "$H200" mixed1 mixed2 mixed3 mixed4 replay
run seed1bf16-table "$H200" mixed2 mixed3 mixed4 replay
run h100sweep "$H100" mixed5 mixed6 mixed7
run h100uniform "$H100" mixed5 mixed6 mixed7
line() { $PY $D/summarize.py "$1" $2 $W/$3-$2-$4.json; }
echo "## regret gm (max, batches) of the learned decisions: pooled, and decode by KV dtype"
echo "## H200 sets (mixed seeds 1-4, the serving replay)"
for s in mixed1 mixed2 mixed3 mixed4 replay; do
  line "shipped" $s shipped default
  line "+ page-16 sweep's, as corrections" $s h200sweep-table with16
  line "+ page-16 sweep's, BF16 left out" $s h200sweep-table default
  [ $s = mixed1 ] && continue
  line "+ seed 1's BF16, as corrections" $s seed1bf16-table with16
  line "+ seed 1's BF16, left out" $s seed1bf16-table default
done
echo "## H100 sets (mixed seeds 5-7), the H100's --mixed sweep as its table"
for s in mixed5 mixed6 mixed7; do
  line "its uniform points alone" $s h100uniform default
  line "all its points, BF16 as corrections" $s h100sweep with16
  line "all its points, BF16 left out" $s h100sweep default
done
echo "## the shipped db holds no BF16 mixed batch: its decisions are the same either way"
for s in mixed1 mixed2 mixed3 mixed4 replay; do
  cmp -s <(grep -v '"elapsed' $W/shipped-$s-default.json) <(grep -v '"elapsed' $W/shipped-$s-with16.json) \
    && echo "$s: identical" || echo "$s: DIFFERENT"
done
