"""`tuner` with an experiment: an FP8-KV, FP8-out mixed family without measured mixed batches of its own
borrows its BF16-out sibling's corrections, pipeline by pipeline without the output quantization
(usage as tuner's: python sibling.py evaluate ...)."""
import math
import statistics
import sys
from dataclasses import replace

import dispatcher.predictor as P
from dispatcher.table import Timing

W = 1.0     # PredictorConfig.mixed_residual_std
orig_predict = P.FittedModel.predict

def sibling(p):
    if p.out_dtype != 'fp8' or p.kv_dtype != 'fp8':
        return None
    return replace(p, out_dtype='bf16')

def base_id(pid):
    return pid.replace('+out-quant', '').replace('+fused-out', '')

def predict(self, p, stepped=True):
    s = sibling(p) if p.skew > 1 else None
    if (s is not None and self._uniform is not None and p.family() not in self._mixed
            and s.family() in self._mixed and p.family() in self._uniform.table.by_family):
        prior = self._uniform.ragged_prior(p)
        near = self._mixed_near(s)
        k = self.config.mixed_residual_k
        out = []
        for t in prior:
            sid = base_id(t.pipeline.id)
            used = self._residuals.used(sid, near, k)
            logs = [r for r, _ in used]
            f = math.exp(statistics.fmean(logs) + W * statistics.pstdev(logs)) if used else 1.0
            out.append(Timing(t.pipeline, t.median_us * f, t.spread_us * f, t.relerr))
        return out
    return orig_predict(self, p, stepped)

P.FittedModel.predict = predict
orig_mr = P.FittedModel.mixed_residuals
def mixed_residuals(self, p, pipeline):
    s = sibling(p) if p.skew > 1 else None
    if s is not None and self._uniform is not None and p.family() not in self._mixed and s.family() in self._mixed:
        return len(self._residuals.used(base_id(pipeline), self._mixed_near(s), self.config.mixed_residual_k))
    return orig_mr(self, p, pipeline)
P.FittedModel.mixed_residuals = mixed_residuals

from tuner.cli.app import app  # noqa
sys.argv = ['tuner'] + sys.argv[1:]
app()
