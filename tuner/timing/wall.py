"""CPU timing with perf_counter ("wall" mode)."""
from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable

from .base import Prepared, TimingConfig, part, warm_up


class WallTimer:
    """CPU timing with perf_counter; calls per round calibrated so a round is long enough to time."""

    mode = "wall"

    def __init__(self, cfg: TimingConfig = TimingConfig()):
        self.cfg = cfg
        self.parts: Counter = Counter()     # seconds per part of prepare (see part())

    def prepare(self, fns: list[Callable], first_warm: bool = False) -> Prepared:
        """`fns` run the same pipeline on rotated input copies; calls cycle through them.
        `first_warm`: fns[0] has run already (the accuracy check), so its first warm-up call is skipped."""
        with part(self.parts, "warmup"):
            warm_up(fns, self.cfg.warmup, first_warm)
        with part(self.parts, "estimate"):
            t0 = time.perf_counter()
            fns[0]()
            one = max(time.perf_counter() - t0, 1e-7)
        calls = max(1, min(self.cfg.max_calls, int(self.cfg.round_s / one)))

        def timed() -> tuple[float, int]:
            t = time.perf_counter()
            for i in range(calls):
                fns[i % len(fns)]()
            return (time.perf_counter() - t) / calls * 1e6, calls
        return Prepared(timed, (one * 1e6, 1, one * 1e6))    # the estimate call is its first timing

    def release(self) -> None:
        pass
