#!/usr/bin/env bash
# Tried and left out: a ceiling from dominating batches (ceiling.patch; 0-0 off, 1-0 uniform, 1.05-0, 1-1 mixed too), replayed on the CPU from committed
# H100 and H200 measurements:
#   git apply benchmarks/results/dominated-floor/ceiling.patch
#   bash benchmarks/results/dominated-floor/ceiling-run.sh > benchmarks/results/dominated-floor/ceiling-run.txt
# The same sets as run.sh: choice on the three H100 adaptive tables of ../h100-2026-12-07b-mixed-sweep/ deciding H100 mixed seeds 6, 7
# and off-grid seed 5; reported on the three of ../h100-2026-12-07c-mixed-sweep/ deciding the fresh H100 sets
# (mixed seeds 8, 9, off-grid seed 6), the H100 full grid on all six H100 sets, and the shipped H200 table
# on the H200 sets (off-grid seeds 1-4, mixed seeds 1-4, the serving replay) and its held-out cells.
set -euo pipefail
R=benchmarks/results; D=$R/dominated-floor; W=$(mktemp -d); trap 'rm -rf "$W"' EXIT
T=".venv/bin/tuner"; PY=".venv/bin/python"; H100="NVIDIA H100 80GB HBM3"; H200="NVIDIA H200"
unpack() { xz -dc $R/$1.db.xz > $W/$2.db; }
echo "tree $(git rev-parse --short HEAD), heuristics.db sha256 $(sha256sum heuristics.db | cut -c1-8)"
for n in mixed mixedwarm mixedwarm2; do unpack h100-2026-12-07b-mixed-sweep/$n b-$n; unpack h100-2026-12-07c-mixed-sweep/$n c-$n; done
unpack h100-2026-12-06-grid/h100grid h100grid
unpack h100-mixed6-7/mixed6 h6; unpack h100-mixed6-7/mixed7 h7; unpack h100-offgrid5-tiered/offgrid5 hog5
unpack h100-2026-12-07c-mixed-sweep/mixed8 h8; unpack h100-2026-12-07c-mixed-sweep/mixed9 h9
unpack h100-2026-12-07c-mixed-sweep/offgrid6 hog6
unpack h200-2026-12-06/mixed1 m1; unpack h200-2026-12-06/mixed2 m2; unpack h200-2026-12-06/mixed3 m3
unpack prefill-tiles/mixed4 m4; unpack h200-2026-12-06/replay replay
unpack h200-2026-12-05/offgrid-seed1 og1; unpack h200-2026-12-06/offgrid2 og2; unpack prefill-tiles/offgrid3 og3
unpack h200-offgrid4-waves/offgrid4 og4
cp heuristics.db $W/shipped.db
VARIANTS="0-0 1-0 1.05-0 1-1"
for v in $VARIANTS; do echo "{\"dominating_ceiling\": ${v%-*}, \"ceiling_mixed\": ${v#*-}}" > $W/f$v.json; done
score() {   # table device variant sets...
  local t=$1 dev=$2 v=$3; shift 3
  for s in "$@"; do
    case $s in h*) on=(--measured-on "$H100");; *) on=();; esac
    $T evaluate --db $W/$t.db --device "$dev" --offgrid $W/$s.db "${on[@]}" --predictor-config $W/f$v.json \
      --json > $W/$t-$s-$v.json &
  done; wait
  for s in "$@"; do $PY $D/line.py "floor $v, $t on $s" $W/$t-$s-$v.json; done
}
echo "## Choice: the 2026-12-07b H100 adaptive tables on H100 mixed seeds 6, 7 and off-grid seed 5"
for v in $VARIANTS; do for t in b-mixed b-mixedwarm b-mixedwarm2; do score $t "$H100" $v h6 h7 hog5; done; done
echo; echo "## Report: the 2026-12-07c H100 adaptive tables on the fresh H100 sets (and seeds 6, 7, 5)"
for v in $VARIANTS; do for t in c-mixed c-mixedwarm c-mixedwarm2; do score $t "$H100" $v h8 h9 hog6 h6 h7 hog5; done; done
echo; echo "## Report: the H100 full grid on the six H100 sets"
for v in $VARIANTS; do score h100grid "$H100" $v h6 h7 h8 h9 hog5 hog6; done
echo; echo "## Report: the shipped H200 table on the H200 sets"
for v in $VARIANTS; do score shipped "$H200" $v og1 og2 og3 og4 m1 m2 m3 m4 replay; done
echo; echo "## Report: held-out cells of the shipped table (tuner evaluate --seed N)"
for v in 0-0 1-0; do
  for s in 0 1 2; do $T evaluate --db $W/shipped.db --device "$H200" --seed $s --predictor-config $W/f$v.json \
    --json > $W/hold$s-$v.json & done; wait
  for s in 0 1 2; do $PY $R/fp8-mixed-prior/summarize.py holdout "floor $v, seed $s" $W/hold$s-$v.json; done
done
