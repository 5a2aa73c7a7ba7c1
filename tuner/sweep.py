"""Sweep orchestration: what to measure, in what order, resuming what a database already holds.
Each problem is measured through tuner/measure.py, here or in an isolated worker (tuner/isolation.py)."""
from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from dispatcher.device import DeviceInfo
from dispatcher.pipeline import Pipeline, candidates, default_tactic
from dispatcher.problem import AttentionProblem
from dispatcher.registry import KernelSpec, load_registry, mask_reasons, tactic_reasons

from .clock import stage
from .measure import INPUTS, Row, measure_problem, record_problem
from .options import SweepOptions
from .search.screen import Screen
from .search.tactics import canonical, space_size, tune
from .store import RETRIED, Store, kept, result_row, timings
from .timing import Timer


def ran(row: Row) -> bool:
    """Whether a stored row's pipeline was run (a screened or unsupported one was not)."""
    return row["status"] not in ("screened", "unsupported")


@dataclass
class ProblemOutcome:
    problem: AttentionProblem
    rows: list[Row] = field(default_factory=list)
    winner: str | None = None
    resumed: bool = False              # everything was already measured
    kept_failed: int = 0               # stored failed or inaccurate pipelines not measured again (--retry-failed)


@dataclass
class SweepReport:
    env_id: int
    outcomes: list[ProblemOutcome] = field(default_factory=list)
    stopped_early: bool = False        # the deadline came first; rerun to resume
    seconds: Counter[str] = field(default_factory=Counter)   # wall time per stage (tuner.clock.STAGES)
    notes: list[str] = field(default_factory=list)      # what the user should know (tuner/fleet.py: device groups)
    by_device: Counter[str] = field(default_factory=Counter) # problems measured per device (several devices)
    unfinished: str | None = None      # why problems were left unmeasured, other than the deadline (a device lost)

    @property
    def measured(self) -> int:
        """Pipelines run: neither screened nor unsupported (those are stored with why, never run)."""
        return sum(ran(r) for o in self.outcomes for r in o.rows)

    @property
    def kept_failed(self) -> int:
        return sum(o.kept_failed for o in self.outcomes)

    def count(self, status: str) -> int:
        return sum(1 for o in self.outcomes for r in o.rows if r["status"] == status)


class Measurer(Protocol):
    """Something that measures a problem's pipelines elsewhere (tuner.isolation.IsolatedMeasurer)."""

    def measure(self, problem: AttentionProblem, pipes: list[Pipeline], opts: SweepOptions,
                clock: Counter[str] | None = None) -> list[Row]: ...

    def close(self) -> None: ...


@dataclass
class SweepContext:
    """What one sweep measures with and into: the same for every problem of it."""
    device: DeviceInfo
    store: Store
    timer: Timer
    opts: SweepOptions
    registry: dict[str, KernelSpec]
    env_id: int
    report: SweepReport
    on_problem: Callable[[ProblemOutcome], None] | None = None
    measurer: Measurer | None = None   # None: measured in this process
    screen: Screen | None = None       # the adaptive search's: pipelines not worth measuring (search/screen.py)

    def measure(self, p: AttentionProblem, pipes: list[Pipeline]) -> list[Row]:
        if self.measurer is not None:
            return self.measurer.measure(p, pipes, self.opts, self.report.seconds)
        return measure_problem(p, pipes, self.device, self.timer, self.opts, clock=self.report.seconds,
                               specs=self.registry)

    def stopping(self) -> bool:
        o = self.opts
        return (o.deadline is not None and time.time() > o.deadline) or bool(o.should_stop and o.should_stop())


def plan(problems: list[AttentionProblem], device: DeviceInfo, registry: dict[str, KernelSpec],
         all_tactics: bool = True) -> list[tuple[AttentionProblem, list[Pipeline]]]:
    return [(p, candidates(registry, p, device, all_tactics)) for p in problems]


def run_sweep(problems: list[AttentionProblem], device: DeviceInfo, store: Store, timer: Timer,
              opts: SweepOptions = SweepOptions(), registry: dict[str, KernelSpec] | None = None,
              on_problem: Callable[[ProblemOutcome], None] | None = None,
              measurer: Measurer | None = None, screen: Screen | None = None) -> SweepReport:
    """Measure every eligible, not yet measured pipeline of each problem; one transaction per problem.
    With opts.isolate the pipelines run in `measurer` (an IsolatedMeasurer the caller keeps open over
    several sweeps: an adaptive search sweeps many small batches) or, without one, in a worker of its own.
    `screen` names pipelines not to measure (stored as screened, with why); without one, pipelines an
    earlier search screened are measured."""
    registry = registry or load_registry()
    env_id = store.environment(device, timer.mode)
    ctx = SweepContext(device, store, timer, opts, registry, env_id, SweepReport(env_id), on_problem, screen=screen)
    own = opts.isolate and measurer is None
    if opts.isolate:
        ctx.measurer = isolated(device, timer.mode, opts) if own else measurer
    retried = getattr(ctx.measurer, "fresh_retries", 0)      # a measurer kept open counts over several sweeps
    try:
        for p, pipes in plan(problems, device, registry, opts.all_tactics):
            if ctx.stopping():
                ctx.report.stopped_early = True
                break
            sweep_one(ctx, p, pipes)
    finally:
        note_retries(ctx.report, getattr(ctx.measurer, "fresh_retries", 0) - retried)
        INPUTS.clear()
        if own and ctx.measurer is not None:
            ctx.measurer.close()
    return ctx.report


def note_retries(report: SweepReport, times: int) -> None:
    """The summary's note when problems had to be measured again in a fresh worker (tuner/isolation.py)."""
    if times:
        report.notes.append(f"measured again in a fresh worker {times} time{'s' if times > 1 else ''}: the worker "
                            "that met the problem first failed outside its pipelines, or had too little memory left "
                            "after earlier problems")


def isolated(device: DeviceInfo, mode: str, opts: SweepOptions) -> Measurer:
    """A worker process for opts.isolate (started on its first problem); close() it when done."""
    from .isolation import IsolatedMeasurer
    return IsolatedMeasurer(device, mode, opts.candidate_timeout_s)


def sweep_one(ctx: SweepContext, p: AttentionProblem, pipes: list[Pipeline]) -> None:
    """One problem: what is not yet measured, a tactic search where asked, then the store."""
    stored = ctx.store.statuses(ctx.env_id, p)
    done = kept(stored, ctx.opts.retry_failed, screening=ctx.screen is not None)
    todo = [pp for pp in pipes if pp.id not in done]
    # the screen sees every pipeline (the rules' picks among them are spared) and skips only ones never stored:
    # one that failed is measured again with --retry-failed, not screened over
    # (nor one that takes no mask the problem needs: the worker stores it unsupported with that reason)
    fresh = {pp.id for pp in todo if pp.id not in stored
             and not mask_reasons(ctx.registry[pp.kernel], pp.tactic_dict(), p, ctx.device)}
    skip = ctx.screen(p, pipes, fresh) if ctx.screen and fresh else {}
    todo = [pp for pp in todo if pp.id not in skip]
    search = ([pp for pp in tunable(pipes, ctx.registry, ctx.device, p) if not ctx.store.tuned(ctx.env_id, p, pp.id)]
              if ctx.opts.tactics == "optuna" else [])
    outcome = ProblemOutcome(p, resumed=not todo and not search and not skip,
                             kept_failed=sum(stored.get(pp.id) in RETRIED for pp in pipes if pp.id in done))
    if outcome.resumed:
        outcome.winner = ctx.store.winner(ctx.env_id, p)
    if todo or search or skip:
        outcome.rows = ctx.measure(p, todo) if todo else []
        outcome.rows += [result_row(pp, "screened", error=skip[pp.id]) for pp in pipes if pp.id in skip]
        trials = {}
        for base in search:
            rows, trials[base.id] = search_tactics(ctx, p, base, outcome.rows)
            outcome.rows += rows
        with stage(ctx.report.seconds, "store"):
            outcome.winner = record_problem(p, pipes, outcome.rows, ctx.store, ctx.env_id, ctx.opts, ctx.registry,
                                            ctx.device)
            for base_id, t in trials.items():
                ctx.store.record_trials(ctx.env_id, p, base_id, t)
    ctx.report.outcomes.append(outcome)
    if ctx.on_problem:
        ctx.on_problem(outcome)


def search_start(spec: KernelSpec, p: AttentionProblem, device: DeviceInfo) -> dict[str, Any]:
    """Where a tactic search of `spec` for `p` starts: each tune knob's first value, but the tactics of the
    problem's default setting (pipeline.default_tactic: one that takes the mask `p` needs)."""
    space = spec.tune_space(device.kind)
    return {k: v[0] for k, v in space.items()} | {k: v for k, v in default_tactic(spec, p, device) if k in space}


def tunable(pipes: list[Pipeline], registry: dict[str, KernelSpec], device: DeviceInfo,
            p: AttentionProblem) -> list[Pipeline]:
    """The default-tactic pipelines (for `p`) whose kernel declares more than one setting to search."""
    starts = {}                 # per kernel: the default tactic a search starts from, or None (nothing to search)
    for kernel in {pp.kernel for pp in pipes}:
        spec = registry[kernel]
        space = spec.tune_space(device.kind)
        starts[kernel] = (canonical(search_start(spec, p, device), space, set(spec.tactic_space(device.kind)))
                          if space_size(space) > 1 else None)
    return [pp for pp in pipes if starts[pp.kernel] is not None and pp.tactic == starts[pp.kernel]]


def search_tactics(ctx: SweepContext, p: AttentionProblem, base: Pipeline,
                   fresh_rows: list[Row]) -> tuple[list[Row], list[dict[str, Any]]]:
    """Optuna over `base`'s tune space for problem `p`: (measurement rows, trial rows)."""
    spec = ctx.registry[base.kernel]
    known = {t.pipeline.id: t.median_us for t in timings(ctx.store, ctx.env_id, p)}
    known.update({r["pipeline"]: r["median_us"] for r in fresh_rows if r["status"] == "ok"})
    for r in fresh_rows:
        if r["status"] != "ok":
            known.pop(r["pipeline"], None)
    if base.id not in known:
        return [], []                   # the default does not run (accurately) here: nothing to tune against
    res = tune(base, spec.tune_space(ctx.device.kind), set(spec.tactic_space(ctx.device.kind)),
               lambda pipes: ctx.measure(p, pipes), trials=ctx.opts.trials, seed=ctx.opts.seed, known=known,
               start=search_start(spec, p, ctx.device),
               refused=lambda pipe: tactic_reasons(spec, pipe.tactic_dict(), p, ctx.device))
    return res.rows, res.trials
