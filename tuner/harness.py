"""Timing: all candidates of one problem in interleaved rounds with rotating order; median, spread.

Modes (part of the environment key):
- "graph": CUDA-graph replay, GPU time only, as a graph-captured serving engine pays it;
- "eager": CUDA events around eager calls, host launch overhead included;
- "wall":  perf_counter around calls on the CPU.
On CUDA each timed repeat is followed by a small "next op" kernel standing for the layer's next
kernel (back-to-back launches of one PDL kernel overlap unrealistically); its own time is measured
the same way and subtracted."""
from __future__ import annotations

import math
import statistics
import time
from collections import Counter
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Callable

MODES = ("graph", "eager", "wall")


@dataclass(frozen=True)
class Stats:
    median_us: float
    min_us: float
    max_us: float
    spread_us: float     # interquartile range of the per-round times
    reps: int            # rounds x calls per round


@dataclass(frozen=True)
class TimingConfig:
    rounds: int = 7
    warmup: int = 1            # passes over the rotated copies before timing (eager, wall); graph mode
                               # warms through the capture's first replay instead (tuner/cuda_timing.py)
    round_s: float = 0.004     # each candidate's calls in one round last at least this long
    max_calls: int = 200       # calls per candidate per round, at most
    graph_calls: int = 10      # calls captured per CUDA graph, at most (unless there are more copies)
    replay_us: float = 1000.0  # ... fewer for long calls: enough that one replay lasts about this long
    # After this many rounds a candidate far behind stops being timed: on the H200 (2026-12-03 call 6)
    # 58% of the timed candidates were over 1.5x the problem's best, and their rounds took 72% of the
    # GPU time in timed replays. One round already tells them apart: replay noise is a few percent.
    keep_rounds: int = 1
    far_behind: float = 1.5    # ... when its fastest round is this much slower than the best median
    # A candidate this much slower than the best in its warm-up replay (the capture's first replay;
    # the length-estimate call on the CPU) is not timed in rounds at all: on the H200 (2026-12-04b)
    # candidates over 3x behind took 28 of the 55 s of GPU time in timed replays, all of it in one
    # round that only confirmed they lose. Only replays of at least replay_us count, where a launch
    # gap of tens of microseconds in a first replay cannot make up the factor.
    first_far_behind: float = 3.0


def summarize(samples: list[float], calls: int) -> Stats:
    s = sorted(samples)
    q = statistics.quantiles(s, n=4, method="inclusive") if len(s) > 1 else [s[0]] * 3
    return Stats(median_us=statistics.median(s), min_us=s[0], max_us=s[-1], spread_us=q[2] - q[0],
                 reps=len(s) * calls)


@dataclass(frozen=True)
class Prepared:
    """A candidate ready to time: `run()` times one round (us per call, calls); `first` is what its
    warm-up replay measured (us per call, calls, the replay's whole length in us), when known."""
    run: Callable[[], tuple[float, int]]
    first: tuple[float, int, float] | None = None

    def __call__(self) -> tuple[float, int]:
        return self.run()


def out_of_the_race(prepared: dict[str, Prepared], cfg: TimingConfig, pace: set[str]) -> set[str]:
    """Candidates whose warm-up replay already puts them over first_far_behind x the best of `pace`."""
    firsts = {k: p.first for k, p in prepared.items() if p.first is not None}
    if len(prepared) < 2 or len(firsts) < len(prepared):
        return set()
    best = min(firsts[k][0] for k in pace)
    return {k for k, (us, _, replay) in firsts.items()
            if replay >= cfg.replay_us and us > cfg.first_far_behind * best}


def calls_per_graph(one_us: float, copies: int, cfg: TimingConfig) -> int:
    """Calls one CUDA graph replays: enough for about `replay_us`, at most `graph_calls`, in whole
    passes over the rotated copies (each copy as often as the others). Never more than one pass when
    a pass already reaches the cap: rounding up to two (8 copies: 16 calls for a cap of 10) doubled
    every small problem's capture past the declared cap, and the host time of the capture with it."""
    want = max(1, min(cfg.graph_calls, math.ceil(cfg.replay_us / max(one_us, 1e-3))))
    return max(1, want // copies) * copies if want >= copies else copies


def warm_up(fns: list[Callable], passes: int, first_warm: bool, then: Callable[[], None] = lambda: None) -> None:
    """`passes` passes over the copies (`then` after each call); with `first_warm`, fns[0]'s first
    call is skipped: it has run already (the accuracy check)."""
    for i in range(passes):
        for f in fns[1 if first_warm and i == 0 else 0:]:
            f()
            then()


@contextmanager
def part(parts: Counter, name: str):
    """Seconds of one part of a timer's prepare ("prepare.<name>"): what the warm-up stage is made of."""
    t = time.perf_counter()
    try:
        yield
    finally:
        parts[f"prepare.{name}"] += time.perf_counter() - t


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


def time_interleaved(fns: dict[str, list[Callable]], timer, cfg: TimingConfig | None = None,
                     note: Callable[[str, str], None] | None = None, clock=None,
                     first_warm: bool = False, can_win: set[str] | None = None) -> dict[str, Stats]:
    """Time every candidate in `fns` (a list of callables over rotated inputs each) round by round,
    rotating the order each round (clock drift then spreads over all candidates instead of favouring
    whichever ran first). A candidate clearly out of the race after `keep_rounds` is not timed further,
    and one far out of it in its warm-up replay is not timed in rounds at all (out_of_the_race): its
    stats come from fewer rounds, or from that replay alone, which cannot change the winner.
    `clock` (a Counter) gathers the seconds of warm-up and capture ("prepare") and of the rounds ("timing").
    `first_warm`: each candidate's first callable has run once already (see the timers' prepare).
    `can_win`: the candidates that may win (within the accuracy budget); only they set the pace the
    others are dropped against, so a fast but inaccurate kernel cannot cut the race short."""
    cfg = cfg or timer.cfg
    note = note or (lambda stage, pid: None)     # who runs now: a worker's parent blames a crash on it
    prepared = {}
    t0 = time.perf_counter()
    for k, f in fns.items():
        note("prepare", k)
        prepared[k] = timer.prepare(f, first_warm)
    t1 = time.perf_counter()
    names = list(prepared)
    samples: dict[str, list[float]] = {k: [] for k in names}
    calls: dict[str, int] = {}
    pace = (can_win or set()) & set(names) or set(names)     # none can win: then all set it
    out = out_of_the_race(prepared, cfg, pace)
    for k in out:
        us, calls[k], _ = prepared[k].first
        samples[k].append(us)
    active = [k for k in names if k not in out]
    # the warm-up replay is a second witness before a candidate is dropped after its first round:
    # one round alone once locked in 1.7x for a kernel tied for best (XQA, 6 us, 2026-12-04c:
    # 5-13 such rows per grid sweep, each a wrong "measured" time the dispatcher trusts)
    witness = {k: [prepared[k].first[0]] if prepared[k].first else [] for k in names}
    for r in range(cfg.rounds):
        if r == cfg.keep_rounds and len(active) > 1:
            best = min(statistics.median(samples[k]) for k in active if k in pace)   # the fastest stays
            active = [k for k in active if min(samples[k] + witness[k]) <= cfg.far_behind * best]
        shift = r % len(active)
        for k in active[shift:] + active[:shift]:
            note("time", k)
            us, n = prepared[k]()
            samples[k].append(us)
            calls[k] = n
    timer.release()
    if clock is not None:
        clock["prepare"] += t1 - t0
        clock["timing"] += time.perf_counter() - t1
        clock.update(getattr(timer, "parts", {}))
    getattr(timer, "parts", Counter()).clear()     # handed over: the next problem's parts start from zero
    return {k: summarize(samples[k], calls[k]) for k in names}


def make_timer(mode: str, cfg: TimingConfig = TimingConfig()):
    if mode not in MODES:
        raise ValueError(f"timing mode {mode!r} is not one of {', '.join(MODES)}")
    if mode == "wall":
        return WallTimer(cfg)
    from .cuda_timing import CudaTimer
    return CudaTimer(mode, cfg)
