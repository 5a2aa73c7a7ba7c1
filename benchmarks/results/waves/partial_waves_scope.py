"""What else was tried for the partial-wave price, on the choice sets (mixed seeds 1 and 4): scoped to FA2-TC
alone, and with BF16 KV priced too. The prior's price set to 1.0 and the variant patched in on top.
usage (repository root, after score.sh): python benchmarks/results/waves/partial_waves_scope.py > \
    benchmarks/results/waves/partial_waves_scope.txt"""
import dispatcher.predictor as P
from dispatcher.predictor_config import PredictorConfig
from dispatcher.table import Timing
from tuner.analysis.evaluate import evaluate_offgrid

BASE = PredictorConfig(fp8_partial_waves=1.0)
plain = P.FittedModel.ragged_prior


def variant(f: float, kv_dtypes: tuple[str, ...], scope: str):
    def prior(self, p):
        out = plain(self, p)
        waves = p.batch_size * p.num_kv_heads / self.sm_count if self.sm_count else 0
        if p.phase != "decode" or p.kv_dtype not in kv_dtypes or not 1 <= waves < self.config.unsplit_waves:
            return out
        hit = (lambda t: t.pipeline.kernel == "fa2-tc") if scope == "fa2-tc" else \
            (lambda t: self.ragged.get(t.pipeline.kernel) == "total")
        return [Timing(t.pipeline, t.median_us * f, t.spread_us * f, t.relerr)
                if hit(t) and not P.fixed_split(t.pipeline) else t for t in out]
    return prior


for f, kv, scope in ((1.0, ("fp8",), "total"), (1.2, ("fp8",), "fa2-tc"), (1.3, ("fp8",), "fa2-tc"),
                     (1.4, ("fp8",), "fa2-tc"), (1.4, ("fp8",), "total"), (1.2, ("fp8", "bf16"), "fa2-tc"),
                     (1.4, ("fp8", "bf16"), "total")):
    P.FittedModel.ragged_prior = variant(f, kv, scope)
    res = []
    for s in ("mixed1", "mixed4"):
        r = evaluate_offgrid("heuristics.db", f"/tmp/waves/{s}.db", "NVIDIA H200", config=BASE)
        o, c = r["overall"]["learned"], r["configs"]
        fp8 = [v["learned"] for k, v in c.items() if "kv=fp8" in k]
        res.append(f"{s} {o['regret_geomean']:.4f} (max {o['regret_max']:.2f}), FP8 configurations within target "
                   f"{sum(v['regret_geomean'] <= 1.03 and v['regret_max'] <= 1.15 for v in fp8)}/4")
    print(f"x{f} on {'/'.join(kv)} KV, {scope} default plans: " + "; ".join(res))
