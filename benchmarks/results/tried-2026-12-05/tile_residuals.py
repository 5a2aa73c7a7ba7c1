"""Prefill prediction error by query-tile fill: measured / predicted time per kernel and query-head count, on
off-grid sets, binned by q_len / (q_len rounded up to 128). usage (repository root):
python benchmarks/results/tried-2026-12-05/tile_residuals.py OFFGRID.db..."""
import math, sys, collections
sys.path.insert(0, '.')
from tuner.analysis.evaluate import load_table
from dispatcher.dispatch import read_rows, default_timing_mode
from dispatcher.table import measured_problems
from dispatcher.predictor import Predictor
full, dev = load_table('heuristics.db', 'NVIDIA H200')
model = Predictor().fit(full, dev)
out = collections.defaultdict(list)
for db in sys.argv[1:]:
    meas = measured_problems(read_rows(db, dev, default_timing_mode(dev)))
    for p, byp in meas.items():
        if p.phase != 'prefill': continue
        pred = {t.pipeline.id: t.median_us for t in model.predict(p)}
        for pid, t in byp.items():
            if pid in pred:
                k = pid.split('[')[0].split('+')[0]
                fill = p.q_len / (math.ceil(p.q_len / 128) * 128)
                out[(k, p.num_qo_heads)].append((fill, math.log(t.median_us / pred[pid]), p))
for key, v in sorted(out.items()):
    bins = collections.defaultdict(list)
    for fill, r, p in v:
        bins[min(int(fill * 4), 3)].append(r)
    print(key, len(v), " ".join(f"fill<{(b+1)/4:.2f}: {math.exp(sum(x)/len(x)):.3f} (n={len(x)})" for b, x in sorted(bins.items())))
