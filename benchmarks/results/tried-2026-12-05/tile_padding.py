"""Prefill query-tile padding as a prior on the learned model (tried, not landed; README.md here).
usage (repository root): python benchmarks/results/tried-2026-12-05/tile_padding.py ALPHA KERNELS CELLFIX OFFGRID.db...
Kernels in KERNELS (comma-separated ids) have their predicted prefill time scaled by (padded waves / smooth waves)^ALPHA,
waves = batch x query heads x query tiles (128 rows) / 132 SMs, at least 1; CELLFIX=1 also splits the decision cell
of q_len at multiples of 128, so q_len 129-132 is not decided as 128."""
import math, os, sys, dataclasses, json
sys.path.insert(0, '.')
from dispatcher import problem as P
from dispatcher import predictor as PR
from dispatcher.table import Timing
from tuner.analysis.evaluate import evaluate_offgrid
TILE = 128
alpha = float(sys.argv[1]); kernels = set(sys.argv[2].split(',')); cellfix = int(sys.argv[3]); sets = sys.argv[4:]
if cellfix:
    orig_cell = P.AttentionProblem.cell
    def tq(q):
        t = math.ceil(q / TILE)
        return min(max(P.snap(q), TILE * (t - 1) + 1), TILE * t)
    def cell(self):
        c = orig_cell(self)
        if self.q_len <= TILE: return c
        q = tq(self.q_len)
        if q == c.q_len: return c
        kv = max(c.kv_len, q)
        return dataclasses.replace(c, q_len=q, kv_len=kv, max_kv_len=max(c.max_kv_len, kv), seq_lens=None)
    P.AttentionProblem.cell = cell
    ok = P.AttentionProblem.cell_key
    P.AttentionProblem.cell_key = lambda self: (*ok(self), math.ceil(self.q_len / TILE))
orig_predict = PR.FittedModel.predict
def predict(self, p, stepped=True):
    out = orig_predict(self, p, stepped)
    if p.phase != 'prefill' or alpha == 0: return out
    ctas = p.batch_size * p.num_qo_heads / 132
    if os.environ.get('TILE_WAVES') == 'whole':
        f = (math.ceil(ctas * math.ceil(p.q_len / TILE)) / math.ceil(ctas * p.q_len / TILE)) ** alpha
    else:
        f = (max(ctas * math.ceil(p.q_len / TILE), 1) / max(ctas * p.q_len / TILE, 1)) ** alpha
    return [Timing(t.pipeline, t.median_us * f, t.spread_us * f, t.relerr) if t.pipeline.kernel in kernels else t for t in out]
PR.FittedModel.predict = predict
for s in sets:
    r = evaluate_offgrid('heuristics.db', s, 'NVIDIA H200')
    o = r['overall']['learned']; c = r['configs']
    pre = {k: v['learned'] for k, v in c.items() if k.startswith('prefill')}
    within = sum(v['learned']['regret_max'] <= 1.10 and v['learned']['regret_geomean'] <= 1.02 for v in c.values())
    slowavg = sum(v['learned']['speedup_vs_vllm-2026'] < 1 for v in c.values()); slow = sum(v['learned']['slower_than_vllm-2026'] for v in c.values())
    print(f"a={alpha} k={sorted(kernels)} cellfix={cellfix} {s.split('/')[-1]}: gm {o['regret_geomean']:.4f} max {o['regret_max']:.3f} "
          f"configs ok {within}/16, slower-avg {slowavg} slower {slow}, prefill max {[round(v['regret_max'],3) for v in pre.values()]}")
    for k, v in c.items():
        if k.startswith('prefill'):
            for w in v['learned']['worst'][:2]:
                if w['regret'] > 1.05: print('   ', k, w['shape'], round(w['regret'],3), w['chose'], round(w['chose_us'],1), w['best'], round(w['best_us'],1))
