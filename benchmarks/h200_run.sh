#!/usr/bin/env bash
# One device call on the lent H200, inside its 10-minute limit (see benchmarks/results/h200-2026-12-02/):
#   0. install FlashInfer modules compiled by an earlier call (.gpu/aot.txz: only the .so files,
#      as FlashInfer's AOT directory, which it loads without running ninja; the whole JIT cache with
#      objects is 62 MB, over what a call can carry);
#   1. build every JIT module the sweep still needs, in parallel (tuner sweep --max-minutes 0), install
#      them as AOT modules on this machine (loaded without ninja from then on), and
#      with SAVE_AOT=1 save any newly built .so files to $OUT (xz, 15 MiB parts;
#      `cat new-aot.txz.part-* > .gpu/aot.txz` here, and later calls are warm even on a fresh machine);
#   2. the GPU tests, one test per pipeline (skipped with NOTESTS=1);
#   3. the sweep until BUDGET_S is nearly spent (it resumes from heuristics.db next call).
# usage: BUDGET_S=540 [DB=heuristics.db] [NOTESTS=1] [NOAOT=1: a cold JIT] [SAVE_AOT=1] [FLEET=1: --devices all] \
#        [PREBUILD_MARGIN=120: seconds of the budget kept from the JIT step for the rest] \
#        [PREBUILD_ONLY=1: stop after step 1, e.g. to build and save the modules of several problem files] \
#        bash benchmarks/h200_run.sh [extra sweep args, e.g. --tp 4]
set -uo pipefail
t0=$(date +%s); budget=${BUDGET_S:-540}
left() { echo $(( budget - ($(date +%s) - t0) )); }
# flashinfer re-packed with xz (half of pack.sh's gzip) so that it fits the carry beside aot.txz:
#   mkdir /tmp/fp && tar xzf .gpu/flashinfer.tgz -C /tmp/fp && (cd /tmp/fp && tar cJf - flashinfer) > .gpu/flashinfer.txz
#   (then move .gpu/flashinfer.tgz out of .gpu: the carry limit is 64 MiB with the tracked files)
[ -f .gpu/flashinfer.txz ] && [ ! -d /tmp/site/flashinfer ] && mkdir -p /tmp/site && tar xJf .gpu/flashinfer.txz -C /tmp/site
source benchmarks/device_env.sh || exit 1
aot=/tmp/site/flashinfer/data/aot
[ -z "${NOAOT:-}" ] && [ -f .gpu/aot.txz ] && mkdir -p $aot && tar xJf .gpu/aot.txz -C $aot --strip-components=1 && echo "AOT modules: $(ls $aot | wc -l)" | tee $OUT/aot.txt
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv | tee $OUT/env.txt
sweep=(python3 -m tuner sweep --device cuda --db "${DB:-heuristics.db}" "$@")
# the database's rows in $OUT every 30 s: a call the device cuts short (its limit may be under BUDGET_S when the
# session's device time runs low) still returns what it measured (benchmarks/results/h200-2026-12-06-cut/)
python3 benchmarks/snapshot_db.py "${DB:-heuristics.db}" "$OUT/$(basename "${DB:-heuristics.db}")" --every 30 & snap=$!
echo "+ ${sweep[*]} --max-minutes 0   (JIT prebuild)" | tee $OUT/sweep.log
timeout $(( $(left) - ${PREBUILD_MARGIN:-120} )) "${sweep[@]}" --max-minutes 0 2>&1 | tee -a $OUT/sweep.log
echo "prebuild done at $(( $(date +%s) - t0 )) s" | tee -a $OUT/sweep.log
new_so=$(cd /tmp/fiws/.cache/flashinfer/*/*/cached_ops 2>/dev/null && ls */*.so 2>/dev/null)
# only a finished build is worth carrying: a prebuild cut by its time box leaves some modules out
# (2026-12-04 call 3 saved 1.8 MB of 28); xz on all cores so that the save fits after a cold build;
# entries aot/<module>/<module>.so, the layout step 0 unpacks (without the aot/ prefix the modules
# landed flat in the AOT directory, where FlashInfer does not look)
built=$(grep -c "pipeline configurations load\|verified earlier" $OUT/sweep.log)
[ -n "${SAVE_AOT:-}" ] && [ -n "$new_so" ] && [ "$built" -gt 0 ] && (cd /tmp/fiws/.cache/flashinfer/*/*/cached_ops && XZ_OPT=-T0 tar cJf /tmp/new-aot.txz --transform 's,^,aot/,' $new_so) && split -b 15M /tmp/new-aot.txz $OUT/new-aot.txz.part- && echo "AOT saved: $(ls $OUT/new-aot.txz.part-* | wc -l) parts at $(( $(date +%s) - t0 )) s" | tee -a $OUT/sweep.log
# and load them from FlashInfer's AOT directory in every later process on this machine: the JIT path
# reruns ninja's dependency scan at each load, and setup.sh reinstalls the tvm-ffi wheel every call
# (fresh header mtimes: ninja then finds every object stale), so each module was compiled again
# inside the sweep's worker, one at a time (2026-12-04b call C: ~250 s of a 413-s adaptive sweep)
[ -n "$new_so" ] && [ "$built" -gt 0 ] && (cd /tmp/fiws/.cache/flashinfer/*/*/cached_ops && for f in $new_so; do mkdir -p $aot/${f%/*} && cp --update=none $f $aot/$f; done) && echo "AOT modules installed here: $(ls $aot | wc -l)" | tee -a $OUT/sweep.log
[ -n "${SAVE_AOT:-}" ] && [ "$built" = 0 ] && echo "AOT not saved: the JIT build did not finish in this call" | tee -a $OUT/sweep.log
# (the snapshot loop stopped first: left running, it would hold the call open until its time limit)
[ -n "${PREBUILD_ONLY:-}" ] && { kill $snap 2>/dev/null; wait $snap 2>/dev/null; exit 0; }
if [ -z "${NOTESTS:-}" ] && [ "$(left)" -gt 150 ]; then
  echo "+ python3 -m pytest -m gpu tests/gpu -n 0 -v -s --durations=10" | tee $OUT/gpu-tests.log
  tt=$(( $(left) / 2 )); [ $tt -gt 120 ] && tt=120
  timeout $tt python3 -m pytest -m gpu tests/gpu -n 0 -v -s --durations=10 -p no:cacheprovider 2>&1 | tee -a $OUT/gpu-tests.log
fi
if [ "$(left)" -gt 60 ]; then
  mins=$(python3 -c "print(max(0.0, ($(left) - 50) / 60))")
  echo "+ ${sweep[*]} --max-minutes $mins   (started at $(( $(date +%s) - t0 )) s)" | tee -a $OUT/sweep.log
  s0=$(date +%s)
  timeout $(( $(left) - 15 )) "${sweep[@]}" ${FLEET:+--devices all} --max-minutes "$mins" 2>&1 | grep -v "UserWarning\|scaled_dot_product\|nanobind\|leaked" | tee -a $OUT/sweep.log
  rc=${PIPESTATUS[0]}
  echo "sweep exit $rc after $(( $(date +%s) - s0 )) s" | tee -a $OUT/sweep.log
  # FLEET=1 (the multi-device path on this one GPU) failing at once: the plain sweep, so the call is not lost
  if [ -n "${FLEET:-}" ] && [ "$rc" != 0 ] && [ $(( $(date +%s) - s0 )) -lt 90 ] && [ "$(left)" -gt 120 ]; then
    mins=$(python3 -c "print(max(0.0, ($(left) - 50) / 60))")
    echo "+ ${sweep[*]} --max-minutes $mins   (fallback, at $(( $(date +%s) - t0 )) s)" | tee -a $OUT/sweep.log
    timeout $(( $(left) - 15 )) "${sweep[@]}" --max-minutes "$mins" 2>&1 | grep -v "UserWarning\|scaled_dot_product\|nanobind\|leaked" | tee -a $OUT/sweep.log
  fi
fi
echo "call done at $(( $(date +%s) - t0 )) s" | tee -a $OUT/sweep.log
kill $snap 2>/dev/null; wait $snap 2>/dev/null
python3 benchmarks/snapshot_db.py "${DB:-heuristics.db}" "$OUT/$(basename "${DB:-heuristics.db}")"     # the last copy
