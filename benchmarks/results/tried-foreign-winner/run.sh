#!/usr/bin/env bash
# CPU replays of the adaptive search with a doubt order that also refines where the model predicts a winner no
# measured neighbour has (replay.py), scored off the grid (about 3 minutes on 2 cores):
#   bash benchmarks/results/tried-foreign-winner/run.sh > benchmarks/results/tried-foreign-winner/run.txt
set -euo pipefail
R=benchmarks/results; T=$R/tried-foreign-winner; W=$(mktemp -d); trap 'rm -rf "$W"' EXIT
PY=${PY:-.venv/bin/python}
cp heuristics.db $W/shipped.db
xz -dc $R/h200-2026-12-06/dense.db.xz > $W/h200-dense.db
xz -dc $R/h200-2026-12-05/full-grid-cudnn.db.xz > $W/h200-cudnn-grid.db
xz -dc $R/h100-2026-12-06-grid/h100grid.db.xz > $W/h100-grid.db
u() { xz -dc $R/$1.db.xz > $W/$2.db; }
u h200-2026-12-05/offgrid-seed1 h200-offgrid1; u h200-2026-12-06/offgrid2 h200-offgrid2
u prefill-tiles/offgrid3 h200-offgrid3; u h200-offgrid4-waves/offgrid4 h200-offgrid4
u h200-2026-12-06/mixed1 h200-mixed1; u h200-2026-12-06/mixed2 h200-mixed2; u h200-2026-12-06/mixed3 h200-mixed3
u prefill-tiles/mixed4 h200-mixed4
u h100-2026-12-05/offgrid3 h100-offgrid3; u h100-2026-12-05/offgrid4 h100-offgrid4
u h100-offgrid5-tiered/offgrid5 h100-offgrid5; u h100-2026-12-05/mixed5 h100-mixed5
u h100-mixed6-7/mixed6 h100-mixed6; u h100-mixed6-7/mixed7 h100-mixed7
H200=$(ls $W/h200-offgrid*.db $W/h200-mixed*.db); H100=$(ls $W/h100-offgrid*.db $W/h100-mixed*.db)
for v in shipped A Ak B Bk; do
  for g in shipped h200-dense h200-cudnn-grid; do $PY $T/replay.py $v $W/$g.db 0.33 $H200 > $W/$v-$g.json & done
  $PY $T/replay.py $v $W/h100-grid.db 0.33 $H100 > $W/$v-h100-grid.json
  wait
done
$PY - $W <<'PY'
import json, math, sys
variants = ("shipped", "A", "Ak", "B", "Bk")
print("regret gm (max) of the replayed adaptive table, pooled over the sets of each kind (0.33 of the grid)")
print(f"{'grid':16s} {'sets':8s}" + "".join(f"{v:>16s}" for v in variants))
for g in ("shipped", "h200-dense", "h200-cudnn-grid", "h100-grid"):
    rs = {v: json.load(open(f"{sys.argv[1]}/{v}-{g}.json")) for v in variants}
    for kind in ("held-out", "offgrid", "mixed"):
        cells = []
        for v in variants:
            xs = [x for s, x in rs[v].items() if kind in s]
            n = sum(x["n"] for x in xs)
            gm = math.exp(sum(x["n"] * math.log(x["regret_geomean"]) for x in xs) / n)
            cells.append(f"{gm:.5f} ({max(x['regret_max'] for x in xs):.2f})")
        print(f"{g:16s} {kind:8s}" + "".join(f"{c:>16s}" for c in cells))
PY
