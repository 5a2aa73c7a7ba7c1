"""Sweep orchestration: what to measure, in what order, resuming what a database already holds."""
from __future__ import annotations

import os
import time
import traceback
from collections import Counter
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Callable

from dispatcher.device import DeviceInfo
from dispatcher.pipeline import Pipeline, candidates
from dispatcher.policy import max_relerr
from dispatcher.problem import AttentionProblem
from dispatcher.registry import KernelSpec, eligible, load_registry
from dispatcher.rules import DEFAULT_RULE, resolve
from dispatcher.table import Timing, rank

from .harness import time_interleaved
from .inputs import kv_bytes, make_inputs, relative_error, rotated, working_bytes
from .runners import build_rotated, runnable
from .store import Store, result_row, timings
from .tactics import canonical, space_size, tune


TACTIC_MODES = ("grid", "default", "optuna")


@dataclass(frozen=True)
class SweepOptions:
    max_relerr: float | None = None    # overrides the per-dtype defaults (dispatcher.policy)
    retry_failed: bool = False
    rule: str = DEFAULT_RULE
    tactics: str = "grid"              # grid: every declared tactic; default: the kernels' own; optuna: searched
    trials: int = 16                   # with tactics="optuna": trials per problem and kernel pipeline
    seed: int = 0
    memory_fraction: float = 0.8       # of free device memory (CPU: of physical memory) a problem may use
    deadline: float | None = None      # time.time() after which no new problem starts (resumable)
    should_stop: Callable[[], bool] | None = None   # checked between problems (a cancelled job)
    isolate: bool = False              # run pipelines in a worker process (tuner/isolation.py)
    candidate_timeout_s: float = 120.0 # with isolate: silence longer than this is a hang

    def __post_init__(self):
        if self.tactics not in TACTIC_MODES:
            raise ValueError(f"tactics {self.tactics!r} is not one of {', '.join(TACTIC_MODES)}")
        if self.trials < 1:
            raise ValueError(f"trials {self.trials} must be at least 1")

    @property
    def all_tactics(self) -> bool:
        return self.tactics == "grid"


@dataclass
class ProblemOutcome:
    problem: AttentionProblem
    rows: list[dict] = field(default_factory=list)
    winner: str | None = None
    resumed: bool = False              # everything was already measured


@dataclass
class SweepReport:
    env_id: int
    outcomes: list[ProblemOutcome] = field(default_factory=list)
    stopped_early: bool = False        # the deadline came first; rerun to resume
    seconds: Counter = field(default_factory=Counter)   # wall time per stage (see STAGES)
    notes: list[str] = field(default_factory=list)      # what the user should know (tuner/fleet.py: device groups)
    by_device: Counter = field(default_factory=Counter) # problems measured per device (several devices)

    @property
    def measured(self) -> int:
        return sum(len(o.rows) for o in self.outcomes)

    def count(self, status: str) -> int:
        return sum(1 for o in self.outcomes for r in o.rows if r["status"] == status)


def free_bytes(device: DeviceInfo) -> int:
    if device.kind == "cuda":
        import torch
        # what the driver has free, plus what torch's caching allocator holds but no tensor uses
        # (the timing no longer empties that cache at every capture, so the driver alone sees 0 free)
        cached = torch.cuda.memory_reserved(device.index) - torch.cuda.memory_allocated(device.index)
        return torch.cuda.mem_get_info(device.index)[0] + cached
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_AVPHYS_PAGES")


def rotation_copies(nbytes: int) -> int:
    from .cuda_timing import rotation_copies as copies
    return copies(nbytes)


def _clear_cuda_error(device: DeviceInfo) -> None:
    """After a failed CUDA call, drain the stream so the next pipeline does not inherit its error.
    (A sticky error such as an illegal address poisons the process; worker isolation is for that.)"""
    if device.kind == "cuda":
        import torch
        try:
            torch.cuda.synchronize()
        except Exception:  # noqa: BLE001
            pass


def _error_text(e: BaseException) -> str:
    last = traceback.format_exception_only(type(e), e)[-1].strip()
    return last[:2000]


# where a sweep's time goes, printed after it: what to speed up next
STAGES = {"jit": "JIT build", "inputs": "inputs and fp32 reference", "check": "build + accuracy check",
          "prepare": "warm-up (+ graph capture)", "timing": "timed rounds",
          "store": "database", "worker": "worker start and messages",
          # parts of "prepare", shown inside it (harness.part)
          "prepare.warmup": "warm-up calls", "prepare.estimate": "call-length estimate",
          "prepare.capture": "graph capture + first replay"}


def stages(seconds: Counter) -> dict[str, float]:
    """The stages without their parts ("prepare.warmup" is inside "prepare"): these add up to the time."""
    return {k: v for k, v in seconds.items() if "." not in k}


def stage_line(seconds: Counter) -> str:
    """'time: ...' with the stages largest first, each stage's parts in parentheses after it."""
    def item(k: str, v: float) -> str:
        parts = sorted(((p, x) for p, x in seconds.items() if p.startswith(k + ".")), key=lambda px: -px[1])
        inner = f" ({', '.join(f'{STAGES.get(p, p)} {x:.1f} s' for p, x in parts)})" if parts else ""
        return f"{STAGES.get(k, k)} {v:.1f} s{inner}"
    return "time: " + ", ".join(item(k, v) for k, v in sorted(stages(seconds).items(), key=lambda kv: -kv[1]))


@contextmanager
def stage(clock: Counter | None, name: str):
    t = time.perf_counter()
    try:
        yield
    finally:
        if clock is not None:
            clock[name] += time.perf_counter() - t


_INPUTS: dict = {}      # the last problem's inputs: a tactic search measures one problem many times


def _inputs(p: AttentionProblem, device: DeviceInfo, seed: int):
    key = (p, device.torch_device, seed)
    if key not in _INPUTS:
        _INPUTS.clear()                 # free the previous problem's tensors before allocating
        if device.kind == "cuda":
            import torch
            torch.cuda.empty_cache()    # once per problem: the next one may need all the memory, unfragmented
        x = make_inputs(p, device.torch_device, seed=seed)
        _INPUTS[key] = (x, rotated(x, rotation_copies(kv_bytes(p)) if device.kind == "cuda" else 1))
    return _INPUTS[key]


def measure_problem(p: AttentionProblem, pipes: list[Pipeline], device: DeviceInfo, timer,
                    opts: SweepOptions, note: Callable[[str, str], None] | None = None,
                    clock: Counter | None = None) -> list[dict]:
    """Check every pipeline against the fp32 reference, then time the checked ones interleaved.
    `note(stage, pipeline_id)` is told which pipeline is about to run (see tuner/isolation.py);
    `clock` gathers seconds per stage."""
    note = note or (lambda stage, pid: None)
    need = working_bytes(p)
    budget_bytes = opts.memory_fraction * free_bytes(device)
    if need > budget_bytes:
        why = f"does not fit: needs ~{need / 2**30:.1f} GiB, {budget_bytes / 2**30:.1f} GiB usable on {device.name}"
        return [result_row(pp, "unsupported", error=why) for pp in pipes]
    budget = max_relerr(p.kv_dtype, p.out_dtype, opts.max_relerr)
    with stage(clock, "inputs"):
        x, copies = _inputs(p, device, opts.seed)
    rows: dict[str, dict] = {}
    fns, errs = {}, {}
    for pipe in pipes:
        runner, why = runnable(pipe.kernel, device)
        if why:
            rows[pipe.id] = result_row(pipe, "unsupported", error=why)
            continue
        note("check", pipe.id)
        try:
            with stage(clock, "check"):
                built = build_rotated(runner, pipe, copies)
                err = relative_error(built[0](), x, pipe.fused_out_quant or pipe.out_quant)
        except Exception as e:  # noqa: BLE001 (a kernel failing is a result, not a sweep error)
            rows[pipe.id] = result_row(pipe, "failed", error=_error_text(e))
            _clear_cuda_error(device)
            continue
        fns[pipe.id], errs[pipe.id] = built, err
    if fns:
        try:
            # the accuracy check ran each pipeline's first copy: that call was its first warm-up
            stats = time_interleaved(fns, timer, note=note, clock=clock, first_warm=True,
                                     can_win={pid for pid in fns if errs[pid] <= budget})
        except Exception as e:  # noqa: BLE001
            stats, why = {}, _error_text(e)
            for pid in fns:
                rows[pid] = result_row(next(pp for pp in pipes if pp.id == pid), "failed", error=f"timing: {why}")
        for pid, s in stats.items():
            pipe = next(pp for pp in pipes if pp.id == pid)
            status = "ok" if errs[pid] <= budget else "inaccurate"
            rows[pid] = result_row(pipe, status, median_us=s.median_us, min_us=s.min_us, max_us=s.max_us,
                                   spread_us=s.spread_us, reps=s.reps, relerr=errs[pid], max_relerr=budget,
                                   error=None if status == "ok" else
                                   f"relative error {errs[pid]:.4f} over the budget {budget:g}")
    return [rows[pp.id] for pp in pipes]   # one row per pipeline, in order


def plan(problems: list[AttentionProblem], device: DeviceInfo, registry: dict[str, KernelSpec],
         all_tactics: bool = True) -> list[tuple[AttentionProblem, list[Pipeline]]]:
    return [(p, candidates(registry, p, device, all_tactics)) for p in problems]


def run_sweep(problems: list[AttentionProblem], device: DeviceInfo, store: Store, timer,
              opts: SweepOptions = SweepOptions(), registry: dict[str, KernelSpec] | None = None,
              on_problem: Callable[[ProblemOutcome], None] | None = None, measurer=None) -> SweepReport:
    """Measure every eligible, not yet measured pipeline of each problem; one transaction per problem.
    With opts.isolate the pipelines run in `measurer` (an IsolatedMeasurer the caller keeps open over
    several sweeps: an adaptive search sweeps many small batches) or, without one, in a worker of its own."""
    registry = registry or load_registry()
    env_id = store.environment(device, timer.mode)
    report = SweepReport(env_id)
    own = opts.isolate and measurer is None
    if own:
        measurer = isolated(device, timer.mode, opts)
    try:
        _sweep_loop(problems, device, store, timer, opts, registry, on_problem, report, env_id,
                    measurer if opts.isolate else None)
    finally:
        _INPUTS.clear()
        if own:
            measurer.close()
    return report


def isolated(device: DeviceInfo, mode: str, opts: SweepOptions):
    """A worker process for opts.isolate (started on its first problem); close() it when done."""
    from .isolation import IsolatedMeasurer
    return IsolatedMeasurer(device, mode, opts.candidate_timeout_s)


def _sweep_loop(problems, device, store, timer, opts, registry, on_problem, report, env_id, measurer) -> None:
    for p, pipes in plan(problems, device, registry, opts.all_tactics):
        if (opts.deadline is not None and time.time() > opts.deadline) or (opts.should_stop and opts.should_stop()):
            report.stopped_early = True
            break
        done = store.measured_pipelines(env_id, p, opts.retry_failed)
        todo = [pp for pp in pipes if pp.id not in done]
        search = ([pp for pp in tunable(pipes, registry, device) if not store.tuned(env_id, p, pp.id)]
                  if opts.tactics == "optuna" else [])
        outcome = ProblemOutcome(p, resumed=not todo and not search)
        if todo or search:
            def measure(pp, p=p):
                if measurer is not None:
                    return measurer.measure(p, pp, opts, report.seconds)
                return measure_problem(p, pp, device, timer, opts, clock=report.seconds)
            outcome.rows = measure(todo) if todo else []
            trials = {}
            for base in search:
                rows, trials[base.id] = search_tactics(p, base, store, env_id, opts, registry, device, measure,
                                                       outcome.rows)
                outcome.rows += rows
            with stage(report.seconds, "store"):
                outcome.winner = _record(p, pipes, outcome.rows, store, env_id, opts, registry, device)
                for base_id, t in trials.items():
                    store.record_trials(env_id, p, base_id, t)
        report.outcomes.append(outcome)
        if on_problem:
            on_problem(outcome)


def _record(p, pipes, rows, store, env_id, opts, registry, device) -> str | None:
    """Store a problem's new rows with its winner over everything measured for it; the winner's id."""
    passed = {k: r for k, s in registry.items() if (r := eligible(s, p, device))}
    rule_pick, _ = resolve(opts.rule, p, device, pipes, passed)
    budget = max_relerr(p.kv_dtype, p.out_dtype, opts.max_relerr)
    new = [Timing(Pipeline.from_row({**r, "kv_dtype": p.kv_dtype}), r["median_us"], r["spread_us"] or 0.0, r["relerr"])
           for r in rows if r["status"] == "ok"]
    ranking = rank({t.pipeline.id: t for t in timings(store, env_id, p) + new}.values(), budget,
                   rule_pick.id if rule_pick else None)
    store.record(env_id, p, rows, ranking)
    return ranking.winner.pipeline.id if ranking else None


def tunable(pipes: list[Pipeline], registry: dict[str, KernelSpec], device: DeviceInfo) -> list[Pipeline]:
    """The default-tactic pipelines whose kernel declares more than one setting to search."""
    out = []
    for pp in pipes:
        space = registry[pp.kernel].tune_space(device.kind)
        if space_size(space) > 1 and pp.tactic == canonical({k: v[0] for k, v in space.items()}, space,
                                                            set(registry[pp.kernel].tactic_space(device.kind))):
            out.append(pp)
    return out


def search_tactics(p, base: Pipeline, store, env_id, opts, registry, device, measure, fresh_rows):
    """Optuna over `base`'s tune space for problem `p`: (measurement rows, trial rows)."""
    spec = registry[base.kernel]
    known = {t.pipeline.id: t.median_us for t in timings(store, env_id, p)}
    known.update({r["pipeline"]: r["median_us"] for r in fresh_rows if r["status"] == "ok"})
    for r in fresh_rows:
        if r["status"] != "ok":
            known.pop(r["pipeline"], None)
    if base.id not in known:
        return [], []                   # the default does not run (accurately) here: nothing to tune against
    res = tune(base, spec.tune_space(device.kind), set(spec.tactic_space(device.kind)), measure,
               trials=opts.trials, seed=opts.seed, known=known)
    return res.rows, res.trials
