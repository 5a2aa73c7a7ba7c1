#!/usr/bin/env bash
# The dominated floor scored on the H100's full grid (../h100-2026-12-06-grid/, 2456 measured cells), CPU only:
#   bash benchmarks/results/dominated-floor/grid.sh > benchmarks/results/dominated-floor/grid.txt
# 1. Each of the six H100 --mixed adaptive tables (2026-12-07b and -07c) as the training table, scored on every
#    grid cell it lacks (tuner evaluate --train): the same measured points, the floor off and on.
# 2. The adaptive search replayed (tuner evaluate --adaptive 0.33) on this grid and the shipped H200 one: the
#    floor off, on (the search ranking by unfloored times: it measures the same points), and on as 4a7e4be had
#    it, in the search's ranking too (that commit's code, from a git worktree).
set -euo pipefail
R=benchmarks/results; D=$R/dominated-floor; W=$(mktemp -d); trap 'rm -rf "$W"' EXIT
T=".venv/bin/tuner"; PY=".venv/bin/python"; H100="NVIDIA H100 80GB HBM3"
echo "tree $(git rev-parse --short HEAD)"
xz -dc $R/h100-2026-12-06-grid/h100grid.db.xz > $W/grid.db
for v in 0 1; do echo "{\"dominated_floor\": $v}" > $W/f$v.json; done
echo "## 1. Adaptive tables scored on the grid cells they lack (held out per table in parentheses)"
for d in 07b 07c; do
  for n in mixed mixedwarm mixedwarm2; do
    xz -dc $R/h100-2026-12-$d-mixed-sweep/$n.db.xz > $W/$d-$n.db
    for v in 0 1; do
      $T evaluate --db $W/grid.db --device "$H100" --train $W/$d-$n.db --predictor-config $W/f$v.json --json \
        > $W/$d-$n-$v.json &
    done; wait
    for v in 0 1; do $PY $D/pooled.py "floor $v, 2026-12-$d $n" $W/$d-$n-$v.json; done
  done
done
echo; echo "## 2. The adaptive search replayed on the grids, a third measured"
git worktree add -q --detach $W/at4a7e4be 4a7e4be
trap 'git worktree remove --force $W/at4a7e4be 2>/dev/null || true; rm -rf "$W"' EXIT
cp heuristics.db $W/h200.db
for g in "grid:$H100" "h200:NVIDIA H200"; do
  db=${g%%:*}; dev=${g#*:}
  for v in 0 1; do
    $T evaluate --db $W/$db.db --device "$dev" --adaptive 0.33 --predictor-config $W/f$v.json --json > $W/ad-$db-$v.json &
  done
  # from inside the worktree: python -m puts the working directory first on the path
  (cd $W/at4a7e4be && PYTHONPATH=. $OLDPWD/$PY -m tuner evaluate --db $W/$db.db --device "$dev" --adaptive 0.33 \
    --predictor-config $W/f1.json --json > $W/ad-$db-ranked.json) &
  wait
  for v in 0 1; do $PY $D/pooled.py "$db: floor $v" $W/ad-$db-$v.json adaptive; done
  $PY $D/pooled.py "$db: floor 1, in the ranking too (4a7e4be)" $W/ad-$db-ranked.json adaptive
done
