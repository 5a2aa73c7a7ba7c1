#!/usr/bin/env bash
# Small uniform decode shapes measured alone beside the grid, as a decode tile set would add them: a CPU replay of
# committed off-grid seeds (their shapes in the tile set's region stand in for it, which no GPU has measured yet).
#   bash benchmarks/results/decode-tiles/run.sh > benchmarks/results/decode-tiles/run.txt
# Each seed is scored by its GPU's table plus the other seeds' decode shapes in a region, stored as measured alone:
#   region    uniform decode at KV 257-768 and batch x KV heads <= 132 (one wave), every dtype pair
#   bf16      the same, BF16 KV only
#   all-bf16  every uniform BF16-KV decode shape (a control: is it the region, or just more shapes?)
#   region-grid  region's shapes as grid rows instead (points of the estimators, not corrections)
# H100: the H100 grid, six off-grid seeds (3-8, leave one out), where the variant is picked; H200: the shipped db,
# seeds 1-4, where it is reported.
set -euo pipefail
R=benchmarks/results; W=$(mktemp -d); trap 'rm -rf $W' EXIT
T=.venv/bin/tuner; PY=.venv/bin/python
echo "tree $(git rev-parse --short HEAD), heuristics.db sha256 $(sha256sum heuristics.db | cut -c1-8)"
u() { xz -dc $R/$1.db.xz > $W/$2.db; }
u h200-2026-12-05/offgrid-seed1 o1; u h200-2026-12-06/offgrid2 o2; u prefill-tiles/offgrid3 o3; u h200-offgrid4-waves/offgrid4 o4
u h100-2026-12-05/offgrid3 h3; u h100-2026-12-05/offgrid4 h4; u h100-offgrid5-tiered/offgrid5 h5
u h100-2026-12-07c-mixed-sweep/offgrid6 h6; u h100-2026-12-07e-alone/offgrid7 h7; u h100-2026-12-07e-alone/offgrid8 h8
u h100-2026-12-06-grid/h100grid h100grid; cp heuristics.db $W/shipped.db
pick() {   # set variant -> $W/set-variant.jsonl: the set's rows in the variant's region, marked measured alone
  $T export --db $W/$1.db --out $W/$1-all.jsonl > /dev/null
  $PY - $W/$1-all.jsonl $W/$1-$2.jsonl $2 <<'PY'
import json, sys
src, dst, variant = sys.argv[1:]
with open(dst, "w") as out:
    for line in open(src):
        item = json.loads(line); m = item["measurement"]
        if m["phase"] != "decode" or m["max_kv_len"] != m["kv_len"]:
            continue
        if variant in ("bf16", "all-bf16") and m["kv_dtype"] != "bf16":
            continue
        if variant != "all-bf16" and not (256 < m["kv_len"] <= 768 and m["batch_size"] * m["num_kv_heads"] <= 132):
            continue
        item["measurement"]["alone"] = int(variant != "region-grid")
        out.write(json.dumps(item) + "\n")
PY
}
line() {   # json label
  $PY - "$@" <<'PY'
import json, sys
r = json.load(open(sys.argv[1])); o = r["overall"]["learned"]
cf = {k: v["learned"] for k, v in r["configs"].items() if v["learned"]["n"]}
ok = sum(v["regret_geomean"] <= 1.02 and v["regret_max"] <= 1.10 for v in cf.values())
slow = sum(v["slower_than_vllm-2026"] for v in cf.values())
print(f"  {sys.argv[2]:22s} pooled {o['regret_geomean']:.4f}  max {max(v['regret_max'] for v in cf.values()):.3f}  "
      f"within {ok:2d}/{len(cf)}  slower than vllm-2026 beyond noise {slow:2d}")
PY
}
fold() {   # device grid-db held "other sets": score the held set with each variant
  local dev=$1 grid=$2 held=$3 pids=(); shift 3
  for v in none region bf16 all-bf16 region-grid; do
    cp $W/$grid.db $W/t-$held-$v.db
    if [ $v != none ]; then for s in "$@"; do $T import $W/$s-$v.jsonl --db $W/t-$held-$v.db > /dev/null; done; fi
    $T evaluate --db $W/t-$held-$v.db --device "$dev" --offgrid $W/$held.db --json > $W/e-$held-$v.json & pids+=($!)
  done
  for p in "${pids[@]}"; do wait $p; done      # set -e: a failed evaluation stops the script
  pids=()
  echo "$held:"; for v in none region bf16 all-bf16 region-grid; do line $W/e-$held-$v.json $v; done
}
for s in o1 o2 o3 o4 h3 h4 h5 h6 h7 h8; do for v in region bf16 all-bf16 region-grid; do pick $s $v; done; done
echo "## H100 folds (the variant is picked here): the H100 grid plus the other five seeds' rows"
H=(h3 h4 h5 h6 h7 h8)
for held in "${H[@]}"; do fold "NVIDIA H100 80GB HBM3" h100grid $held $(printf '%s\n' "${H[@]}" | grep -vx $held); done
echo; echo "## H200 folds (reported): the shipped db plus the other three seeds' rows"
O=(o1 o2 o3 o4)
for held in "${O[@]}"; do fold "NVIDIA H200" shipped $held $(printf '%s\n' "${O[@]}" | grep -vx $held); done
