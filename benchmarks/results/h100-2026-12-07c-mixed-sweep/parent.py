"""The --mixed adaptive sweep's parent-side work without a GPU: tuner.library._adaptive as `tuner sweep`
runs it (the search's fits and ranking, the screen, the store), the measuring worker answered from a
finished sweep's database. Prints the wall time. usage: python parent.py SWEEP.db (from the tree to time)"""
import dataclasses
import os
import sqlite3
import sys
import tempfile
import time

import tuner.sweep as sweep
from dispatcher.registry import load_registry
from tuner import library
from tuner.analysis.evaluate import load_table
from tuner.library import SweepRequest, sweep_problems
from tuner.options import SweepOptions
from tuner.store import Store

src = sys.argv[1]
_, dev = load_table(src, None)
dev = dataclasses.replace(dev, memory_bytes=int(79.1 * 2**30))      # an H100's: which points fit
conn = sqlite3.connect(src)
conn.row_factory = sqlite3.Row
rows = {(r["problem_key"], r["pipeline"]): dict(r)
        for r in conn.execute("select * from measurements where status not in ('screened', 'unsupported')")}
KEEP = ("status", "median_us", "min_us", "max_us", "spread_us", "reps", "relerr", "max_relerr", "error")


class FromDatabase:
    fresh_retries = 0

    def measure(self, p, pipes, opts, clock=None):
        out = []
        for pp in pipes:
            r = rows.get((p.key(), pp.id)) or dict.fromkeys(KEEP) | {"status": "failed", "reps": 0}
            out.append({**pp.to_row(), **{k: r[k] for k in KEEP}})
        return out

    def close(self):
        pass


sweep.isolated = lambda *a, **k: FromDatabase()
probs = sweep_problems(SweepRequest(model="llama4-scout", grid="mixed"), dev)
db = os.path.join(tempfile.mkdtemp(), "parent.db")
timer = type("Timer", (), {"mode": "graph"})()
t = time.perf_counter()
report = library._adaptive(probs, dev, Store(db), db, timer, SweepOptions(isolate=True), load_registry(), None,
                           1 / 3, lambda s: None)
print(f"{len(report.outcomes)} problems, parent-side work {time.perf_counter() - t:.1f} s")
