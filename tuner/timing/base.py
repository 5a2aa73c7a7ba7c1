"""What every timer shares: the Timer protocol, the settings, and the interleaved race in which all
candidates of one problem are timed round by round (median and spread per candidate).

Modes (part of the environment key): "graph" (CUDA-graph replay, GPU time only, as a graph-captured
serving engine pays it) and "eager" (CUDA events around eager calls, host launch overhead included),
both in tuner/timing/cuda.py; "wall" (perf_counter around calls on the CPU), tuner/timing/wall.py."""
from __future__ import annotations

import math
import statistics
import time
from collections import Counter
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Literal, Protocol

TimingMode = Literal["graph", "eager", "wall"]
MODES: tuple[TimingMode, ...] = ("graph", "eager", "wall")


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
                               # warms through the capture's first replay instead (tuner/timing/cuda.py)
    round_s: float = 0.004     # each candidate's calls in one round last at least this long
    max_calls: int = 200       # calls per candidate per round, at most
    graph_calls: int = 10      # calls captured per CUDA graph, at most (unless there are more copies)
    replay_us: float = 1000.0  # ... fewer for long calls: enough that one replay lasts about this long
    # Replay noise is a few percent, so one round tells a far-behind candidate apart: it is not timed
    # after keep_rounds (most of the GPU time went to such losers: benchmarks/results/h200-2026-12-03/).
    keep_rounds: int = 1
    far_behind: float = 1.5    # ... when its fastest round is this much slower than the best median
    # Nor in any round when its warm-up replay (of at least replay_us, so a launch gap cannot make up
    # the factor) is this much slower than the best (benchmarks/results/h200-2026-12-04b/).
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


class Timer(Protocol):
    """Prepares one candidate's callables for timing (warm-up, and a CUDA graph in graph mode) and
    accounts the seconds of that preparation by part in `parts` ("prepare.<part>")."""

    mode: TimingMode
    cfg: TimingConfig
    parts: Counter[str]

    def prepare(self, fns: list[Callable[[], object]], first_warm: bool = False) -> Prepared: ...

    def release(self) -> None: ...


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


def time_interleaved(fns: dict[str, list[Callable]], timer, cfg: TimingConfig | None = None,
                     note: Callable[[str, str], None] | None = None, clock=None,
                     first_warm: bool = False, can_win: set[str] | None = None,
                     failed: dict[str, BaseException] | None = None,
                     recover: Callable[[str], None] = lambda k: None) -> dict[str, Stats]:
    """Time every candidate in `fns` (a list of callables over rotated inputs each) round by round,
    rotating the order each round (clock drift then spreads over all candidates instead of favouring
    whichever ran first). A candidate clearly out of the race after `keep_rounds` is not timed further,
    and one far out of it in its warm-up replay is not timed in rounds at all (out_of_the_race): its
    stats come from fewer rounds, or from that replay alone, which cannot change the winner.
    `clock` (a Counter) gathers the seconds of warm-up and capture ("prepare") and of the rounds ("timing").
    `first_warm`: each candidate's first callable has run once already (see the timers' prepare).
    `can_win`: the candidates that may win (within the accuracy budget); only they set the pace the
    others are dropped against, so a fast but inaccurate kernel cannot cut the race short.
    `failed`: where a candidate whose warm-up, capture or round raises is put (its error), leaving the
    others timed; `recover(candidate)` runs after each such failure (a CUDA caller drops the candidate's
    buffers, clears the error and frees memory). Without `failed`, the first error propagates."""
    cfg = cfg or timer.cfg
    note = note or (lambda stage, pid: None)     # who runs now: a worker's parent blames a crash on it
    prepared = {}
    t0 = time.perf_counter()

    def fail(k: str, e: BaseException) -> None:
        if failed is None:
            raise e
        failed[k] = e.with_traceback(None)  # its traceback holds this frame: a cycle that kept every graph alive
        prepared.pop(k, None)               # not timed further; recover() lets its buffers go
        recover(k)

    try:
        for k in list(fns):
            note("prepare", k)
            try:
                prepared[k] = timer.prepare(fns[k], first_warm)
            except Exception as e:  # noqa: BLE001 (one candidate running out of memory is its result alone)
                fail(k, e)
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
        # the warm-up replay is a second witness before a candidate is dropped after its first round: one
        # slow round alone can lock in a wrong time for a kernel tied for best (benchmarks/results/h200-2026-12-04c/)
        witness = {k: [prepared[k].first[0]] if prepared[k].first else [] for k in names}
        for r in range(cfg.rounds):
            if not active:
                break
            if r == cfg.keep_rounds and len(active) > 1:
                racing = [k for k in active if k in pace] or active
                best = min(statistics.median(samples[k]) for k in racing)   # the fastest stays
                active = [k for k in active if min(samples[k] + witness[k]) <= cfg.far_behind * best]
            shift = r % len(active)
            for k in active[shift:] + active[:shift]:
                note("time", k)
                try:
                    us, n = prepared[k]()
                except Exception as e:  # noqa: BLE001
                    fail(k, e)
                    active.remove(k)
                    continue
                samples[k].append(us)
                calls[k] = n
        if clock is not None:
            clock["prepare"] += t1 - t0
            clock["timing"] += time.perf_counter() - t1
            clock.update(timer.parts)
        stats = {k: summarize(samples[k], calls[k]) for k in names if k in prepared}
    finally:
        timer.release()           # its graphs and their memory pools go, whatever was raised
        timer.parts.clear()       # handed over (or lost with the error): the next problem's parts start from zero
        prepared.clear()
    return stats
