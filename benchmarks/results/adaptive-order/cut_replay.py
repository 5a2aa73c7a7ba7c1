"""An adaptive search cut short, replayed on a measured grid: stopped after N points (as --max-minutes
stops a sweep), the model fitted on what was measured and scored on every other cell of the grid.
usage: PYTHONPATH=. python benchmarks/results/adaptive-order/cut_replay.py DB N"""
import sys

from dispatcher.predictor import Predictor
from dispatcher.table import Table
from tuner.analysis.evaluate import _as_measured, _cells, load_table, overall, score
from tuner.search.adaptive import adaptive_sweep

db, cut = sys.argv[1], int(sys.argv[2])
full, dev = load_table(db, "NVIDIA H200")
cells = _cells(full, dev, db)
train = Table()


def reveal(ps):
    for c in ps:
        for t in full.timings(c):
            train.add(c, t)


picked = adaptive_sweep(cells, reveal, lambda: train, 1 / 3, fit=lambda t: Predictor().fit(t, dev),
                        stopped=lambda: len(train.by_cell) >= cut)
held = set(cells) - set(picked)
o = overall(score(train, _as_measured(full, held), dev, ("learned",)))["learned"]
fams = {c.family() for c in picked}
print(f"{db.split('/')[-1]}: cut at {cut}: {len(train.by_cell)} measured, {len(fams)} of "
      f"{len({c.family() for c in cells})} configurations sampled; on the other {o['n']} cells regret "
      f"{o['regret_geomean']:.4f}, max {o['regret_max']:.2f}, {o['configs_within_target']}/{o['configs']} within 1.02")
