"""Replay the adaptive search (with its screen, a fraction of the grid's cells) on a finished grid, with one of
the doubt orders below, then score the table it measured on the grid cells it did not pick and on off-grid and
mixed sets measured on the same device. As `tuner evaluate --adaptive` replays it: on the grid's own cells, so
without the sweep's off-lattice midpoints (between=False).
usage: python replay.py VARIANT GRID.db FRACTION SET.db...  -> one JSON object, per set"""
import json
import math
import sys

import tuner.search.adaptive as adaptive
from dispatcher.dispatch import default_timing_mode, read_rows
from dispatcher.policy import max_relerr
from dispatcher.predictor import Predictor
from dispatcher.registry import load_registry
from dispatcher.table import Table, measured_problems, rank
from tuner.analysis.evaluate import _cells, load_table, overall, score
from tuner.search.screen import screened_fits

shipped_doubt = adaptive.doubt


def foreign_doubt(variant: str):
    """doubt() with one more signal: the model's predicted winner at p is not the measured winner of any of
    its nearest measured neighbours (by pipeline, or by kernel with a trailing k)."""
    def doubt(p, model):
        disagree, within, neg_margin, gap = shipped_doubt(p, model)
        budget = max_relerr(p.kv_dtype, p.out_dtype)
        near = model.neighbours(p)[:adaptive.NEIGHBOURS]
        won = [r.winner.pipeline for b in near if (r := rank(model.table.timings(b), budget))]
        pred = rank(model.predict(p), budget)
        foreign = False
        if pred is not None and won:
            if variant.endswith("k"):
                foreign = pred.winner.pipeline.kernel not in {w.kernel for w in won}
            else:
                foreign = pred.winner.pipeline.id not in {w.id for w in won}
        if variant.startswith("A"):     # foreign counts as neighbours disagreeing
            return (disagree or foreign, within, neg_margin, gap)
        return (disagree, foreign, within, neg_margin, gap)       # B: next after disagreeing
    return doubt


variant, grid, fraction, sets = sys.argv[1], sys.argv[2], float(sys.argv[3]), sys.argv[4:]
if variant != "shipped":
    adaptive.doubt = foreign_doubt(variant)
full, dev = load_table(grid, None)
cells = _cells(full, dev, grid)
train = Table()
predictor = Predictor()
fit, screen_of = screened_fits(lambda t: predictor.fit(t, dev, remember=True), 2.0, dev, load_registry())


def reveal(ps):
    for c in ps:
        timings = full.timings(c)
        skip = screen_of(c, [t.pipeline for t in timings], {t.pipeline.id for t in timings}) if timings else {}
        for t in timings:
            if t.pipeline.id not in skip:
                train.add(c, t)


picked = adaptive.adaptive_sweep(cells, reveal, lambda: train.subset(train.by_cell), fraction, fit=fit)
held = {c: full.by_cell[c] for c in set(cells) - set(picked)}      # as `tuner evaluate --adaptive` scores
out = {"held-out grid cells": {k: overall(score(train, held, dev, ("learned",)))["learned"][k]
                               for k in ("n", "regret_geomean", "regret_max")}}
for s in sets:
    o = overall(score(train, measured_problems(read_rows(s, dev, default_timing_mode(dev))), dev, ("learned",)))
    out[s.rsplit("/", 1)[1]] = {k: o["learned"][k] for k in ("n", "regret_geomean", "regret_max")}
print(json.dumps(out))
