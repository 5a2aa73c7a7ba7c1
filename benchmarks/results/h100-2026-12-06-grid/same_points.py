"""The same 2456 uniform points measured on the H200 (the shipped heuristics.db) and on an H100 (h100grid.db):
how often their winners agree, and what the H200's winner costs on the H100 (and the reverse), per phase.
usage: PYTHONPATH=. python benchmarks/results/h100-2026-12-06-grid/same_points.py heuristics.db h100grid.db"""
import math
import sys
from collections import defaultdict

from dispatcher.policy import max_relerr
from dispatcher.table import rank
from tuner.analysis.evaluate import load_table

h200, _ = load_table(sys.argv[1], "NVIDIA H200")
h100, _ = load_table(sys.argv[2], "NVIDIA H100 80GB HBM3")


def winner(table, c):
    r = rank(table.timings(c), max_relerr(c.kv_dtype, c.out_dtype))
    return r.winner.pipeline.id if r else None


def best_us(table, c):
    budget = max_relerr(c.kv_dtype, c.out_dtype)
    return min((t.median_us for t in table.timings(c) if t.relerr is None or t.relerr <= budget), default=None)


out = defaultdict(lambda: {"n": 0, "same": 0, "on100": [], "on200": []})
for c in sorted(set(h100.by_cell) & set(h200.by_cell), key=lambda c: c.key()):
    if c.max_kv_len != c.kv_len:
        continue
    w200, w100 = winner(h200, c), winner(h100, c)
    if not (w200 and w100):
        continue
    g = out[(c.phase, c.kv_dtype)]
    g["n"] += 1
    g["same"] += w200 == w100
    t100 = h100.by_cell[c].get(w200)    # the H200's winner, timed on the H100
    t200 = h200.by_cell[c].get(w100)
    if t100 is not None:
        g["on100"].append(t100.median_us / best_us(h100, c))
    if t200 is not None:
        g["on200"].append(t200.median_us / best_us(h200, c))


def gm(xs):
    return math.exp(sum(map(math.log, xs)) / len(xs)) if xs else float("nan")


print("phase    kv    points  same winner  H200's winner on the H100: gm, max, >1.05  "
      "H100's winner on the H200: gm, max")
for (ph, kv), g in sorted(out.items()):
    a, b = g["on100"], g["on200"]
    slow = sum(x > 1.05 for x in a)
    print(f"{ph:8s} {kv:5s} {g['n']:6d}  {g['same'] / g['n']:10.0%}  {gm(a):10.4f} {max(a):6.2f} {slow:5d}"
          f"      {gm(b):12.4f} {max(b):6.2f}")
