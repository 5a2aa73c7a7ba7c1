"""The corrections without FA2-TC's fixed split-KV pipelines (nofixed) or without any FA2-TC pipeline (fa2only).
usage (repository root): python benchmarks/results/h200-2026-12-05-mixedsweep/nofixed.py MODE HEURISTICS.db SET.db..."""
import math, sys, os
sys.path.insert(0, '.')
from dispatcher import mixed_residual as MR
from dispatcher.predictor import PredictorConfig, fixed_split
from tuner.analysis.evaluate import evaluate_offgrid
mode = sys.argv[1]; db = sys.argv[2]; sets = sys.argv[3:]
orig = MR.Residuals.used
def used(self, pid, nearest, k):
    if mode == 'nofixed' and ('fixed_split_size=' in pid and 'fixed_split_size=0' not in pid):
        return []
    if mode == 'fa2only' and pid.startswith('fa2-tc'):
        return []
    return orig(self, pid, nearest, k)
MR.Residuals.used = used
for s in sets:
    r = evaluate_offgrid(db, s, 'NVIDIA H200')
    o = r['overall']['learned']; c = r['configs']
    fp8 = [v['learned'] for kk, v in c.items() if 'kv=fp8' in kk]
    slow = sum(v['learned'].get('slower_than_vllm-2026', 0) for v in c.values())
    print(f"{mode} {s.split('/')[-1]:10s} regret {o['regret_geomean']:.4f} max {o['regret_max']:.2f} FP8 gm<=1.03 "
          f"{sum(v['regret_geomean'] <= 1.03 for v in fp8)}/{len(fp8)} max<=1.15 {sum(v['regret_max'] <= 1.15 for v in fp8)}/{len(fp8)} slower {slow}")
