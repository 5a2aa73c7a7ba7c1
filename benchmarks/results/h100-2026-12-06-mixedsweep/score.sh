#!/usr/bin/env bash
# usage (repository root): bash benchmarks/results/h100-2026-12-06-mixedsweep/score.sh > benchmarks/results/h100-2026-12-06-mixedsweep/score.txt
# The H100's own --mixed adaptive sweep (this folder) as the table, against the shipped H200 heuristics.db,
# each deciding the sets measured on H100s: mixed seeds 6 and 7 (../h100-mixed6-7/), off-grid seed 5
# (../h100-offgrid5-tiered/). CPU only.
set -euo pipefail
r=benchmarks/results; w=/tmp/h100-mixedsweep-score; mkdir -p $w; T=.venv/bin/tuner
xz -dc $r/h100-2026-12-06-mixedsweep/mixedsweep.db.xz > $w/sweep.db
xz -dc $r/h100-mixed6-7/mixed6.db.xz > $w/mixed6.db
xz -dc $r/h100-mixed6-7/mixed7.db.xz > $w/mixed7.db
xz -dc $r/h100-offgrid5-tiered/offgrid5.db.xz > $w/offgrid5.db
# the same sweep without its mixed batches (its uniform points alone)
cp $w/sweep.db $w/uniform.db
python3 -c "
import sqlite3, sys
c = sqlite3.connect(sys.argv[1])
keys = [(k,) for (k,) in c.execute('select distinct problem_key from measurements where max_kv_len > kv_len')]
c.executemany('delete from measurements where problem_key = ?', keys)
c.executemany('delete from winners where problem_key = ?', keys)
c.commit()" $w/uniform.db
H100="NVIDIA H100 80GB HBM3"
for s in mixed6 mixed7 offgrid5; do
  $T evaluate --db $w/sweep.db --device "$H100" --offgrid $w/$s.db --json > $w/sweep-$s.json
  $T evaluate --db $w/uniform.db --device "$H100" --offgrid $w/$s.db --json > $w/uniform-$s.json
  $T evaluate --db heuristics.db --device "NVIDIA H200" --offgrid $w/$s.db --measured-on "$H100" --json > $w/shipped-$s.json
  for n in sweep uniform shipped; do
    python3 -c "
import json, sys
n, s, path = sys.argv[1:]
r = json.load(open(path)); o = r['overall']['learned']
fp8 = [v['learned'] for k, v in r['configs'].items() if 'kv=fp8' in k and 'decode' in k]
ok = sum(v['regret_geomean'] <= 1.03 and v['regret_max'] <= 1.15 for v in fp8)
label = {'sweep': 'H100 --mixed sweep', 'uniform': '  its uniform points', 'shipped': 'shipped H200 db'}[n]
print(f\"{label:20s} {s:9s} regret gm {o['regret_geomean']:.4f} over {o['n']}, max {o['regret_max']:.2f}, \"
      f\"FP8-KV decode configs gm<=1.03 and max<=1.15: {ok}/{len(fp8)}\")" $n $s $w/$n-$s.json
  done
done
