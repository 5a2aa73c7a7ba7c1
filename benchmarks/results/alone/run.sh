#!/usr/bin/env bash
# Shapes measured alone (tuner sweep --problems, the daemon's misses) added to a grid's table, cross-validated;
# a CPU replay of committed measurements:
#   bash benchmarks/results/alone/run.sh > benchmarks/results/alone/run.txt
# H200: the shipped db plus three of the off-grid seeds 1-4 (all their shapes, stored as measured alone), scored
# on the fourth. H100: the H100 full grid plus off-grid seeds 3+4 (fold A) or 5+6 (fold B), scored on the other
# two. Each with alone_k 0 (the shapes read as grid points, as before schema 6) and the settings tried.
set -euo pipefail
R=benchmarks/results; W=$(mktemp -d); trap 'rm -rf $W' EXIT
T=.venv/bin/tuner; PY=.venv/bin/python; H100="NVIDIA H100 80GB HBM3"; H200="NVIDIA H200"
echo "tree $(git rev-parse --short HEAD), heuristics.db sha256 $(sha256sum heuristics.db | cut -c1-8)"
u() { xz -dc $R/$1.db.xz > $W/$2.db; }
u h200-2026-12-05/offgrid-seed1 o1; u h200-2026-12-06/offgrid2 o2; u prefill-tiles/offgrid3 o3; u h200-offgrid4-waves/offgrid4 o4
u h100-2026-12-06-grid/h100grid hgrid; u h100-2026-12-05/offgrid3 h3; u h100-2026-12-05/offgrid4 h4
u h100-offgrid5-tiered/offgrid5 h5; u h100-2026-12-07c-mixed-sweep/offgrid6 h6
alone() {   # set -> $W/set.jsonl: its measurements, marked measured alone (they were: tuner sweep --problems)
  $T export --db $W/$1.db --out $W/$1-grid.jsonl > /dev/null
  $PY -c "
import json, sys
with open(sys.argv[2], 'w') as out:
    for line in open(sys.argv[1]):
        item = json.loads(line); item['measurement']['alone'] = 1; out.write(json.dumps(item) + '\n')" \
    $W/$1-grid.jsonl $W/$1.jsonl
}
for s in o1 o2 o3 o4 h3 h4 h5 h6; do alone $s; done
build() { cp $2 $W/$1.db; for s in "${@:3}"; do $T import $W/$s.jsonl --db $W/$1.db > /dev/null; done; }
build l1 heuristics.db o2 o3 o4; build l2 heuristics.db o1 o3 o4; build l3 heuristics.db o1 o2 o4; build l4 heuristics.db o1 o2 o3
build hA $W/hgrid.db h3 h4; build hB $W/hgrid.db h5 h6
cp heuristics.db $W/shipped.db
line() {   # json label: pooled regret, worst shape, configurations within gm 1.02 / max 1.10, shapes slower than vllm-2026
  $PY - "$@" <<'PY'
import json, sys
r = json.load(open(sys.argv[1])); o = r["overall"]["learned"]
cf = {k: v["learned"] for k, v in r["configs"].items() if v["learned"]["n"]}
ok = sum(v["regret_geomean"] <= 1.02 and v["regret_max"] <= 1.10 for v in cf.values())
slow = sum(v["slower_than_vllm-2026"] for v in cf.values())
print(f"  {sys.argv[2]:34s} pooled {o['regret_geomean']:.4f}  max {max(v['regret_max'] for v in cf.values()):.3f}  "
      f"within {ok:2d}/{len(cf)}  slower than vllm-2026 beyond noise {slow:2d}")
PY
}
score() {   # name json-settings table set device
  echo "$2" > $W/$1.json
  $T evaluate --db $W/$3.db --device "$5" --offgrid $W/$4.db --predictor-config $W/$1.json --json > $W/$1-$3-$4.json
  line $W/$1-$3-$4.json "$3 on $4, $1"
}
SETTINGS="grid-points={\"alone_k\":0} k4-r0.5={\"alone_radius\":0.5} k4-r1={} k4-r2={\"alone_radius\":2} k2-r1={\"alone_k\":2} k8-r1={\"alone_k\":8}"
echo "## H100 folds (where the settings are picked)"
for pair in hA:h5 hA:h6 hB:h3 hB:h4; do IFS=: read t s <<< "$pair"
  score none '{"alone_k":0}' hgrid $s "$H100"
  for nc in $SETTINGS; do score ${nc%%=*} "${nc#*=}" $t $s "$H100"; done
done
echo; echo "## H200 folds (where they are reported: the shipped db alone, the shapes as grid points, the default)"
for s in 1 2 3 4; do
  score none '{}' shipped o$s "$H200"; score grid-points '{"alone_k":0}' l$s o$s "$H200"; score default '{}' l$s o$s "$H200"
done
