#!/usr/bin/env bash
# The adaptive search's screen (tuner/search/screen.py), replayed on finished grids on this machine (2 CPU
# cores): `tuner evaluate --adaptive 0.33` at each screen factor (0: nothing screened). The factor was picked
# on the shipped H200 grid (heuristics.db) and is reported on the others.
#   bash benchmarks/results/screen/run.sh > benchmarks/results/screen/run.txt
set -euo pipefail
R=$PWD; W=$(mktemp -d); trap 'rm -rf "$W"' EXIT
PY=${PY:-$R/.venv/bin/python}
cp heuristics.db $W/shipped.db
xz -dc benchmarks/results/h200-2026-12-06/dense.db.xz > $W/h200-dense.db
xz -dc benchmarks/results/h200-2026-12-05/full-grid-cudnn.db.xz > $W/h200-cudnn-grid.db
xz -dc benchmarks/results/h100-2026-12-06-grid/h100grid.db.xz > $W/h100-grid.db
row() {   # database, screen factor
  $PY -m tuner evaluate --db $W/$1.db --adaptive 0.33 --screen $2 > $W/out.json
  $PY - "$1" "$2" $W/out.json <<'PY'
import json, sys
r = json.load(open(sys.argv[3])); o = r["adaptive_overall"]
close = r["screened_closest"]
print(f"{sys.argv[1]:16} {sys.argv[2]:>6} {r['device']:22} {r['measured']:>5}/{r['cells']:<5} "
      f"{r['screened']:>5}/{r['revealed']:<5} {r['screened'] / r['revealed']:6.1%} "
      f"{'-' if close is None else f'{close:.2f}':>7} {o['regret_geomean']:.5f} {o['regret_max']:7.3f} "
      f"{o['configs_within_target']:>3}/{o['configs']}")
if r["screened"]:
    print("    screened by kernel: " + ", ".join(f"{k} {n}" for k, n in sorted(r["screened_by_kernel"].items(),
                                                                         key=lambda kn: -kn[1])))
PY
}
echo "database          screen device                 picked/cells screened/revealed    closest   regret gm     max  <=1.02"
echo "# picked on:"
for s in 0 1.5 2 3; do row shipped $s; done
echo "# reported on:"
for db in h200-dense h200-cudnn-grid h100-grid; do for s in 0 2; do row $db $s; done; done
