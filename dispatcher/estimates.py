"""How the learned model (dispatcher/predictor.py) combines estimates of one pipeline's time."""
from __future__ import annotations

import math

from .problem import AttentionProblem
from .registry import SplitRule
from .table import Timing


def summed(a: Timing, b: Timing) -> Timing:
    """a's pipeline taking a's time plus b's (a request alone after the batch at the mean)."""
    return Timing(a.pipeline, a.median_us + b.median_us, max(a.spread_us, b.spread_us), a.relerr)


def log_between(a: Timing, b: Timing, w: float) -> Timing:
    """a's pipeline at weight w from a to b, in log time; the larger relative spread, the worse accuracy."""
    us = math.exp((1 - w) * math.log(a.median_us) + w * math.log(b.median_us))
    rel = max(a.spread_us / a.median_us, b.spread_us / b.median_us)
    errs = [e for e in (a.relerr, b.relerr) if e is not None]
    return Timing(a.pipeline, us, us * rel, max(errs) if errs else None)


def scaled(a: Timing, f: float) -> Timing:
    """a's time and spread times f."""
    return a if f == 1.0 else Timing(a.pipeline, a.median_us * f, a.spread_us * f, a.relerr)


def slower(a: Timing, b: Timing) -> Timing:
    """a's pipeline at the slower of a's and b's times (a bound that b's estimate sets)."""
    return a if a.median_us >= b.median_us else Timing(a.pipeline, b.median_us, max(a.spread_us, b.spread_us),
                                                       a.relerr)


def split_weight(rule: SplitRule, p: AttentionProblem, lo: int, hi: int, below: Timing, above: Timing, sm_count: int,
                 resident_step: float) -> float:
    """Where p's batch lies from row lo (0) to row hi (1) in log time (clamped to [0, 1] by the caller).
    "resident": by log batch (the total work), but where the busiest SM's load rises from lo's (just
    past one wave: a second CTA joins the first on some SMs; or where the split count falls) at least
    1 + resident_step x (that rise - 1) times lo's time, hi's at most. Measured on the H200 just past
    one wave at equal KV: BF16 XQA 1.41-1.44x, cuDNN 1.46-1.51x, FA2-TC with BF16 KV 1.22-1.38x
    (benchmarks/results/resident-rule/)."""
    sizes = (lo, p.batch_size, hi)
    if rule.waves == "resident":
        load = [rule.busiest_sm(n, p.num_kv_heads, p.max_kv_len, sm_count) for n in sizes]
        rise = math.log(above.median_us / below.median_us)
        step = 1 + resident_step * (load[1] / load[0] - 1)
        by_step = math.log(step) / rise if rise > 0 and load[1] > load[0] else 0.0
        return max(math.log(p.batch_size / lo) / math.log(hi / lo), by_step)
    work = [rule.work_per_sm(n, p.num_kv_heads, p.max_kv_len, sm_count) for n in sizes]
    return math.log(work[1] / work[0]) / math.log(work[2] / work[0]) if work[2] > work[0] else 0.5
