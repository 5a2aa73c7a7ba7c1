"""Tried, not landed: an adaptive search whose refinement points measure only the pipelines within K x the
best at one of their NEIGHBOURS nearest measured cells, replayed on a measured database (every cell there
stands for a grid point). Prints how many pipelines were measured, how often a refinement point's winner was
left out, and the held-out regret of the model fitted on what was measured.
usage: PYTHONPATH=. python benchmarks/results/tried-prune-refinement/replay.py DB K   (K >= 100: no pruning)"""
import math
import sys

from dispatcher.policy import max_relerr
from dispatcher.predictor import Predictor
from dispatcher.table import Table
from tuner.analysis.evaluate import _as_measured, _cells, load_table, overall, score
from tuner.search import adaptive

db, K = sys.argv[1], float(sys.argv[2])
full, dev = load_table(db, None)
cells = _cells(full, dev, db)
train = Table()
seen = {"model": None, "coarse": 0, "refined": 0, "pipes": 0, "all_pipes": 0, "regrets": []}
refinement = adaptive._refinement


def spy(fam, pts, chosen, budget, model, between):     # the refinement pass has begun: its model
    seen["model"] = model
    return refinement(fam, pts, chosen, budget, model, between)


adaptive._refinement = spy


def kept(c, ts):
    """The pipelines a pruned refinement point measures: within K x the best at a near measured cell."""
    model = seen["model"]
    if model is None or K >= 100:
        return set(ts)
    here = model.x(c)
    fam = [b for b in model.table.by_family.get(c.family(), []) if b in model._x and b != c]
    budget = max_relerr(c.kv_dtype, c.out_dtype)
    keep = set()
    for b in sorted(fam, key=lambda b: math.dist(model._x[b], here))[:adaptive.NEIGHBOURS]:
        ok = {pid: t for pid, t in model.table.by_cell[b].items() if t.relerr is None or t.relerr <= budget}
        if ok:
            best = min(t.median_us for t in ok.values())
            keep |= {pid for pid, t in ok.items() if t.median_us <= K * best}
    return (keep & set(ts)) or set(ts)


def reveal(ps):
    for c in ps:
        ts = full.by_cell.get(c, {})
        keep = kept(c, ts)
        seen["refined" if seen["model"] else "coarse"] += 1
        seen["pipes"] += len(keep)
        seen["all_pipes"] += len(ts)
        budget = max_relerr(c.kv_dtype, c.out_dtype)
        ok = {pid: t.median_us for pid, t in ts.items() if t.relerr is None or t.relerr <= budget}
        if seen["model"] and ok:
            best_kept = min((ok[p] for p in keep if p in ok), default=10 * min(ok.values()))
            seen["regrets"].append(best_kept / min(ok.values()))
        for pid in keep:
            train.add(c, ts[pid])


picked = adaptive.adaptive_sweep(cells, reveal, lambda: train, 1 / 3, fit=lambda t: Predictor().fit(t, dev))
o = overall(score(train, _as_measured(full, set(cells) - set(picked)), dev, ("learned",)))["learned"]
r = seen["regrets"]
print(f"{db.split('/')[-1]} K={K:g}: {seen['coarse']} coarse + {seen['refined']} refined points; pipelines measured "
      f"{seen['pipes']} of {seen['all_pipes']} ({seen['pipes'] / seen['all_pipes']:.2f}); refined points whose winner "
      f"was left out {sum(x > 1.0001 for x in r)}, max {max(r, default=1):.2f}; held-out regret "
      f"{o['regret_geomean']:.4f}, max {o['regret_max']:.2f} ({o['n']} cells)")
