#!/usr/bin/env bash
# The H200 measurements issues #24 and #25 still lack, as one device call:
#   bash benchmarks/carry.sh slim --vllm --sets $(bash benchmarks/h200_pending.sh --sets)    # here, first
#   bash benchmarks/h200_pending.sh                                    # the device call's command, carry [".gpu"]
#   bash benchmarks/carry.sh back                                      # here, after it
#   bash benchmarks/score_added.sh h200 dtiles.db dband.db offgrid9.db mixed5.db offgrid10.db
# On an H200: the sets the issues report on first (off-grid seed 9, mixed seed 5), then the decode tile and band
# sets and off-grid seed 10, each time-boxed (h200_sets.sh returns what a cut step measured); the GPU tests ran
# at d48ab12 on an H100 (results/h100-2026-12-08-gputests/). On another GPU: the vLLM forward GPU test alone
# (its path label was mended after that run); none of the sets is its own.
set -uo pipefail
R=benchmarks/results
SETS=("$R/decode-tiles/decode-tiles.jsonl" "$R/decode-tiles/decode-band.jsonl" "$R/offgrid/offgrid-seed9.jsonl"
      "$R/mixed/mixed-seed5.jsonl" "$R/offgrid/offgrid-seed10.jsonl")
if [ "${1:-}" = "--sets" ]; then echo "${SETS[@]}"; exit 0; fi
cd "$(dirname "$0")/.."
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)
echo "GPU: ${gpu:-none}"
case "$gpu" in
  *H200*) MORE=("dtiles:55:--problems,${SETS[0]}" "dband:45:--problems,${SETS[1]}" "offgrid10:90:--problems,${SETS[4]}")
          [ -n "${REPORT_ONLY:-}" ] && MORE=()       # REPORT_ONLY=1: the two report sets alone, 250 s, for a short budget
          # H200_ONLY=1: all five, but nothing at all on another GPU (its GPU tests ran at d48ab12)
          bash benchmarks/h200_sets.sh "offgrid9:160:--problems,${SETS[2]}" "mixed5:90:--problems,${SETS[3]}" "${MORE[@]}" ;;
  ?*) [ -n "${REPORT_ONLY:-}${H200_ONLY:-}" ] && { echo "not an H200: nothing to do (REPORT_ONLY/H200_ONLY)"; exit 0; }
      TESTS=tests/gpu/test_vllm_forward_gpu.py TESTS_S=90 bash benchmarks/h200_sets.sh ;;
  *) echo "no GPU here: run it as a device call"; exit 2 ;;
esac
