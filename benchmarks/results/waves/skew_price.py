"""Tried, not landed: the partial-wave price rising with skew, 1 + A x log2(longest / mean), as the H100's spread
batches suggest (h100/layouts.txt: 1.25, 1.5, 1.75, 1.9-2.0 at skew 2, 4, 8, 16-32), on the choice sets.
usage (repository root, after score.sh): for a in 0.15 0.25 0.35 0.5; do python benchmarks/results/waves/skew_price.py \
    $a mixed1,mixed4; done > benchmarks/results/waves/skew_price.txt"""
import math
import sys

import dispatcher.predictor as P
from dispatcher.predictor_config import PredictorConfig
from dispatcher.table import Timing
from tuner.analysis.evaluate import evaluate_offgrid

A = float(sys.argv[1])
SETS = sys.argv[2].split(",")
BASE = PredictorConfig(fp8_partial_waves=1.0)
plain = P.FittedModel.ragged_prior


def prior(self, p):
    out = plain(self, p)
    waves = p.batch_size * p.num_kv_heads / self.sm_count if self.sm_count else 0
    if p.phase != "decode" or p.kv_dtype != "fp8" or not 1 <= waves < self.config.unsplit_waves:
        return out
    f = 1 + A * math.log2(p.skew)
    return [Timing(t.pipeline, t.median_us * f, t.spread_us * f, t.relerr)
            if self.ragged.get(t.pipeline.kernel) == "total" and not P.fixed_split(t.pipeline) else t for t in out]


P.FittedModel.ragged_prior = prior
H100 = "NVIDIA H100 80GB HBM3"
ALL = {"mixed1": None, "mixed4": None, "mixed2": None, "mixed3": None, "replay": None, "h100-mixed5a": H100,
       "h100-mixed5b": H100}
res = []
for s in SETS:
    r = evaluate_offgrid("heuristics.db", f"/tmp/waves/{s}.db", "NVIDIA H200", config=BASE, measured_on=ALL[s])
    o, c = r["overall"]["learned"], r["configs"]
    fp8 = [v["learned"] for k, v in c.items() if "kv=fp8" in k]
    slow = sum(v["slower_than_vllm-2026"] for v in fp8)
    ok = sum(v['regret_geomean'] <= 1.03 and v['regret_max'] <= 1.15 for v in fp8)
    res.append(f"{s} {o['regret_geomean']:.4f}/{o['regret_max']:.2f} {ok}/4 s{slow}")
print(A, " | ".join(res))
