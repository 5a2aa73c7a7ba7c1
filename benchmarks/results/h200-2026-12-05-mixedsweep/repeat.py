"""The sweep's uniform cells against the same cells in the shipped heuristics.db (another H200, another day):
per-pipeline time ratio, and the shipped winner's regret when timed in this run (the noise floor of a
decision between two machines). usage (repository root, after score.sh):
python benchmarks/results/h200-2026-12-05-mixedsweep/repeat.py"""
import math
import sqlite3
import statistics

W = '/tmp/h200-2026-12-05-mixedsweep'
q = ("select problem_key, pipeline, median_us, phase from measurements where status='ok' and max_kv_len = kv_len")
new, old = {}, {}
for db, into in ((W + '/sweep.db', new), ('heuristics.db', old)):
    for key, pid, us, phase in sqlite3.connect(db).execute(q):
        into.setdefault((phase, key), {})[pid] = us
common = [k for k in new if k in old]
for phase in ('decode', 'prefill'):
    cells = [k for k in common if k[0] == phase]
    ratios = sorted(math.log(new[k][p] / old[k][p]) for k in cells for p in new[k] if p in old[k])
    regrets = []
    for k in cells:
        shared = {p for p in new[k] if p in old[k]}
        if not shared:
            continue
        won = min(shared, key=lambda p: old[k][p])
        regrets.append(new[k][won] / min(new[k][p] for p in shared))
    print(f"{phase}: {len(cells)} cells, {len(ratios)} pipeline times; this run / shipped gm "
          f"{math.exp(statistics.fmean(ratios)):.3f} (p10 {math.exp(ratios[len(ratios) // 10]):.3f}, p90 "
          f"{math.exp(ratios[9 * len(ratios) // 10]):.3f}); shipped winner timed here: regret gm "
          f"{math.exp(statistics.fmean(math.log(r) for r in regrets)):.4f}, max {max(regrets):.3f}, "
          f"{sum(r > 1.02 for r in regrets)} over 1.02")
