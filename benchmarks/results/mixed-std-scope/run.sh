#!/usr/bin/env bash
# Where the mixed-batch corrections' standard deviation term applies (PredictorConfig.mixed_residual_std_waves,
# mixed_residual_std_scope), replayed on the CPU from committed H200 and H100 measurements:
#   bash benchmarks/results/mixed-std-scope/run.sh > benchmarks/results/mixed-std-scope/run.txt
# Chosen on H200 mixed seeds 1 and 4; reported on H200 mixed seeds 2 and 3, the serving replay, H100 mixed
# seeds 5-7 (the shipped H200 table scored on the H100's times), the held-out cells, the off-grid seeds, and the
# H100's own --mixed sweep tables on H100 mixed seeds 6 and 7.
set -euo pipefail
R=benchmarks/results; W=$(mktemp -d); trap 'rm -rf "$W"' EXIT
T=".venv/bin/tuner"; PY=".venv/bin/python"; H100="NVIDIA H100 80GB HBM3"
unpack() { xz -dc $R/$1.db.xz > $W/$2.db; }
unpack h200-2026-12-06/mixed1 m1; unpack h200-2026-12-06/mixed2 m2; unpack h200-2026-12-06/mixed3 m3
unpack prefill-tiles/mixed4 m4; unpack h200-2026-12-06/replay replay
unpack h100-2026-12-05b/mixed5 h5; unpack h100-mixed6-7/mixed6 h6; unpack h100-mixed6-7/mixed7 h7
unpack h200-2026-12-05/offgrid-seed1 og1; unpack h200-2026-12-06/offgrid2 og2; unpack prefill-tiles/offgrid3 og3
unpack h200-offgrid4-waves/offgrid4 og4
echo "tree $(git rev-parse --short HEAD), heuristics.db sha256 $(sha256sum heuristics.db | cut -c1-8)"
echo '{"mixed_residual_std_waves": 0, "mixed_residual_std_scope": 0}' > $W/before.json
echo '{"mixed_residual_std_waves": 1, "mixed_residual_std_scope": 0}' > $W/w1-all.json
echo '{"mixed_residual_std_waves": 1, "mixed_residual_std_scope": 1}' > $W/w1-noxqa.json
echo '{"mixed_residual_std_waves": 0, "mixed_residual_std_scope": 1}' > $W/w0-noxqa.json
echo '{}' > $W/shipped.json
score() {   # variant, sets...
  local v=$1; shift
  for s in "$@"; do
    case $s in h*) on=(--measured-on "$H100");; *) on=();; esac
    $T evaluate --db heuristics.db --device "NVIDIA H200" --offgrid $W/$s.db "${on[@]}" --predictor-config $W/$v.json \
      --json > $W/$s-$v.json &
  done; wait
  for s in "$@"; do $PY benchmarks/targets.py $W/$s-$v.json | sed "s|^$s-$v|$(printf '%-8s %-9s' $v $s)|"; done
}
echo "## Choice sets: H200 mixed seeds 1 and 4 (benchmarks/targets.py)"
for v in before w1-all w1-noxqa w0-noxqa shipped; do score $v m1 m4; done
echo; echo "## Report sets: H200 mixed seeds 2 and 3, the serving replay, H100 mixed seeds 5-7"
for v in before shipped; do score $v m2 m3 replay h5 h6 h7; done
echo; echo "## Held-out cells of the shipped table (tuner evaluate --seed N)"
for v in before shipped; do
  for s in 0 1 2; do $T evaluate --db heuristics.db --device "NVIDIA H200" --seed $s --predictor-config $W/$v.json \
    --json > $W/hold$s-$v.json & done; wait
  for s in 0 1 2; do $PY $R/fp8-mixed-prior/summarize.py holdout "seed $s, $v" $W/hold$s-$v.json; done
done
echo; echo "## Uniform batches: H200 off-grid seeds 1-4 (the corrections apply to mixed batches only)"
for v in before shipped; do score $v og1 og2 og3 og4; done
echo; echo "## Other tables: the H100's --mixed sweeps (with mixed cells of their own) deciding H100 mixed seeds 6 and 7"
d=$R/h100-2026-12-07b-mixed-sweep
for n in mixed mixedwarm mixedwarm2; do xz -dc $d/$n.db.xz > $W/t-$n.db; done
xz -dc $R/h100-2026-12-06-fp8skew-sweep/mixedsweep.db.xz > $W/t-noscreen.db
for v in before shipped; do
  for n in noscreen mixed mixedwarm mixedwarm2; do
    for s in h6 h7; do
      $T evaluate --db $W/t-$n.db --device "$H100" --offgrid $W/$s.db --predictor-config $W/$v.json --json \
        > $W/t-$n-$s-$v.json &
    done; wait
    for s in h6 h7; do $PY benchmarks/targets.py $W/t-$n-$s-$v.json | sed "s|^t-$n-$s-$v|$(printf '%-8s %-10s %s' $v $n $s)|"
    done
  done
done
