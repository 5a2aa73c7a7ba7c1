"""The mixed-batch corrections restricted to measured mixed cells within R (feature-space distance) and, with
REGIME=1, read by the same prior rule (waves on the same side of unsplit_waves and longest_alone_waves).
usage (repository root): [REGIME=1] python benchmarks/results/h200-2026-12-05-mixedsweep/radius.py R K HEURISTICS.db SET.db..."""
import math, sys
sys.path.insert(0, '.')
from dispatcher import predictor as PR
from dispatcher.predictor import PredictorConfig
from tuner.analysis.evaluate import evaluate_offgrid
R = float(sys.argv[1]); k = int(sys.argv[2]); db = sys.argv[3]; sets = sys.argv[4:]
orig = PR.FittedModel._mixed_near
import os
REG = os.environ.get('REGIME') == '1'
def regime(self, p):
    sms = self.sm_count; w = p.batch_size * p.num_kv_heads / sms
    return (w >= self.config.unsplit_waves, w >= self.config.longest_alone_waves)
def near(self, p):
    here = self.x(p)
    return [c for c in orig(self, p) if math.dist(self._x[c], here) <= R and (not REG or regime(self, c) == regime(self, p))]
PR.FittedModel._mixed_near = near
for s in sets:
    r = evaluate_offgrid(db, s, 'NVIDIA H200', config=PredictorConfig(mixed_residual_k=k))
    o = r['overall']['learned']; c = r['configs']
    fp8 = [v['learned'] for kk, v in c.items() if 'kv=fp8' in kk]
    slow = sum(v['learned'].get('slower_than_vllm-2026', 0) for v in c.values())
    print(f"R={R} k={k} {s.split('/')[-1]:10s} regret {o['regret_geomean']:.4f} max {o['regret_max']:.2f} FP8 gm<=1.03 "
          f"{sum(v['regret_geomean'] <= 1.03 for v in fp8)}/{len(fp8)} max<=1.15 {sum(v['regret_max'] <= 1.15 for v in fp8)}/{len(fp8)} slower {slow}")
