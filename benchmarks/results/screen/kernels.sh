#!/usr/bin/env bash
# Per kernel on the shipped H200 grid (heuristics.db): measurements, their share, and how close the kernel came
# to the fastest pipeline of the same problem (ok rows only).
#   bash benchmarks/results/screen/kernels.sh > benchmarks/results/screen/kernels.txt
set -euo pipefail
${PY:-.venv/bin/python} - <<'PY'
import sqlite3
c = sqlite3.connect("file:heuristics.db?mode=ro", uri=True)
total = c.execute("select count(*) from measurements").fetchone()[0]
print(f"{'kernel':16} {'rows':>6} {'share':>6} {'ok':>6} {'closest':>8} {'<2x':>6}")
for kernel, rows, ok, closest, under2 in c.execute("""
    with best as (select env_id, problem_key, min(median_us) b from measurements where status = 'ok' group by 1, 2)
    select m.kernel, count(*), sum(m.status = 'ok'), min(case when m.status = 'ok' then m.median_us / b.b end),
           sum(m.status = 'ok' and m.median_us < 2 * b.b)
    from measurements m join best b using (env_id, problem_key) group by 1 order by 2 desc"""):
    print(f"{kernel:16} {rows:>6} {rows / total:6.1%} {ok:>6} {closest:8.3f} {under2:>6}")
PY
