"""Seconds per problem of H200 sweeps, from the stores' created_at stamps (1 s resolution; gaps over 20 s,
between device calls, are left out). usage: python rates.py DB..."""
import sqlite3
import sys
from datetime import datetime

for db in sys.argv[1:]:
    con = sqlite3.connect(db)
    rows = con.execute("select min(created_at), count(*), max(max_kv_len > kv_len) from measurements "
                       "group by problem_key order by 1").fetchall()
    stamps = sorted({datetime.fromisoformat(r[0]).timestamp() for r in rows})
    busy = sum(b - a for a, b in zip(stamps, stamps[1:]) if b - a <= 20)
    problems, pipelines, mixed = len(rows), sum(r[1] for r in rows), sum(r[2] for r in rows)
    print(f"{db.split('/')[-1]:22s} {problems:5d} problems ({mixed} mixed), {pipelines:6d} pipelines, "
          f"{busy:5.0f} s: {busy / problems:.2f} s per problem, {1000 * busy / pipelines:.0f} ms per pipeline")
