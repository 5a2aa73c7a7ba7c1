#!/usr/bin/env bash
# One device call on the lent H200, inside its 10-minute limit (see benchmarks/results/h200-2026-12-02/):
#   1. build every JIT module the sweep needs, in parallel (tuner sweep --max-minutes 0), and save
#      the JIT cache to $OUT at once (split in 15 MiB parts);
#   2. the GPU tests, one test per pipeline (skipped with NOTESTS=1);
#   3. the sweep until BUDGET_S is nearly spent (it resumes from heuristics.db next call).
# usage: BUDGET_S=540 bash benchmarks/h200_run.sh [extra sweep args, e.g. --tp 4 --page-sizes 32]
set -uo pipefail
t0=$(date +%s); budget=${BUDGET_S:-540}
left() { echo $(( budget - ($(date +%s) - t0) )); }
source .gpu/setup.sh || exit 1
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv | tee $OUT/env.txt
sweep=(python3 -m tuner sweep --model llama4-scout --device cuda --db heuristics.db "$@")
echo "+ ${sweep[*]} --max-minutes 0   (JIT prebuild)" | tee $OUT/sweep.log
timeout $(( $(left) - 120 )) "${sweep[@]}" --max-minutes 0 2>&1 | tee -a $OUT/sweep.log
echo "prebuild done at $(( $(date +%s) - t0 )) s" | tee -a $OUT/sweep.log
tar czf /tmp/jit-cache.tgz -C /tmp/fiws .cache 2>/dev/null && split -b 15M /tmp/jit-cache.tgz $OUT/jit-cache.tgz.part-
if [ -z "${NOTESTS:-}" ] && [ "$(left)" -gt 150 ]; then
  echo "+ python3 -m pytest -m gpu tests/gpu -v -s" | tee $OUT/gpu-tests.log
  timeout $(( $(left) / 2 )) python3 -m pytest -m gpu tests/gpu -v -s -p no:cacheprovider 2>&1 | tee -a $OUT/gpu-tests.log
fi
if [ "$(left)" -gt 60 ]; then
  mins=$(python3 -c "print(max(0.0, ($(left) - 50) / 60))")
  echo "+ ${sweep[*]} --max-minutes $mins   (started at $(( $(date +%s) - t0 )) s)" | tee -a $OUT/sweep.log
  timeout $(( $(left) - 15 )) "${sweep[@]}" --max-minutes "$mins" 2>&1 | grep -v "UserWarning\|scaled_dot_product\|nanobind\|leaked" | tee -a $OUT/sweep.log
fi
echo "call done at $(( $(date +%s) - t0 )) s" | tee -a $OUT/sweep.log
cp heuristics.db $OUT/heuristics.db
