"""The adaptive search's own time (model fits and ranking the points in doubt), without the GPU: the
`--mixed --search adaptive` grid of Llama-4-Scout on a finished sweep's GPU, each point chosen "measured" by
copying its rows from that sweep's database. Prints the search's wall time, the fits, one read of the whole
database as the sweep does per fit (read_table), and how many chosen points the database lacks.
usage: python benchmarks/search_time.py SWEEP.db [--memory-gib 79.1] [--picked FILE]
(--picked writes the points chosen, to compare two runs' picks; a commit before the budget split's fixed
order, tuner/search/adaptive.py allocate, needs PYTHONHASHSEED=0 for that)"""
import argparse
import dataclasses
import inspect
import time

from dispatcher.measurements import read_table
from dispatcher.predictor import Predictor
from dispatcher.resolve import default_timing_mode
from dispatcher.table import Table
from tuner.analysis.evaluate import load_table
from tuner.library import SweepRequest, sweep_problems
from tuner.search import adaptive

ap = argparse.ArgumentParser()
ap.add_argument("db")
ap.add_argument("--memory-gib", type=float, default=79.1, help="the GPU's memory: which points fit (H100 79.1)")
ap.add_argument("--picked")
args = ap.parse_args()
pool, dev = load_table(args.db, None)
dev = dataclasses.replace(dev, memory_bytes=int(args.memory_gib * 2**30))
grid = sweep_problems(SweepRequest(model="llama4-scout", grid="mixed"), dev)
train, spent = Table(), {"fit": 0.0, "fits": 0, "missing": 0}
# as the sweep fits (tuner/library.py); a commit from before fit(remember=...) is timed as it was
REMEMBER = {"remember": True} if "remember" in inspect.signature(Predictor.fit).parameters else {}


def reveal(ps):
    for p in ps:
        rows = pool.by_cell.get(p.cell(), {})
        spent["missing"] += not rows
        for t in rows.values():
            train.add(p.cell(), t)


def fit(table):
    t = time.perf_counter()
    model = Predictor().fit(table, dev, **REMEMBER)
    spent["fit"] += time.perf_counter() - t
    spent["fits"] += 1
    return model


t0 = time.perf_counter()
# a copy per fit, as the sweep reads its store: the model sees what was measured before its fit
picked = adaptive.adaptive_sweep(grid, reveal, lambda: train.subset(train.by_cell), 1 / 3, fit=fit, between=True)
wall = time.perf_counter() - t0
t = time.perf_counter()
read_table(args.db, dev, default_timing_mode(dev))
read = time.perf_counter() - t
name = args.db.split("/")[-1]
print(f"{dev.name}: {len(grid)} grid points, {len(picked)} chosen ({spent['missing']} not in {name}); "
      f"search {wall:.1f} s, of it {spent['fits']} fits {spent['fit']:.1f} s; one read of the whole db {read:.2f} s")
if args.picked:
    with open(args.picked, "w") as f:
        f.write("\n".join(str(p.key()) for p in picked) + "\n")
