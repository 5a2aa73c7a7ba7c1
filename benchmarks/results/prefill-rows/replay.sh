#!/usr/bin/env bash
# A CPU replay standing in for the prefill batch-rows set before a GPU measures it: each H200 off-grid seed is
# scored by the shipped db plus the other three seeds' prefill shapes between the grid's batch rows (a batch not
# in 1, 2, 4, 8, 16) at 512 new tokens or fewer, stored as measured alone.
#   bash benchmarks/results/prefill-rows/replay.sh > benchmarks/results/prefill-rows/replay.txt
set -euo pipefail
R=benchmarks/results; W=$(mktemp -d); trap 'rm -rf $W' EXIT
T=.venv/bin/tuner; PY=.venv/bin/python
echo "tree $(git describe --always --dirty), heuristics.db sha256 $(sha256sum heuristics.db | cut -c1-8)"
u() { xz -dc $R/$1.db.xz > $W/$2.db; }
u h200-2026-12-05/offgrid-seed1 o1; u h200-2026-12-06/offgrid2 o2; u prefill-tiles/offgrid3 o3; u h200-offgrid4-waves/offgrid4 o4
pick() {   # seed -> $W/seed-rows.jsonl
  $T export --db $W/$1.db --out $W/$1-all.jsonl > /dev/null
  $PY - $W/$1-all.jsonl $W/$1-rows.jsonl $1 <<'PY'
import json, sys
src, dst, name = sys.argv[1:]
shapes = set()
with open(dst, "w") as out:
    for line in open(src):
        item = json.loads(line); m = item["measurement"]
        if m["phase"] != "prefill" or m["batch_size"] in (1, 2, 4, 8, 16) or m["q_len"] > 512:
            continue
        m["alone"] = 1
        shapes.add(m["problem_key"])
        out.write(json.dumps(item) + "\n")
print(f"{name}: {len(shapes)} prefill shapes between the rows")
PY
}
score() {   # db seed label [device]
  $T evaluate --db $1 --device "${4:-NVIDIA H200}" --offgrid $W/$2.db --json > $W/e.json
  $PY - $W/e.json "$3" <<'PY'
import json, sys
r = json.load(open(sys.argv[1])); o = r["overall"]["learned"]; cf = {k: v["learned"] for k, v in r["configs"].items()}
cf = {k: v for k, v in cf.items() if v["n"]}
ok = sum(v["regret_geomean"] <= 1.02 and v["regret_max"] <= 1.10 for v in cf.values())
pre = {k: v for k, v in cf.items() if k.startswith("prefill")}
print(f"  {sys.argv[2]:16s} pooled {o['regret_geomean']:.4f}  within gm 1.02 and max 1.10 {ok:2d}/{len(cf)}  prefill max "
      f"{max(v['regret_max'] for v in pre.values()):.3f}  slower than vllm-2026 beyond noise "
      f"{sum(v['slower_than_vllm-2026'] for v in cf.values())}  worst prefill config vs vllm-2026 "
      f"{min(v['speedup_vs_vllm-2026'] for v in pre.values()):.4f}x")
PY
}
for s in o1 o2 o3 o4; do pick $s; done
for held in o1 o2 o3 o4; do
  cp heuristics.db $W/with.db
  for s in o1 o2 o3 o4; do [ $s = $held ] || $T import $W/$s-rows.jsonl --db $W/with.db > /dev/null; done
  echo "$held:"; score heuristics.db $held "shipped"; score $W/with.db $held "+ other seeds'"
done
echo; echo "H100: its grid plus the between-row sets pw1, pw2 and pw4 (../prefill-waves/), stored as measured alone"
H=(pw3 pw5 s3 s4 s5 s6 s7 s8)
for i in 1 2 3 4 5; do u prefill-waves/pw$i pw$i; done
u h100-2026-12-06-grid/h100grid h100grid
u h100-2026-12-05/offgrid3 s3; u h100-2026-12-05/offgrid4 s4; u h100-offgrid5-tiered/offgrid5 s5
u h100-2026-12-07c-mixed-sweep/offgrid6 s6; u h100-2026-12-07e-alone/offgrid7 s7; u h100-2026-12-07e-alone/offgrid8 s8
cp $W/h100grid.db $W/h100with.db
for i in 1 2 4; do
  $T export --db $W/pw$i.db --out $W/pw$i.jsonl > /dev/null
  $PY -c "
import json, sys
with open(sys.argv[2], 'w') as out:
    for line in open(sys.argv[1]):
        item = json.loads(line); item['measurement']['alone'] = 1; out.write(json.dumps(item) + '\n')" $W/pw$i.jsonl $W/pw$i-alone.jsonl
  $T import $W/pw$i-alone.jsonl --db $W/h100with.db > /dev/null
done
for s in "${H[@]}"; do
  echo "$s:"; score $W/h100grid.db $s "H100 grid" "NVIDIA H100 80GB HBM3"; score $W/h100with.db $s "+ pw1, pw2, pw4" "NVIDIA H100 80GB HBM3"
done
