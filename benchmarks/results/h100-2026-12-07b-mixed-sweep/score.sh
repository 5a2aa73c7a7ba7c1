#!/usr/bin/env bash
# usage (repository root): bash benchmarks/results/h100-2026-12-07b-mixed-sweep/score.sh > benchmarks/results/h100-2026-12-07b-mixed-sweep/score.txt
# This folder's three H100 --mixed adaptive sweeps (cold, warm, warm again) and the same grid's sweep before the
# screen (../h100-2026-12-06-fp8skew-sweep/, 1139 points) and the H100's full grid (../h100-2026-12-06-grid/), each
# as the table, deciding the sets measured on H100s: mixed seeds 6
# and 7 (../h100-mixed6-7/), off-grid seed 5 (../h100-offgrid5-tiered/); then how much the three runs agree.
# CPU only.
set -euo pipefail
r=benchmarks/results; d=$r/h100-2026-12-07b-mixed-sweep; w=$(mktemp -d); trap 'rm -rf $w' EXIT; T=.venv/bin/tuner
for n in mixed mixedwarm mixedwarm2; do xz -dc $d/$n.db.xz > $w/$n.db; done
xz -dc $r/h100-2026-12-06-fp8skew-sweep/mixedsweep.db.xz > $w/noscreen.db
xz -dc $r/h100-2026-12-06-grid/h100grid.db.xz > $w/grid.db
xz -dc $r/h100-mixed6-7/mixed6.db.xz > $w/mixed6.db
xz -dc $r/h100-mixed6-7/mixed7.db.xz > $w/mixed7.db
xz -dc $r/h100-offgrid5-tiered/offgrid5.db.xz > $w/offgrid5.db
H100="NVIDIA H100 80GB HBM3"
for s in mixed6 mixed7 offgrid5; do
  for n in grid noscreen mixed mixedwarm mixedwarm2; do
    $T evaluate --db $w/$n.db --device "$H100" --offgrid $w/$s.db --json > $w/$n-$s.json &
  done
  wait
  for n in grid noscreen mixed mixedwarm mixedwarm2; do
    .venv/bin/python -c "
import json, sys
n, s, path = sys.argv[1:]
r = json.load(open(path)); o = r['overall']['learned']
fp8 = [v['learned'] for k, v in r['configs'].items() if 'kv=fp8' in k and 'decode' in k]
ok = sum(v['regret_geomean'] <= 1.03 and v['regret_max'] <= 1.15 for v in fp8)
label = {'grid': 'H100 full grid', 'noscreen': '2026-12-06, no screen', 'mixed': 'cold', 'mixedwarm': 'warm', 'mixedwarm2': 'warm again'}[n]
print(f\"{label:22s} {s:9s} regret gm {o['regret_geomean']:.4f} over {o['n']}, max {o['regret_max']:.2f}, \"
      f\"FP8-KV decode configs gm<=1.03 and max<=1.15: {ok}/{len(fp8)}\")" $n $s $w/$n-$s.json
  done
done
echo
echo "## The three runs: problems measured in common, and where both measured a problem, the same winner"
.venv/bin/python - $w/mixed.db $w/mixedwarm.db $w/mixedwarm2.db <<'PY'
import itertools, sqlite3, sys
def load(path):
    c = sqlite3.connect(path)
    rows = c.execute("select problem_key, pipeline, median_us, status from measurements")
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
