#!/usr/bin/env bash
# PredictorConfig.prefill_between_keep swept on the CPU over committed measured sets (repository root):
#   bash benchmarks/results/prefill-keep/run.sh > benchmarks/results/prefill-keep/run.txt
# Choice sets: prefill-wave seeds 1, 2, 4 (H100 times), each decided by the H100's own table and by the shipped
# H200 table. Report sets: prefill-wave seeds 3, 5 (the same two tables), the H200 off-grid seeds 1-4 (the
# shipped table) and the H100 off-grid seeds 3-5 (both tables). Then the shipped db's grid hold-out and --between.
set -euo pipefail
R=benchmarks/results; W=$(mktemp -d); trap 'rm -rf "$W"' EXIT
H="NVIDIA H100 80GB HBM3"; PY=${PY:-.venv/bin/python}; S=$R/prefill-keep/summarize.py
xz -dc $R/h100-2026-12-06-grid/h100grid.db.xz > $W/h100grid.db
for s in 1 2 3 4 5; do xz -dc $R/prefill-waves/pw$s.db.xz > $W/pw$s.db; done
xz -dc $R/h200-2026-12-05/offgrid-seed1.db.xz > $W/og1.db; xz -dc $R/h200-2026-12-06/offgrid2.db.xz > $W/og2.db
xz -dc $R/prefill-tiles/offgrid3.db.xz > $W/og3.db; xz -dc $R/h200-offgrid4-waves/offgrid4.db.xz > $W/og4.db
xz -dc $R/h100-2026-12-05/offgrid3.db.xz > $W/ho3.db; xz -dc $R/h100-2026-12-05/offgrid4.db.xz > $W/ho4.db
xz -dc $R/h100-offgrid5-tiered/offgrid5.db.xz > $W/ho5.db
ev() {  # SET TABLE K: one evaluation into $W/SET-TABLE-kK.json
  local db=heuristics.db dev="NVIDIA H200" on=()
  [ "$2" = h100 ] && db=$W/h100grid.db dev="$H"
  [ "$2" = h200 ] && [ "${1:0:2}" != og ] && on=(--measured-on "$H")
  $PY -m tuner evaluate --db $db --device "$dev" --offgrid $W/$1.db "${on[@]}" --predictor-config $W/k$3.json \
    --json > $W/$1-$2-k$3.json
}
sets() { for s in "$@"; do case $s in og*) echo "$s:h200" ;; *) echo "$s:h100 $s:h200" ;; esac; done; }
for part in "choice:pw1 pw2 pw4:0 2 4 8 12 16 24 32" "report:pw3 pw5 og1 og2 og3 og4 ho3 ho4 ho5:4 12"; do
  IFS=: read -r title names keeps <<< "$part"
  echo "== $title sets"
  for k in $keeps; do
    echo "{\"prefill_between_keep\": $k}" > $W/k$k.json
    for st in $(sets $names); do ev ${st%:*} ${st#*:} $k & done; wait
    for st in $(sets $names); do $PY $S "k=$k" $W/${st%:*}-${st#*:}-k$k.json; done
  done
done
echo "== the shipped db's grid hold-out (seed 0) and --between"
for k in 4 12; do
  $PY -m tuner evaluate --db heuristics.db --device "NVIDIA H200" --seed 0 --predictor-config $W/k$k.json --json \
    > $W/holdout-k$k.json &
  $PY -m tuner evaluate --db heuristics.db --device "NVIDIA H200" --between --predictor-config $W/k$k.json --json \
    > $W/between-k$k.json &
done; wait
$PY $R/prefill-waves/holdout_between.py $W/holdout-k4.json $W/holdout-k12.json $W/between-k4.json \
  $W/between-k12.json | sed 's/keep 0/keep 4/; s/keep 4: gm \(.*keep\) 4/keep 4: gm \1 12/'
