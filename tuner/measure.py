"""Measuring one problem: every pipeline checked against the fp32 reference, the accurate ones
timed together, and the rows stored with the problem's winner. The sweep (tuner/sweep.py), the
isolated worker (tuner/isolation.py) and the fleet (tuner/fleet.py) all measure through here."""
from __future__ import annotations

import os
import traceback
from collections import Counter
from collections.abc import Callable
from typing import Any

from dispatcher.device import DeviceInfo
from dispatcher.pipeline import Pipeline
from dispatcher.policy import max_relerr
from dispatcher.problem import AttentionProblem
from dispatcher.registry import KernelSpec, load_registry, mask_reasons
from dispatcher.rules import rule_pick
from dispatcher.table import Timing, rank

from .clock import stage
from .inputs import PagedInputs, make_inputs, relative_error, rotated
from .options import SweepOptions
from .runners import build_rotated, runnable
from .sizes import kv_bytes, rotation_copies, working_bytes
from .store import Store, result_row, timings
from .timing import Timer, time_interleaved

Row = dict[str, Any]


def free_bytes(device: DeviceInfo) -> int:
    if device.kind == "cuda":
        import torch
        # what the driver has free, plus what torch's caching allocator holds but no tensor uses
        # (the timing no longer empties that cache at every capture, so the driver alone sees 0 free)
        cached = torch.cuda.memory_reserved(device.index) - torch.cuda.memory_allocated(device.index)
        return int(torch.cuda.mem_get_info(device.index)[0] + cached)
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_AVPHYS_PAGES")


def clear_cuda_error(device: DeviceInfo) -> None:
    """After a failed CUDA call, drain the stream so the next pipeline does not inherit its error.
    (A sticky error such as an illegal address poisons the process; worker isolation is for that.)"""
    if device.kind == "cuda":
        import torch
        try:
            torch.cuda.synchronize()
        except Exception:  # noqa: BLE001
            pass


def free_after_error(device: DeviceInfo) -> None:
    """After a pipeline failed while timing: clear the error, and give the freed memory back (an
    out-of-memory failure left the cache full of the blocks the next pipeline's capture needs)."""
    clear_cuda_error(device)
    collect_garbage(device)


def out_of_memory(e: BaseException) -> bool:
    text = str(e).lower()
    return "out of memory" in text or "alloc_failed" in text      # torch and CUDA; cuDNN and cuBLAS


def collect_garbage(device: DeviceInfo) -> None:
    """What only reference cycles still hold (graphs, workspaces) goes back: an H100 worker held 71.7 GiB
    in graph pools between problems (benchmarks/results/h100-2026-12-05/). Only where a problem would not
    fit, a pipeline ran out of memory or failed while timed: the H100 sweep's unaccounted time rose ~0.13 s
    a problem with one per problem (benchmarks/results/h100-2026-12-05b/)."""
    import gc
    gc.collect()
    if device.kind == "cuda":
        import torch
        torch.cuda.empty_cache()


def error_text(e: BaseException) -> str:
    last = traceback.format_exception_only(type(e), e)[-1].strip()
    return last[:2000]


def total_bytes(device: DeviceInfo) -> int:
    """The device's whole memory (CPU: physical memory): what a problem could have in an empty worker."""
    if device.kind == "cuda":
        return device.memory_bytes
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


class InputCache:
    """The last problem's inputs: a tactic search measures one problem many times."""

    def __init__(self) -> None:
        self._held: dict[tuple, tuple[PagedInputs, list[PagedInputs]]] = {}

    def make_room(self, p: AttentionProblem, device: DeviceInfo, seed: int) -> None:
        """Before another problem's fit check: the previous problem's tensors go, and what they held returns."""
        if (p, device.torch_device, seed) in self._held:
            return
        self.clear()
        if device.kind == "cuda":
            import torch
            torch.cuda.empty_cache()        # once per problem: the next one may need all the memory, unfragmented

    def get(self, p: AttentionProblem, device: DeviceInfo, seed: int) -> tuple[PagedInputs, list[PagedInputs]]:
        """p's inputs, made where not held; make_room(p, ...) first (measure_problem does, before its fit check)."""
        key = (p, device.torch_device, seed)
        if key not in self._held:
            self.clear()
            x = make_inputs(p, device.torch_device, seed=seed)
            self._held[key] = (x, rotated(x, rotation_copies(kv_bytes(p)) if device.kind == "cuda" else 1))
        return self._held[key]

    def clear(self) -> None:
        self._held.clear()


INPUTS = InputCache()


def measure_problem(p: AttentionProblem, pipes: list[Pipeline], device: DeviceInfo, timer: Timer,
                    opts: SweepOptions, note: Callable[[str, str], None] | None = None,
                    clock: Counter[str] | None = None, specs: dict[str, KernelSpec] | None = None) -> list[Row]:
    """Check every pipeline against the fp32 reference, then time the checked ones interleaved.
    `note(stage, pipeline_id)` is told which pipeline is about to run (see tuner/isolation.py);
    `clock` gathers seconds per stage; `specs`: the registry whose `maskless` settings are not run
    (default: load_registry(), as a worker process reads it)."""
    note = note or (lambda stage, pid: None)
    INPUTS.make_room(p, device, opts.seed)
    need = working_bytes(p)
    budget_bytes = opts.memory_fraction * free_bytes(device)
    if need > budget_bytes:
        with stage(clock, "collect"):
            collect_garbage(device)
        budget_bytes = opts.memory_fraction * free_bytes(device)
    if need > budget_bytes:
        why = f"does not fit: needs ~{need / 2**30:.1f} GiB, {budget_bytes / 2**30:.1f} GiB usable on {device.name}"
        return [result_row(pp, "unsupported", error=why) for pp in pipes]
    budget = max_relerr(p.kv_dtype, p.out_dtype, opts.max_relerr)
    with stage(clock, "inputs"):
        x, copies = INPUTS.get(p, device, opts.seed)
    rows: dict[str, Row] = {}
    fns, errs = {}, {}
    specs = load_registry() if specs is None else specs
    for pipe in pipes:
        runner, why = runnable(pipe.kernel, device)
        # a setting that takes no mask the problem needs is not run (registry.mask_reasons), in every sweep's worker
        masked = mask_reasons(specs[pipe.kernel], pipe.tactic_dict(), p, device) if pipe.kernel in specs else []
        if why or masked or runner is None:
            rows[pipe.id] = result_row(pipe, "unsupported", error=why or (masked[0] if masked else None))
            continue
        note("check", pipe.id)
        try:
            fns[pipe.id], errs[pipe.id] = checked(runner, pipe, copies, x, device, clock)
        except Exception as e:  # noqa: BLE001 (a kernel failing is a result, not a sweep error)
            rows[pipe.id] = result_row(pipe, "failed", error=error_text(e))
            clear_cuda_error(device)
    if fns:
        failed: dict[str, BaseException] = {}

        def recover(pid: str) -> None:
            fns.pop(pid, None)              # its callables and the buffers they hold go
            free_after_error(device)
        # the accuracy check ran each pipeline's first copy: that call was its first warm-up; a pipeline
        # failing its capture or rounds (out of memory beside the others) fails alone
        stats = time_interleaved(fns, timer, note=note, clock=clock, first_warm=True,
                                 can_win={pid for pid in fns if errs[pid] <= budget}, failed=failed,
                                 recover=recover)
        for pid, e in failed.items():
            rows[pid] = result_row(next(pp for pp in pipes if pp.id == pid), "failed", error=f"timing: {error_text(e)}")
        for pid, s in stats.items():
            pipe = next(pp for pp in pipes if pp.id == pid)
            status = "ok" if errs[pid] <= budget else "inaccurate"
            rows[pid] = result_row(pipe, status, median_us=s.median_us, min_us=s.min_us, max_us=s.max_us,
                                   spread_us=s.spread_us, reps=s.reps, relerr=errs[pid], max_relerr=budget,
                                   error=None if status == "ok" else
                                   f"relative error {errs[pid]:.4f} over the budget {budget:g}")
    return [rows[pp.id] for pp in pipes]   # one row per pipeline, in order


def checked(runner: Any, pipe: Pipeline, copies: list[PagedInputs], x: PagedInputs, device: DeviceInfo,
            clock: Counter[str] | None) -> tuple[list[Callable[[], Any]], float]:
    """`pipe` built on every rotated copy, and its first output's relative error. Out of memory, it is
    built once more after what only reference cycles held is collected (collect_garbage is not run before
    every problem, so an earlier problem's graphs may still hold the memory)."""
    def check() -> tuple[list[Callable[[], Any]], float]:
        with stage(clock, "check"):
            built = build_rotated(runner, pipe, copies)
            return built, relative_error(built[0](), x, pipe.fused_out_quant or pipe.out_quant)
    try:
        return check()
    except Exception as e:  # noqa: BLE001
        if not out_of_memory(e):
            raise
    clear_cuda_error(device)
    with stage(clock, "collect"):
        collect_garbage(device)
    return check()


def record_problem(p: AttentionProblem, pipes: list[Pipeline], rows: list[Row], store: Store, env_id: int,
                   opts: SweepOptions, registry: dict[str, KernelSpec], device: DeviceInfo) -> str | None:
    """Store a problem's new rows with its winner over everything measured for it; the winner's id."""
    pick, _ = rule_pick(opts.rule, p, device, registry, pipes)
    budget = max_relerr(p.kv_dtype, p.out_dtype, opts.max_relerr)
    new = [Timing(Pipeline.from_row({**r, "kv_dtype": p.kv_dtype}), r["median_us"], r["spread_us"] or 0.0, r["relerr"])
           for r in rows if r["status"] == "ok"]
    ranking = rank({t.pipeline.id: t for t in timings(store, env_id, p) + new}.values(), budget,
                   pick.id if pick else None)
    store.record(env_id, p, rows, ranking, opts.alone)
    return ranking.winner.pipeline.id if ranking else None
