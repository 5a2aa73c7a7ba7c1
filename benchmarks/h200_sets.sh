#!/usr/bin/env bash
# One device call after an earlier one saved the AOT modules (.gpu/aot.txz, see h200_run.sh): the GPU
# tests of mixed-length batches, then seeded problem sets and a grid sweep, each time-boxed, each into its
# own database under $OUT (checkpointed so that a cut step still returns its finished rows).
# usage: bash benchmarks/h200_sets.sh STEP... where a STEP is NAME:SECONDS:ARGS (ARGS: tuner sweep's,
# spaces as commas), e.g. mixed1:75:--problems,benchmarks/results/mixed/mixed-seed1.jsonl; a fourth field
# names an earlier database (.db or .db.xz) to continue: its measured problems are not measured again
# (/tmp/NAME.db: the one the last call left on a machine still warm). Fit the carry first: benchmarks/carry.sh.
set -uo pipefail
t0=$(date +%s)
[ -f .gpu/flashinfer.txz ] && [ ! -d /tmp/site/flashinfer ] && mkdir -p /tmp/site && tar xJf .gpu/flashinfer.txz -C /tmp/site
source benchmarks/device_env.sh || exit 1
aot=/tmp/site/flashinfer/data/aot
[ -f .gpu/aot.txz ] && mkdir -p $aot && tar xJf .gpu/aot.txz -C $aot --strip-components=1 && echo "AOT modules: $(ls $aot | wc -l)"
# vLLM's Python files for tests/gpu/test_vllm_forward_gpu.py (`python -m tests.vllm_wheel pack .gpu/vllm.txz`)
[ -f .gpu/vllm.txz ] && mkdir -p /tmp/vllm-tree && tar xJf .gpu/vllm.txz -C /tmp/vllm-tree && export SWITCHYARD_VLLM_TREE=/tmp/vllm-tree
# the shipped heuristics.db, where it was left out of the carry to fit (xz -9 -c heuristics.db > .gpu/heuristics.db.xz):
# tests/gpu/vllm_forward.py decides from it; its sha256 goes to env.txt, to check against the tracked file's
db_note=""
[ -f .gpu/heuristics.db.xz ] && [ ! -f heuristics.db ] && xz -dc .gpu/heuristics.db.xz > heuristics.db &&
  db_note="heuristics.db restored from .gpu/heuristics.db.xz: sha256 $(sha256sum heuristics.db | cut -d' ' -f1)"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv | tee $OUT/env.txt
[ -n "$db_note" ] && echo "$db_note" | tee -a $OUT/env.txt
noise="│\|┃\|┏\|┡\|└\|leaked\|UserWarning\|scaled_dot\|nanobind\|^ - "
if [ -n "${TESTS:-}" ]; then
  echo "+ python3 -m pytest -m gpu $TESTS -n 0 -v -s -p no:cacheprovider" | tee $OUT/gpu-tests.log
  timeout -k 15 "${TESTS_S:-90}" python3 -m pytest -m gpu $TESTS -n 0 -v -s -p no:cacheprovider 2>&1 | grep --line-buffered -v "$noise" >> $OUT/gpu-tests.log
  echo "tests done at $(( $(date +%s) - t0 )) s" | tee -a $OUT/gpu-tests.log
fi
for step in "$@"; do
  IFS=: read -r name secs args from <<< "$step"
  # a warm machine still holds the last call's database: continue it in place
  case "${from:-}" in
    /tmp/$name.db) [ -f "$from" ] || { echo "$from is gone (the machine was not warm): pass the returned db, xz -9'd"; exit 1; } ;;
    *.xz) xz -dc "$from" > /tmp/$name.db ;;
    ?*) cp "$from" /tmp/$name.db ;;
  esac
  cmd=(python3 -m tuner sweep --device cuda --db /tmp/$name.db ${args//,/ }
       --max-minutes "$(python3 -c "print(max(0.1, ($secs - 25) / 60))")")
  echo "+ ${cmd[*]}   (at $(( $(date +%s) - t0 )) s)" | tee $OUT/$name.log
  # a copy of the step's rows in $OUT every 30 s: a call cut by the device's limit (which may be shorter than the
  # time boxes when the session's device time runs low) still returns what it measured, and its log so far
  python3 benchmarks/snapshot_db.py /tmp/$name.db $OUT/$name.db --every 30 & snap=$!
  timeout -k 15 "$secs" "${cmd[@]}" 2>&1 | grep --line-buffered -v "$noise" >> $OUT/$name.log
  echo "exit ${PIPESTATUS[0]} at $(( $(date +%s) - t0 )) s" | tee -a $OUT/$name.log
  kill $snap 2>/dev/null; wait $snap 2>/dev/null
  python3 benchmarks/snapshot_db.py /tmp/$name.db $OUT/$name.db       # the last copy, whole
done
# at most 8 files come back: the logs as one archive beside the databases
(cd $OUT && tar czf logs.tgz *.log env.txt && rm -f *.log env.txt)
echo "call done at $(( $(date +%s) - t0 )) s"
