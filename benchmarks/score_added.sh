#!/usr/bin/env bash
# Shapes measured alone on a GPU (tuner sweep --problems: a tile set, a set of batch rows), added to that GPU's table
# and scored on its committed off-grid sets, before and after.
#   bash benchmarks/score_added.sh h200 A.db.xz [B.db.xz ...]   # the shipped db; H200 off-grid seeds 1-4, and 6 / 9
#                                                                # where a database named offgrid6 / offgrid9 is given
#   bash benchmarks/score_added.sh h100 A.db.xz [B.db.xz ...]   # the H100 grid; H100 seeds 3-8 (9 likewise), prefill-waves 1-5
# A database named offgridN.db.xz among the arguments is scored, not added.
set -euo pipefail
gpu=${1:-}; shift || true
R=benchmarks/results; W=$(mktemp -d); trap 'rm -rf $W' EXIT
T=.venv/bin/tuner; PY=.venv/bin/python
u() { xz -dc "$1" > $W/$2.db; }
case $gpu in
  h200) dev="NVIDIA H200"; cp heuristics.db $W/table.db
        u $R/h200-2026-12-05/offgrid-seed1.db.xz s1; u $R/h200-2026-12-06/offgrid2.db.xz s2
        u $R/prefill-tiles/offgrid3.db.xz s3; u $R/h200-offgrid4-waves/offgrid4.db.xz s4; sets=(s1 s2 s3 s4) ;;
  h100) dev="NVIDIA H100 80GB HBM3"; u $R/h100-2026-12-06-grid/h100grid.db.xz table
        u $R/h100-2026-12-05/offgrid3.db.xz s3; u $R/h100-2026-12-05/offgrid4.db.xz s4
        u $R/h100-offgrid5-tiered/offgrid5.db.xz s5; u $R/h100-2026-12-07c-mixed-sweep/offgrid6.db.xz s6
        u $R/h100-2026-12-07e-alone/offgrid7.db.xz s7; u $R/h100-2026-12-07e-alone/offgrid8.db.xz s8
        sets=(s3 s4 s5 s6 s7 s8)
        for i in 1 2 3 4 5; do u $R/prefill-waves/pw$i.db.xz pw$i; sets+=(pw$i); done ;;
  *) echo "usage: score_added.sh h200|h100 ADDED.db.xz... (got '$gpu')" >&2; exit 2 ;;
esac
[ $# -gt 0 ] || { echo "give at least one database of shapes to add" >&2; exit 2; }
echo "tree $(git rev-parse --short HEAD), $dev, table sha256 $(sha256sum $W/table.db | cut -c1-8)"
cp $W/table.db $W/with.db
for f in "$@"; do
  [ -f "$f" ] || { echo "no such file: $f" >&2; exit 2; }
  name=$(basename "$f" .db.xz)
  case $name in offgrid[0-9]*) u "$f" s${name#offgrid}; sets+=(s${name#offgrid}); echo "scored: $f"; continue ;; esac
  u "$f" add; $T export --db $W/add.db --out $W/add.jsonl > /dev/null
  echo "added: $f ($($T import $W/add.jsonl --db $W/with.db))"
done
line() {   # json label
  $PY - "$@" <<'PY'
import json, sys
r = json.load(open(sys.argv[1])); o = r["overall"]["learned"]
cf = {k: v["learned"] for k, v in r["configs"].items() if v["learned"]["n"]}
ok = sum(v["regret_geomean"] <= 1.02 and v["regret_max"] <= 1.10 for v in cf.values())
slow = sum(v["slower_than_vllm-2026"] for v in cf.values())
top = {ph: max((v["regret_max"] for k, v in cf.items() if k.startswith(ph)), default=1.0) for ph in ("decode", "prefill")}
print(f"  {sys.argv[2]:8s} pooled {o['regret_geomean']:.4f}  max {max(v['regret_max'] for v in cf.values()):.3f} "
      f"(decode {top['decode']:.3f}, prefill {top['prefill']:.3f})  within {ok:2d}/{len(cf)}  "
      f"slower than vllm-2026 beyond noise {slow:2d}")
PY
}
for s in "${sets[@]}"; do
  pids=(); for t in table with; do $T evaluate --db $W/$t.db --device "$dev" --offgrid $W/$s.db --json > $W/e-$s-$t.json & pids+=($!); done
  for p in "${pids[@]}"; do wait $p; done      # set -e: a failed evaluation stops the script
  echo "$s:"; line $W/e-$s-table.json "table"; line $W/e-$s-with.json "+ added"
done
