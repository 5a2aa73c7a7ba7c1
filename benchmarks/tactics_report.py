"""Where a searched tactic beat the kernel's default, from a database swept with --tactics optuna.
usage: python benchmarks/tactics_report.py [DB] [KERNEL]"""
import sqlite3
import sys

db = sys.argv[1] if len(sys.argv) > 1 else "heuristics.db"
kernel = sys.argv[2] if len(sys.argv) > 2 else "fa2-tc"
c = sqlite3.connect(db)
rows = c.execute("select distinct t.problem_key, t.base from tactic_trials t where t.base like ? || '[%'",
                 [kernel]).fetchall()
print(f"{'kv':5} {'batch':>5} {'kv_len':>6}  {'default us':>10}  {'best tactic':38} {'best us':>8}  speedup  settings")
out = []
for key, base in rows:
    head = base.split("[")[0]
    tail = base.split("]", 1)[1]
    ms = c.execute("select pipeline, median_us, spread_us, batch_size, kv_len, kv_dtype from measurements "
                   "where problem_key = ? and status = 'ok' and pipeline like ? || '[%' || ?",
                   [key, head, tail]).fetchall()
    ms = [m for m in ms if m[0].split("]", 1)[1] == tail]
    d = next((m for m in ms if m[0] == base), None)
    if d is None:
        continue
    best = min(ms, key=lambda m: m[1])
    n = c.execute("select count(distinct pipeline) from tactic_trials where problem_key = ? and base = ? "
                  "and status not like 'refused%'", [key, base]).fetchone()[0]
    out.append((d[5], d[3], d[4], d[1], best[0], best[1], d[1] / best[1], n, d[2], best[2]))
for kv, b, L, du, bp, bu, s, n, ds, bs in sorted(out):
    tie = " (within spread)" if du - bu <= max(ds, bs) else ""
    print(f"{kv:5} {b:5d} {L:6d}  {du:10.1f}  {bp:38} {bu:8.1f}  {s:6.3f}x  {n}{tie}")
