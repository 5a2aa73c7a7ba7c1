"""One sweep over several devices of a host: a worker process per device (tuner/isolation.py), the
problems in one queue, largest first, so the large problems spread evenly and the small ones fill
in; the parent alone writes the store, one transaction per problem, as results arrive.

Devices of one model share an environment (their decisions serve any GPU of that model) only if
they agree: before the sweep every device times the same few calibration problems, and a device
whose times differ from the first device of its model by more than the noise is kept apart, in an
environment of its own named after it (it then sweeps the whole problem list itself). A rerun whose
environments already hold the whole plan times nothing: its devices share the first one's."""
from __future__ import annotations

import dataclasses
import queue
import statistics
import threading
import time
from collections import Counter, deque
from collections.abc import Callable
from dataclasses import dataclass, field

from dispatcher.device import DeviceInfo, describe
from dispatcher.pipeline import Pipeline
from dispatcher.problem import AttentionProblem

from .clock import stage
from .isolation import IsolatedMeasurer, WorkerStartError, label
from .measure import record_problem
from .options import SweepOptions
from .sizes import kv_bytes
from .store import Store
from .sweep import ProblemOutcome, SweepReport, note_retries, plan

HBM_BYTES_PER_S = 3e12       # roofline constants for ordering work only (H100/H200-class); never reported
MATH_FLOPS_PER_S = 5e14
CALIBRATION_PROBLEMS = 3
CALIBRATION_PIPELINES = 4
MIN_TOLERANCE = 0.03         # devices closer than this always agree (run-to-run drift on one GPU)


def parse_devices(spec: str) -> list[DeviceInfo]:
    """--devices: "all" (every CUDA device), or a list such as "0,1", "cuda:0,cuda:2" or "cpu,cpu"
    (CPU workers: the whole loop without a GPU)."""
    items = [s.strip().lower() for s in spec.split(",") if s.strip()]
    if not items:
        raise ValueError(f"--devices {spec!r} names no device; use all, a list such as 0,1, or cpu,cpu")
    if items == ["all"]:
        import torch
        n = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if n == 0:
            raise ValueError("--devices all needs CUDA devices and this host has none; "
                             "for CPU workers pass --devices cpu,cpu")
        return [describe(f"cuda:{i}") for i in range(n)]
    out, seen = [], set()
    for k, item in enumerate(items):
        if item == "cpu":
            out.append(dataclasses.replace(describe("cpu"), index=k))
            continue
        target = f"cuda:{item}" if item.isdigit() else item
        if not target.startswith("cuda:") or not target[5:].isdigit():
            raise ValueError(f"--devices entry {item!r} is not a GPU index (0), cuda:N, cpu or all")
        if target in seen:
            raise ValueError(f"--devices lists {target} twice; name each GPU once")
        seen.add(target)
        out.append(describe(target))
    if len({d.kind for d in out}) > 1:
        raise ValueError(f"--devices {spec!r} mixes CPU and GPU workers; sweep them separately")
    return out


def est_seconds(p: AttentionProblem) -> float:
    """A roofline guess of one call's time, to order the queue (largest first)."""
    keys = p.kv_len * (0.5 if p.causal and p.q_len > 1 else 1.0)
    flops = 4 * p.batch_size * p.q_len * keys * p.num_qo_heads * p.head_dim
    return max(kv_bytes(p) / HBM_BYTES_PER_S, flops / MATH_FLOPS_PER_S)


Planned = list[tuple[AttentionProblem, list[Pipeline]]]


def largest_first(items: Planned) -> Planned:
    return sorted(items, key=lambda it: est_seconds(it[0]) * len(it[1]), reverse=True)


@dataclass
class Calibration:
    device: str
    reference: str
    ratio: float | None          # median over pipelines of this device's time / the reference's
    tolerance: float
    agrees: bool
    skipped: str = ""            # why no calibration ran, where that was decided before timing

    def note(self) -> str:
        if self.skipped:
            return f"{self.device}: {self.skipped}; sharing the environment of {self.reference}"
        if self.ratio is None:
            return f"{self.device}: no calibration timing ran on both it and {self.reference}; sharing its environment"
        verdict = "shares" if self.agrees else "kept apart from"
        return (f"{self.device}: {self.ratio:.3f}x the time of {self.reference} on the calibration problems "
                f"(noise {self.tolerance:.1%}); {verdict} its environment")


def calibration_set(items: Planned) -> Planned:
    """A few problems spread over the plan's sizes (quartiles of the cost order), a few pipelines each."""
    ordered = largest_first([it for it in items if it[1]])
    if not ordered:
        return []
    picks = sorted({int(q * (len(ordered) - 1)) for q in (0.25, 0.5, 0.75)})[:CALIBRATION_PROBLEMS]
    return [(ordered[i][0], sorted(ordered[i][1], key=lambda pp: pp.id)[:CALIBRATION_PIPELINES]) for i in picks]


def compare(ref_rows: list[dict], rows: list[dict], device: str, reference: str) -> Calibration:
    """Agree when the median time ratio is within the measured noise (relative IQR of both, summed;
    at least MIN_TOLERANCE)."""
    ref = {r["pipeline"]: r for r in ref_rows if r["status"] == "ok" and r["median_us"]}
    pairs = [(ref[r["pipeline"]], r) for r in rows if r["status"] == "ok" and r["median_us"] and r["pipeline"] in ref]
    if not pairs:
        return Calibration(device, reference, None, MIN_TOLERANCE, True)
    ratio = statistics.median(b["median_us"] / a["median_us"] for a, b in pairs)
    noise = statistics.median((a["spread_us"] or 0) / a["median_us"] + (b["spread_us"] or 0) / b["median_us"]
                              for a, b in pairs)
    tol = max(MIN_TOLERANCE, noise)
    return Calibration(device, reference, ratio, tol, abs(ratio - 1) <= tol)


@dataclass
class Group:
    """Devices sweeping one environment together."""
    device: DeviceInfo            # as the environment records it
    members: list[DeviceInfo]
    env_id: int = 0
    queue: deque = field(default_factory=deque)
    in_flight: int = 0            # problems its devices hold: one may come back to the queue (WorkerStartError)


def _measure_each(workers: dict[str, IsolatedMeasurer], jobs: dict[str, list], opts,
                  failed: dict[str, BaseException]) -> dict[str, list[list[dict]]]:
    """Each device measures its list of (problem, pipes), one device after another: devices that
    share a host's CPUs (or its PCIe and power budget) then do not disturb each other's calibration.
    A device whose worker cannot start goes into `failed` instead."""
    out = {}
    for name, job in jobs.items():
        try:
            out[name] = [workers[name].measure(p, pipes, opts) for p, pipes in job]
        except WorkerStartError as e:
            failed[name] = e
    return out


def calibrate(devices: list[DeviceInfo], workers: dict[str, IsolatedMeasurer], items: Planned,
              opts: SweepOptions, failed: dict[str, BaseException],
              finished: Callable[[list[DeviceInfo]], bool] = lambda ds: False
              ) -> tuple[list[Group], list[Calibration]]:
    """Group the devices into environments (see the module docstring); a device whose worker cannot start
    is left out, into `failed` (an error if none is left). A model whose devices are `finished` (their
    environments hold the whole plan: a rerun) is not calibrated again, so a rerun measures nothing."""
    by_model: dict[str, list[DeviceInfo]] = {}
    for d in devices:
        by_model.setdefault(d.name, []).append(d)
    cal = calibration_set(items)
    done = {m for m, ds in by_model.items() if len(ds) > 1 and finished(ds)}
    multi = [d for m, ds in by_model.items() if len(ds) > 1 and m not in done for d in ds]
    rows = _measure_each(workers, {label(d): cal for d in multi}, opts, failed) if cal and multi else {}
    by_model = {m: kept for m, ds in by_model.items() if (kept := [d for d in ds if label(d) not in failed])}
    if not by_model:
        raise next(iter(failed.values()))
    groups, verdicts = [], []
    for name, ds in by_model.items():
        ref, shared = ds[0], [ds[0]]
        for d in ds[1:]:
            if name in done:
                verdicts.append(Calibration(label(d), label(ref), None, MIN_TOLERANCE, True,
                                            skipped="nothing left to measure, so no calibration"))
                shared.append(d)
                continue
            c = compare([r for rs in rows[label(ref)] for r in rs], [r for rs in rows[label(d)] for r in rs],
                        label(d), label(ref)) if cal else Calibration(label(d), label(ref), None, MIN_TOLERANCE, True)
            verdicts.append(c)
            if c.agrees:
                shared.append(d)
            else:
                groups.append(Group(kept_apart(d), [d]))
        groups.insert(0, Group(ref, shared))
    return groups, verdicts


def kept_apart(d: DeviceInfo) -> DeviceInfo:
    """The device as the environment of its own records it, where calibration kept it apart."""
    return dataclasses.replace(d, name=f"{d.name} [{label(d)}]")


def holds_plan(store: Store, devices: list[DeviceInfo], mode: str, planned: Planned, retry_failed: bool) -> bool:
    """Whether the first device's environment holds every planned pipeline, and so does every environment
    an earlier run kept one of the others apart in (an unfinished one is then calibrated for and resumed)."""
    def holds(env: int | None) -> bool:
        return env is not None and all({pp.id for pp in pipes} <= store.measured_pipelines(env, p, retry_failed)
                                       for p, pipes in planned)
    apart = [e for d in devices[1:] if (e := store.existing_environment(kept_apart(d), mode)) is not None]
    return holds(store.existing_environment(devices[0], mode)) and all(holds(e) for e in apart)


def sweep_devices(problems: list[AttentionProblem], devices: list[DeviceInfo], store: Store, mode: str,
                  opts: SweepOptions, registry,
                  on_problem: Callable[[ProblemOutcome, str | None], None] | None = None,
                  say: Callable[[str], None] = print,
                  on_plan: Callable[[int], None] | None = None) -> SweepReport:
    """Sweep `problems` over `devices` into `store`; the report's notes say how devices were grouped.
    on_plan(outcomes to come) once the devices are grouped: each environment sweeps every problem;
    on_problem(outcome, device label) after each problem; a resumed one (measured before) has no device."""
    if opts.tactics == "optuna":
        raise ValueError("--devices sweeps the grid of tactics (--tactics grid or default); "
                         "run an optuna tactic search on one device")
    planned = plan(problems, devices[0], registry, opts.all_tactics)
    workers = {label(d): IsolatedMeasurer(d, mode, opts.candidate_timeout_s) for d in devices}
    report = SweepReport(env_id=0)
    failed: dict[str, BaseException] = {}
    try:
        groups, verdicts = calibrate(devices, workers, planned, opts, failed,
                                     lambda ds: holds_plan(store, ds, mode, planned, opts.retry_failed))
        report.notes += [f"{name} stopped: {type(e).__name__}: {e}" for name, e in failed.items()]
        report.notes += [c.note() for c in verdicts]
        if on_plan:
            on_plan(len(groups) * len(planned))
        for g in groups:
            g.env_id = store.environment(g.device, mode)
            todo = []
            for p, pipes in planned:
                done = store.measured_pipelines(g.env_id, p, opts.retry_failed)
                left = [pp for pp in pipes if pp.id not in done]
                if left:
                    todo.append((p, left))
                else:
                    report.outcomes.append(ProblemOutcome(p, winner=store.winner(g.env_id, p), resumed=True))
                    if on_problem:
                        on_problem(report.outcomes[-1], None)
            g.queue.extend(largest_first(todo))
        report.env_id = groups[0].env_id
        report.notes.append("environments: " + "; ".join(
            f"{g.device.name} <- {', '.join(label(d) for d in g.members)}" for g in groups))
        _run_queues(groups, workers, store, opts, registry, planned, report, on_problem)
    finally:
        note_retries(report, sum(w.fresh_retries for w in workers.values()))
        for w in workers.values():
            w.close()
    return report


def _run_queues(groups, workers, store, opts, registry, planned, report, on_problem) -> None:
    results: queue.Queue = queue.Queue()
    cond = threading.Condition()
    stop = threading.Event()
    all_pipes = {p: pipes for p, pipes in planned}

    def stopping() -> bool:
        return stop.is_set() or (opts.deadline is not None and time.time() > opts.deadline) or bool(
            opts.should_stop and opts.should_stop())

    def take(g: Group):
        """g's next problem; None once its queue is empty and no device of g holds one that may come back."""
        with cond:
            while not g.queue and g.in_flight and not stopping():
                cond.wait(1.0)
            if not g.queue or stopping():
                return None
            g.in_flight += 1
            return g.queue.popleft()

    def release(g: Group, taken, again: bool) -> None:
        with cond:
            if again:
                g.queue.appendleft(taken)
            g.in_flight -= 1
            cond.notify_all()

    def work(g: Group, d: DeviceInfo):
        name, taken = label(d), None
        try:
            while (taken := take(g)) is not None:
                try:
                    clock = Counter()
                    rows = workers[name].measure(*taken, opts, clock)
                except BaseException as e:
                    # a worker that never started measured nothing of it: another device of the group may
                    release(g, taken, isinstance(e, WorkerStartError))
                    raise
                results.put(("rows", g, name, (taken[0], rows, clock)))
                release(g, taken, False)
        except BaseException as e:  # noqa: BLE001 (the parent reports it; the other devices go on)
            lost = None if isinstance(e, WorkerStartError) else taken      # given back, or not measured
            results.put(("error", g, name, (e, lost)))
        finally:
            results.put(("done", g, name, None))

    threads = [threading.Thread(target=work, args=(g, d), daemon=True) for g in groups for d in g.members]
    for t in threads:
        t.start()
    running, failed, lost = len(threads), {}, []
    try:
        while running:
            kind, g, name, payload = results.get()
            if kind == "done":
                running -= 1
            elif kind == "error":
                e, taken = payload
                failed[name] = e
                report.notes.append(f"{name} stopped: {type(e).__name__}: {e}")
                if taken is not None:
                    lost.append(f"{taken[0].describe()} was lost when {name} stopped")
            else:
                p, rows, clock = payload
                report.seconds.update(clock)
                with stage(report.seconds, "store"):
                    winner = record_problem(p, all_pipes[p], rows, store, g.env_id, opts, registry, g.device)
                o = ProblemOutcome(p, rows, winner)
                report.outcomes.append(o)
                report.by_device[name] += 1
                if on_problem:
                    on_problem(o, name)
    except BaseException:
        stop.set()                  # finish no new problem; what is recorded stays recorded
        raise
    report.stopped_early = any(g.queue for g in groups)
    # problems left that no device of theirs could take, or lost: not the time limit
    left = sum(len(g.queue) for g in groups if g.queue and all(label(d) in failed for d in g.members))
    if left or lost:
        why = [f"{left} problem{'s' * (left != 1)} left with no device to measure them"] if left else []
        report.unfinished = "; ".join(why + lost + [f"{n}: {type(e).__name__}: {e}" for n, e in failed.items()])
