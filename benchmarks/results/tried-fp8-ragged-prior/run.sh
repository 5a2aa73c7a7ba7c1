#!/usr/bin/env bash
# CPU replay of committed H200 databases (no device):
#   bash benchmarks/results/tried-fp8-ragged-prior/run.sh > benchmarks/results/tried-fp8-ragged-prior/run.txt
set -euo pipefail
D=benchmarks/results/tried-fp8-ragged-prior
W=$(mktemp -d)
trap 'git worktree remove --force $W/tree 2>/dev/null; rm -rf $W' EXIT
for s in h200-2026-12-05/mixed-seed1:mixed1 h200-2026-12-06/mixed2:mixed2 h200-2026-12-06/mixed3:mixed3 \
         prefill-tiles/mixed4:mixed4; do
  xz -dc benchmarks/results/${s%%:*}.db.xz > $W/${s##*:}.db
done
PY=${PY:-$PWD/.venv/bin/python}
# the code as it was (its defaults are the rules of then), with experiment.patch's settings to switch
git worktree add -q --detach $W/tree 3e3439a && git -C $W/tree apply "$PWD/$D/experiment.patch"
cp heuristics.db $D/prior_fit.py $W/tree/
fit() { (cd $W/tree && $PY prior_fit.py "$@"); }
echo "## Choice set: the shipped db's measured mixed batches and mixed seed 1"
for kv in fp8 bf16; do fit $kv heuristics.db $W/mixed1.db; echo; done
echo "## Report set: mixed seeds 2-4"
fit fp8 $W/mixed2.db $W/mixed3.db $W/mixed4.db; echo
# the rules of experiment.patch, end to end
score() {   # NAME JSON: FP8-KV mixed configurations' regret gm/max per set, and the pooled regret over all batches
  echo "$2" > $W/$1.json
  for n in mixed1 mixed2 mixed3 mixed4; do
    (cd $W/tree && $PY -m tuner evaluate --db heuristics.db --device "NVIDIA H200" --offgrid $W/$n.db \
        --predictor-config $W/$1.json --json 2>/dev/null) | $PY $D/summarize.py "$1" $n
  done
}
echo "## End to end: regret (gm/max) of the FP8-KV mixed configurations, seeds 1-4 (seed 1 with the choice set)"
score "shipped" '{}'
score "xqa-one-wave" '{"longest_alone_waves_fp8": 64}'
score "xqa-one-wave+fixed-split" '{"longest_alone_waves_fp8": 64, "fixed_full_longest": 1}'
score "+default-plan-sum" '{"longest_alone_waves_fp8": 64, "fixed_full_longest": 1, "unsplit_sum_waves": 1.9}'
score "xqa-one-wave+fixed-split,k=1" '{"longest_alone_waves_fp8": 64, "fixed_full_longest": 1, "mixed_residual_k": 1}'
score "xqa-one-wave+fixed-split,k=8" '{"longest_alone_waves_fp8": 64, "fixed_full_longest": 1, "mixed_residual_k": 8}'
