#!/usr/bin/env bash
# The decode tile set measured on a GPU, added to that GPU's table, scored on its off-grid seeds (before / after).
#   bash benchmarks/results/decode-tiles/score.sh h200 DIR/dtiles.db.xz > DIR/score.txt   # the shipped db, seeds 1-4 (+ 5, 6 where DIR has them)
#   bash benchmarks/results/decode-tiles/score.sh h100 DIR/dtiles.db.xz > DIR/score.txt   # the H100 grid, seeds 3-8
# Only uniform decode shapes are in the set, so only decode decisions can change.
set -euo pipefail
gpu=$1; tiles=$2; dir=$(dirname "$tiles")
R=benchmarks/results; W=$(mktemp -d); trap 'rm -rf $W' EXIT
T=.venv/bin/tuner; PY=.venv/bin/python
u() { xz -dc "$1" > $W/$2.db; }
u "$tiles" tiles
case $gpu in
  h200) dev="NVIDIA H200"; cp heuristics.db $W/table.db
        u $R/h200-2026-12-05/offgrid-seed1.db.xz s1; u $R/h200-2026-12-06/offgrid2.db.xz s2
        u $R/prefill-tiles/offgrid3.db.xz s3; u $R/h200-offgrid4-waves/offgrid4.db.xz s4; sets=(s1 s2 s3 s4)
        for n in 5 6 9; do [ -f $dir/offgrid$n.db.xz ] && u $dir/offgrid$n.db.xz s$n && sets+=(s$n); done ;;
  h100) dev="NVIDIA H100 80GB HBM3"; u $R/h100-2026-12-06-grid/h100grid.db.xz table
        u $R/h100-2026-12-05/offgrid3.db.xz s3; u $R/h100-2026-12-05/offgrid4.db.xz s4
        u $R/h100-offgrid5-tiered/offgrid5.db.xz s5; u $R/h100-2026-12-07c-mixed-sweep/offgrid6.db.xz s6
        u $R/h100-2026-12-07e-alone/offgrid7.db.xz s7; u $R/h100-2026-12-07e-alone/offgrid8.db.xz s8
        sets=(s3 s4 s5 s6 s7 s8) ;;
  *) echo "usage: score.sh h200|h100 TILES.db.xz (got '$gpu')" >&2; exit 2 ;;
esac
echo "tree $(git rev-parse --short HEAD), $dev, table sha256 $(sha256sum $W/table.db | cut -c1-8), tiles $tiles"
cp $W/table.db $W/with.db
$T export --db $W/tiles.db --out $W/tiles.jsonl > /dev/null
$T import $W/tiles.jsonl --db $W/with.db
line() {   # json label
  $PY - "$@" <<'PY'
import json, sys
r = json.load(open(sys.argv[1])); o = r["overall"]["learned"]
cf = {k: v["learned"] for k, v in r["configs"].items() if v["learned"]["n"]}
ok = sum(v["regret_geomean"] <= 1.02 and v["regret_max"] <= 1.10 for v in cf.values())
slow = sum(v["slower_than_vllm-2026"] for v in cf.values())
dec = [v for k, v in cf.items() if k.startswith("decode")]
print(f"  {sys.argv[2]:14s} pooled {o['regret_geomean']:.4f}  max {max(v['regret_max'] for v in cf.values()):.3f}  "
      f"within {ok:2d}/{len(cf)}  slower than vllm-2026 beyond noise {slow:2d}  "
      f"decode max {max(v['regret_max'] for v in dec):.3f}")
PY
}
for s in "${sets[@]}"; do
  pids=(); for t in table with; do $T evaluate --db $W/$t.db --device "$dev" --offgrid $W/$s.db --json > $W/e-$s-$t.json & pids+=($!); done
  for p in "${pids[@]}"; do wait $p; done      # set -e: a failed evaluation stops the script
  echo "$s:"; line $W/e-$s-table.json "table"; line $W/e-$s-with.json "+ tiles"
done
