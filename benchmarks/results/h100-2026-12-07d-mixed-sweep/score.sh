#!/usr/bin/env bash
# usage (repository root): bash benchmarks/results/h100-2026-12-07d-mixed-sweep/score.sh > benchmarks/results/h100-2026-12-07d-mixed-sweep/score.txt
# 1. The shipped H200 heuristics.db deciding this folder's fresh H100 mixed seed 10 (drawn and measured after
#    every setting was picked), on the H100's times, with benchmarks/targets.py.
# 2. This folder's two --mixed adaptive sweeps (ec434ce) beside the H100's full grid (../h100-2026-12-06-grid/)
#    and the 5fc01c5 sweeps (../h100-2026-12-07c-mixed-sweep/) as the table, deciding H100 mixed seeds 6-10 and
#    off-grid seeds 5 and 6 (H100 decisions on H100 times); then how much the runs agree. CPU only.
set -euo pipefail
r=benchmarks/results; d=$r/h100-2026-12-07d-mixed-sweep; c=$r/h100-2026-12-07c-mixed-sweep
w=$(mktemp -d); trap 'rm -rf $w' EXIT
T=.venv/bin/tuner; PY=.venv/bin/python; H100="NVIDIA H100 80GB HBM3"
echo "tree $(git rev-parse --short HEAD)"
for n in mixed mixedwarm; do xz -dc $d/$n.db.xz > $w/$n.db; xz -dc $c/$n.db.xz > $w/c-$n.db; done
for n in mixed8 mixed9 offgrid6; do xz -dc $c/$n.db.xz > $w/$n.db; done
xz -dc $d/mixed10.db.xz > $w/mixed10.db
xz -dc $r/h100-2026-12-06-grid/h100grid.db.xz > $w/grid.db
xz -dc $r/h100-mixed6-7/mixed6.db.xz > $w/mixed6.db
xz -dc $r/h100-mixed6-7/mixed7.db.xz > $w/mixed7.db
xz -dc $r/h100-offgrid5-tiered/offgrid5.db.xz > $w/offgrid5.db
echo "## 1. The shipped H200 table (heuristics.db sha256 $(sha256sum heuristics.db | cut -c1-8)) on H100 mixed seed 10"
$T evaluate --db heuristics.db --device "NVIDIA H200" --offgrid $w/mixed10.db --measured-on "$H100" --json > $w/shipped.json
$PY benchmarks/targets.py $w/shipped.json | sed "s|^shipped|shipped H200 table, mixed10|"
$PY -c "
import json, sys
r = json.load(open(sys.argv[1]))
for m in ('learned', 'max-keyed', 'mean-keyed'):
    o = r['overall'][m]; print(f\"  {m:10s} regret gm {o['regret_geomean']:.4f} over {o['n']}, max {o['regret_max']:.2f}\")" $w/shipped.json
echo; echo "## 2. Each sweep as the table (H100 decisions on H100 times)"
tables="grid c-mixed c-mixedwarm mixed mixedwarm"
for s in mixed6 mixed7 mixed8 mixed9 mixed10 offgrid5 offgrid6; do
  for n in $tables; do $T evaluate --db $w/$n.db --device "$H100" --offgrid $w/$s.db --json > $w/$n-$s.json & done; wait
  for n in $tables; do
    $PY -c "
import json, sys
n, s, path = sys.argv[1:]
r = json.load(open(path)); o = r['overall']['learned']
fp8 = [v['learned'] for k, v in r['configs'].items() if 'kv=fp8' in k and 'decode' in k and v['learned']['n']]
ok = sum(v['regret_geomean'] <= 1.03 and v['regret_max'] <= 1.15 for v in fp8)
label = {'grid': 'H100 full grid', 'c-mixed': '5fc01c5 cold', 'c-mixedwarm': '5fc01c5 warm',
         'mixed': 'ec434ce cold', 'mixedwarm': 'ec434ce warm'}[n]
print(f\"{label:15s} {s:9s} regret gm {o['regret_geomean']:.4f} over {o['n']}, max {o['regret_max']:.2f}, \"
      f\"FP8-KV decode configs gm<=1.03 and max<=1.15: {ok}/{len(fp8)}\")" $n $s $w/$n-$s.json
  done
done
echo; echo "## The runs: problems measured in common, and where both measured a problem, the same winner"
$PY - $w/c-mixed.db $w/c-mixedwarm.db $w/mixed.db $w/mixedwarm.db <<'PY'
import itertools, sqlite3, sys
def load(path):
    rows = sqlite3.connect(path).execute("select problem_key, pipeline, median_us, status from measurements")
    best, keys, screened = {}, set(), 0
    for key, pipe, us, status in rows:
        keys.add(key)
        screened += status == "screened"
        if status == "ok" and (key not in best or us < best[key][1]):
            best[key] = (pipe, us)
    return keys, best, screened
runs = {p.rsplit("/", 1)[1]: load(p) for p in sys.argv[1:]}
for name, (keys, best, screened) in runs.items():
    print(f"{name}: {len(keys)} problems, {screened} pipelines screened")
for (a, (ka, ba, _)), (b, (kb, bb, _)) in itertools.combinations(runs.items(), 2):
    both = ka & kb
    same = sum(ba[k][0] == bb[k][0] for k in both if k in ba and k in bb)
    print(f"{a} / {b}: {len(both)} problems in common; same winner at {same} of {len(both)}")
PY
