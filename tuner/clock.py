"""Where a sweep's time goes, by stage, printed after it: what to speed up next."""
from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager

STAGES = {"jit": "JIT build", "inputs": "inputs and fp32 reference", "check": "build + accuracy check",
          "prepare": "warm-up (+ graph capture)", "timing": "timed rounds",
          "store": "database", "worker": "worker start and messages",
          "collect": "collecting reference cycles where memory ran short",
          # parts of "prepare", shown inside it (tuner.timing.base.part)
          "prepare.warmup": "warm-up calls", "prepare.estimate": "call-length estimate",
          "prepare.capture": "graph capture + first replay"}


def stages(seconds: Counter[str]) -> dict[str, float]:
    """The stages without their parts ("prepare.warmup" is inside "prepare"): these add up to the time."""
    return {k: v for k, v in seconds.items() if "." not in k}


def stage_line(seconds: Counter[str]) -> str:
    """'time: ...' with the stages largest first, each stage's parts in parentheses after it."""
    def item(k: str, v: float) -> str:
        parts = sorted(((p, x) for p, x in seconds.items() if p.startswith(k + ".")), key=lambda px: -px[1])
        inner = f" ({', '.join(f'{STAGES.get(p, p)} {x:.1f} s' for p, x in parts)})" if parts else ""
        return f"{STAGES.get(k, k)} {v:.1f} s{inner}"
    return "time: " + ", ".join(item(k, v) for k, v in sorted(stages(seconds).items(), key=lambda kv: -kv[1]))


@contextmanager
def stage(clock: Counter[str] | None, name: str) -> Iterator[None]:
    t = time.perf_counter()
    try:
        yield
    finally:
        if clock is not None:
            clock[name] += time.perf_counter() - t


def time_left(since_first_s: float, measured_since_first: int, problems_left: float) -> float | None:
    """Seconds left at the rate of the problems measured after the first one this run measured (a resumed
    problem takes no time, and the JIT build and the first problem's start-up do not recur); None before then."""
    return since_first_s / measured_since_first * problems_left if measured_since_first > 0 else None
