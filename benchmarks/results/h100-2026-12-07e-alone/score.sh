#!/usr/bin/env bash
# The H100 full grid with off-grid seed 7 (measured alone on the device) added, scored on seed 8, measured after it
# in the same call and never used to pick a setting; and on the older H100 off-grid and mixed sets. CPU replay:
#   bash benchmarks/results/h100-2026-12-07e-alone/score.sh > benchmarks/results/h100-2026-12-07e-alone/score.txt
set -euo pipefail
R=benchmarks/results; D=$R/h100-2026-12-07e-alone; W=$(mktemp -d); trap 'rm -rf $W' EXIT
T=.venv/bin/tuner; PY=.venv/bin/python; H100="NVIDIA H100 80GB HBM3"
echo "tree $(git rev-parse --short HEAD)"
u() { xz -dc $R/$1.db.xz > $W/$2.db; }
u h100-2026-12-06-grid/h100grid hgrid; u h100-2026-12-07e-alone/offgrid7 og7; u h100-2026-12-07e-alone/offgrid8 og8
u h100-2026-12-05/offgrid3 h3; u h100-2026-12-05/offgrid4 h4; u h100-offgrid5-tiered/offgrid5 h5
u h100-2026-12-07c-mixed-sweep/offgrid6 h6; u h100-mixed6-7/mixed6 m6; u h100-mixed6-7/mixed7 m7
u h100-2026-12-07c-mixed-sweep/mixed8 m8; u h100-2026-12-07c-mixed-sweep/mixed9 m9; u h100-2026-12-07d-mixed-sweep/mixed10 m10
echo "seed 7's rows stored as measured alone: $(sqlite3 $W/og7.db 'select sum(alone) || " of " || count(*) from measurements')"
$T export --db $W/og7.db --out $W/og7.jsonl > /dev/null
cp $W/hgrid.db $W/g7.db; $T import $W/og7.jsonl --db $W/g7.db > /dev/null
# the older sets were measured before schema 6 (tuner sweep --problems too): marked alone here
cp $W/g7.db $W/gall.db
for s in h3 h4 h5 h6; do
  $T export --db $W/$s.db --out $W/$s-0.jsonl > /dev/null
  $PY -c "
import json, sys
with open(sys.argv[2], 'w') as out:
    for line in open(sys.argv[1]):
        item = json.loads(line); item['measurement']['alone'] = 1; out.write(json.dumps(item) + '\n')" $W/$s-0.jsonl $W/$s.jsonl
  $T import $W/$s.jsonl --db $W/gall.db > /dev/null
done
echo '{"alone_k": 0}' > $W/as-grid.json; echo '{}' > $W/default.json
score() {   # label table set settings
  $T evaluate --db $W/$2.db --device "$H100" --offgrid $W/$3.db --predictor-config $W/$4.json --json > $W/s.json
  $PY - $W/s.json "$1" <<'PY'
import json, sys
r = json.load(open(sys.argv[1])); o = r["overall"]["learned"]
cf = {k: v["learned"] for k, v in r["configs"].items() if v["learned"]["n"]}
mixed = any(k.endswith("mixed") for k in cf)
gm, mx = (1.03, 1.15) if mixed else (1.02, 1.10)
scored = {k: v for k, v in cf.items() if not mixed or ("kv=fp8" in k and k.endswith("mixed"))}
ok = sum(v["regret_geomean"] <= gm and v["regret_max"] <= mx for v in scored.values())
slow = sum(v["slower_than_vllm-2026"] for v in scored.values())
what = "FP8-KV mixed configurations" if mixed else "configurations"
print(f"  {sys.argv[2]:44s} pooled {o['regret_geomean']:.4f}  max {max(v['regret_max'] for v in cf.values()):.3f}  "
      f"{what} within gm {gm} / max {mx}: {ok}/{len(scored)}  slower than vllm-2026 beyond noise: {slow}")
PY
}
echo "## Off-grid seed 8 (fresh)"
score "H100 grid" hgrid og8 default
score "H100 grid + seed 7 as grid points (alone_k 0)" g7 og8 as-grid
score "H100 grid + seed 7 measured alone" g7 og8 default
score "H100 grid + seeds 3-7 as grid points" gall og8 as-grid
score "H100 grid + seeds 3-7 measured alone" gall og8 default
echo; echo "## The older H100 sets, with seed 7 added"
for s in h3 h4 h5 h6 m6 m7 m8 m9 m10; do
  score "$s: H100 grid" hgrid $s default
  score "$s: + seed 7 as grid points" g7 $s as-grid
  score "$s: + seed 7 measured alone" g7 $s default
done
