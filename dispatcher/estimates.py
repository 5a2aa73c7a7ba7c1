"""How the learned model (dispatcher/predictor.py) combines estimates of one pipeline's time."""
from __future__ import annotations

import math

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
