"""Does a measured mixed batch's error of the prior carry to a nearby batch? For every batch of the random
mixed sets and the serving replay and every pipeline it ran: its own log(measured / prior) against the
nearest measured batch's of the same pipeline, among the sweep's canonical one-long batches and among the
other random sets' batches, binned by feature distance. usage (repository root, after score.sh):
python benchmarks/results/h200-2026-12-05-mixedsweep/transfer.py"""
import math
import statistics
import sys

sys.path.insert(0, '.')
from dispatcher.dispatch import default_timing_mode, read_rows  # noqa: E402
from dispatcher.predictor import Predictor  # noqa: E402
from dispatcher.table import measured_problems  # noqa: E402
from tuner.analysis.evaluate import load_table  # noqa: E402

W = '/tmp/h200-2026-12-05-mixedsweep'
full, dev = load_table(W + '/shipped.db', 'NVIDIA H200')
model = Predictor().fit(full, dev)
uniform = model._uniform or model
mode = default_timing_mode(dev)


def residuals(db):
    out = {}
    for p, byp in measured_problems(read_rows(db, dev, mode)).items():
        if p.skew == 1:
            continue
        prior = {t.pipeline.id: t.median_us for t in uniform.ragged_prior(p)}
        out[p] = {pid: math.log(t.median_us / prior[pid]) for pid, t in byp.items() if prior.get(pid)}
    return out


sets = {s: residuals(f'{W}/{s}.db') for s in ('sweep', 'mixed1', 'mixed2', 'mixed3', 'replay')}
bins = (0.5, 1.0, 2.0, 99)
for source in ('sweep', 'random'):
    rows = {b: [] for b in bins}
    for target in ('mixed1', 'mixed2', 'mixed3', 'replay'):
        pool = sets['sweep'] if source == 'sweep' else {
            p: r for s in ('mixed1', 'mixed2', 'mixed3') if s != target for p, r in sets[s].items()}
        for p, own in sets[target].items():
            x = uniform.x(p)
            for pid, r in own.items():
                cands = [(math.dist(uniform.x(c), x), rc[pid]) for c, rc in pool.items()
                         if c.family() == p.family() and pid in rc]
                if not cands:
                    continue
                d, rn = min(cands)
                rows[next(b for b in bins if d <= b)].append(abs(r - rn))
    print(f"nearest {source:6s} batch: " + "; ".join(
        f"distance <= {b}: n={len(v)}, |own - nearest| median {math.exp(statistics.median(v)):.2f}x, "
        f"p90 {math.exp(sorted(v)[int(0.9 * (len(v) - 1))]):.2f}x"
        for b, v in rows.items() if v))
