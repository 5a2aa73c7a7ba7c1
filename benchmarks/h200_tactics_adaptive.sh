#!/usr/bin/env bash
# One device call on the lent H200 (see benchmarks/results/h200-2026-12-02/README.md):
#   1. finish the llama4-scout grid sweep into heuristics.db (it resumes);
#   2. per-problem tactic search with Optuna on 30 decode shapes (benchmarks/tactics-problems.jsonl);
#   3. an adaptive sweep of llama4-scout TP1 / page 16 into a fresh database, a third of the grid.
set -uo pipefail
t0=$(date +%s)
at() { echo "[$(( $(date +%s) - t0 )) s] $*"; }
[ -f .gpu/flashinfer.txz ] && [ ! -d /tmp/site/flashinfer ] && mkdir -p /tmp/site && tar xJf .gpu/flashinfer.txz -C /tmp/site
source benchmarks/device_env.sh || exit 1
aot=/tmp/site/flashinfer/data/aot
mkdir -p $aot && tar xJf .gpu/aot.txz -C $aot --strip-components=1
noise() { grep -v "UserWarning\|scaled_dot_product\|nanobind\|leaked\|skipped remainder\|refleaks"; }
T=(python3 -m tuner sweep --device cuda)
at "+ ${T[*]} --model llama4-scout --db heuristics.db --max-minutes 2" | tee $OUT/finish.log
timeout 200 "${T[@]}" --model llama4-scout --db heuristics.db --max-minutes 2 2>&1 | noise | tee -a $OUT/finish.log
cp heuristics.db $OUT/heuristics.db
at "+ ${T[*]} --problems benchmarks/tactics-problems.jsonl --tactics optuna --trials 20 --db heuristics.db" | tee $OUT/tactics.log
timeout 220 "${T[@]}" --problems benchmarks/tactics-problems.jsonl --tactics optuna --trials 20 --db heuristics.db 2>&1 | noise | tee -a $OUT/tactics.log
cp heuristics.db $OUT/heuristics.db
at "+ ${T[*]} --model llama4-scout --tp 1 --page-sizes 16 --search adaptive --budget 0.33 --db adaptive.db" | tee $OUT/adaptive.log
timeout $(( 560 - ($(date +%s) - t0) )) "${T[@]}" --model llama4-scout --tp 1 --page-sizes 16 --search adaptive --budget 0.33 --db adaptive.db 2>&1 | noise | tee -a $OUT/adaptive.log
cp adaptive.db $OUT/adaptive.db
at "call done" | tee -a $OUT/adaptive.log
