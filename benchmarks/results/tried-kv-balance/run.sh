#!/usr/bin/env bash
# usage (repository root, after `bash benchmarks/results/waves/score.sh` has decompressed the sets to
# /tmp/waves, with the H100 mixed seed 5 runs as h100-mixed5a/5b.db, and seeds 6-7 at
# /tmp/waves/h100-mixed{6,7}.db, as benchmarks/results/h100-mixed6-7/score.sh leaves them):
#   bash benchmarks/results/tried-kv-balance/run.sh > benchmarks/results/tried-kv-balance/run.txt
set -euo pipefail
here=benchmarks/results/tried-kv-balance; w=/tmp/tried-kv-balance; mkdir -p $w
T=.venv/bin/tuner; py() { PYTHONPATH=. .venv/bin/python $here/proto.py "$@"; }
# training databases: the shipped db plus measured random mixed batches (their FP8-KV ones, or all)
for s in 1 2 3 4; do
  $T export --db /tmp/waves/mixed$s.db --out $w/mixed$s.jsonl > /dev/null
  python3 -c "
import json, sys
rows = [(l, json.loads(l)['measurement']) for l in open(sys.argv[1])]
mixed = [(l, m) for l, m in rows if m['max_kv_len'] > m['kv_len']]
open(sys.argv[2], 'w').writelines(l for l, _ in mixed)
open(sys.argv[3], 'w').writelines(l for l, m in mixed if m['kv_dtype'] == 'fp8')" \
    $w/mixed$s.jsonl $w/mixed$s-all.jsonl $w/mixed$s-fp8.jsonl
done
build() {   # name what seeds...
  [ -f $w/$1.db ] && return; cp heuristics.db $w/$1.db
  for s in "${@:3}"; do $T import $w/mixed$s-$2.jsonl --db $w/$1.db > /dev/null; done
}
build all23 all 2 3; build fp8-23 fp8 2 3; build fp8-14 fp8 1 4; build fp8-1234 fp8 1 2 3 4
echo "== choice seeds 1 and 4, the shipped db: each prototype"
for m in off twin gate:0.05 gate:0.15 gate:0.3 feature:2 feature:4 feature:8 xqa-wave; do py $m heuristics.db mixed1,mixed4; done
echo "== the random mixed sets as training data (cross-validated on the four H200 seeds, then the H100 seeds)"
py off heuristics.db mixed1,mixed4,mixed2,mixed3,replay
py off $w/all23.db mixed1,mixed4
py off $w/fp8-23.db mixed1,mixed4,replay
py off $w/fp8-14.db mixed2,mixed3,replay
for k in 8 12; do
  echo "{\"mixed_residual_k\": $k}" > $w/k.json
  for pair in "fp8-23 mixed1" "fp8-23 mixed4" "fp8-14 mixed2" "fp8-14 mixed3"; do
    set -- $pair
    $T evaluate --db $w/$1.db --device "NVIDIA H200" --offgrid /tmp/waves/$2.db --predictor-config $w/k.json --json |
      python3 -c "import json, sys; o = json.load(sys.stdin)['overall']['learned']; print(f'k=$k $1 $2 all {o[\"regret_geomean\"]:.4f}')"
  done
done
for db in heuristics.db $w/fp8-1234.db; do py off $db h100-mixed5a,h100-mixed5b,h100-mixed6,h100-mixed7; done
