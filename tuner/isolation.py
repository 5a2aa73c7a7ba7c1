"""Fault isolation: each problem's pipelines run in a worker process, so that a crash (an illegal
memory access poisons a CUDA context for good; os.abort; a segfault), a hang or an out-of-memory in
one pipeline marks that pipeline "failed" with its reason, and the problem goes on in a fresh worker
without it. The worker tells the parent which pipeline it is about to run; that is whom a death or a
silence longer than the per-candidate limit is blamed on. A problem that fails outside its pipelines (its
inputs), or fits nowhere in memory, in a worker that measured earlier problems is tried once more in a
fresh worker. A worker that dies or hangs before it is ready, twice in a row, stops the sweep
(WorkerStartError) instead of marking every pipeline of every problem failed."""
from __future__ import annotations

import contextlib
import multiprocessing as mp
import signal
import threading
import time
from collections import Counter
from dataclasses import replace
from typing import Any

from dispatcher.device import DeviceInfo
from dispatcher.pipeline import Pipeline
from dispatcher.problem import AttentionProblem

from .clock import stages
from .measure import measure_problem, total_bytes
from .options import SweepOptions
from .sizes import working_bytes
from .store import result_row
from .timing import make_timer


def label(d: DeviceInfo) -> str:
    """How a worker's device is named in progress, reports and $SWITCHYARD_WORKER_DEVICE."""
    return d.torch_device if d.kind == "cuda" else f"cpu#{d.index}"


def _worker(conn, device: DeviceInfo, mode: str) -> None:
    import os
    os.environ["SWITCHYARD_WORKER_DEVICE"] = label(device)
    if device.kind == "cuda":
        import torch
        torch.cuda.set_device(device.index)     # streams, graphs and "cuda" tensors on this worker's GPU
    timer = make_timer(mode)
    conn.send(("ready",))
    while True:
        msg = conn.recv()
        if msg is None:
            return
        problem, pipes, opts = msg
        clock = Counter()
        try:
            rows = measure_problem(problem, pipes, device, timer, opts, note=lambda s, pid: conn.send(("note", s, pid)),
                                   clock=clock)
            conn.send(("result", rows, dict(clock)))
        except Exception as e:  # noqa: BLE001 (outside any one pipeline: report, keep the worker)
            conn.send(("error", f"{type(e).__name__}: {e}"))


START_S = 120.0         # the longest a worker may take to start (import torch, open its GPU) before it is ready


class WorkerStartError(ChildProcessError):
    """The measuring worker cannot start (a broken install, a GPU it cannot open): nothing to blame on a pipeline."""


def _unfit(row: dict) -> bool:
    return row["status"] == "unsupported" and str(row["error"] or "").startswith("does not fit")


def _death(proc) -> str:
    code = proc.exitcode
    if code is not None and code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exited with code {code}"


@contextlib.contextmanager
def _sigint_ignored():
    """A worker started meanwhile inherits SIGINT ignored (Python keeps an ignored SIGINT ignored at start-up):
    Ctrl-C reaches the parent alone, which stops the worker, instead of a traceback from each process."""
    if threading.current_thread() is not threading.main_thread():     # a daemon's job: no terminal to press
        yield
        return
    old = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, old)


class IsolatedMeasurer:
    """measure(problem, pipes, opts) in a worker; restarts the worker after a crash or a hang."""

    def __init__(self, device: DeviceInfo, mode: str, candidate_timeout_s: float = 120.0):
        self.device, self.mode, self.timeout = device, mode, candidate_timeout_s
        self.ctx = mp.get_context("spawn")      # CUDA cannot be used in a forked child
        self.proc = self.conn = None
        self.restarts = 0
        self.served = 0             # problems the running worker has finished
        self.fresh_retries = 0      # problems measured again in a fresh worker (the sweep's summary says how many)
        self.stillborn = 0          # workers in a row that died or hung before they were ready
        self.ready = False

    def _start(self) -> None:
        self.served = 0
        self.ready = False          # until it says so: a death before then is no pipeline's fault
        try:
            parent, child = self.ctx.Pipe()
            self.proc = self.ctx.Process(target=_worker, args=(child, self.device, self.mode), daemon=True)
            with _sigint_ignored():
                self.proc.start()
        except OSError as e:        # no process at all (out of file descriptors or memory): nothing to wait for
            raise WorkerStartError(f"the measuring worker for {label(self.device)} could not be started: {e}") from e
        child.close()
        self.conn = parent

    def _kill(self) -> None:
        if self.proc is not None and self.proc.pid is not None:     # pid None: its start was interrupted
            self.proc.kill()
            self.proc.join(10)
        self.proc = self.conn = None

    def close(self) -> None:
        if self.proc is not None and self.proc.is_alive():
            try:
                self.conn.send(None)
                self.proc.join(5)
            except OSError:
                pass
        self._kill()

    def measure(self, problem: AttentionProblem, pipes: list[Pipeline], opts: SweepOptions,
                clock: Counter[str] | None = None) -> list[dict]:
        """Rows for `pipes`; `clock` gets the worker's seconds per stage, and the rest as "worker"."""
        t0, staged = time.perf_counter(), Counter()
        try:
            return self._measure(problem, pipes, opts, staged)
        except KeyboardInterrupt:
            self._kill()                # at once: the worker ignores Ctrl-C and would finish its problem first
            raise
        finally:
            if clock is not None:
                clock.update(staged)
                clock["worker"] += time.perf_counter() - t0 - sum(stages(staged).values())

    def _measure(self, problem, pipes, opts, clock: Counter) -> list[dict]:
        opts_safe = replace(opts, should_stop=None)      # callables (a job's cancel event) stay in the parent
        blamed: dict[str, dict] = {}
        todo = list(pipes)
        while todo:
            outcome, current = self._run(problem, todo, opts_safe, clock)
            if outcome[0] == "result":
                self.served += 1
                got = {pp.id: r for pp, r in zip(todo, outcome[1])}
                return [got.get(pp.id) or blamed[pp.id] for pp in pipes]
            used = self.served
            self._kill()
            self.restarts += 1
            if not self.ready:
                silent = f"was silent for {max(self.timeout, START_S):.0f} s"
                self._stillborn(outcome[1] if outcome[0] == "died" else silent)
                continue
            if (outcome[0] in ("error", "unfit") or (outcome[0] == "died" and current is None)) and used:
                # outside any pipeline (the inputs, most often out of memory; or a death before the problem began),
                # or "does not fit" for all: earlier problems' leftovers in that worker may be the cause, so the
                # problem gets one fresh worker before it is marked failed (an H100 lost two small batches so:
                # benchmarks/results/h100-2026-12-05/)
                self.fresh_retries += 1
                continue
            if current is None or outcome[0] == "error":
                why = f"worker {outcome[0]}: {outcome[1]}"
                for pp in todo:
                    blamed[pp.id] = result_row(pp, "failed", error=why)
                todo = []
                break
            stage, pid = current
            pipe = next(pp for pp in todo if pp.id == pid)
            what = "timed out" if outcome[0] == "hang" else "crashed the worker"
            blamed[pid] = result_row(pipe, "failed", error=f"{what} ({outcome[1]}) during {stage}")
            todo = [pp for pp in todo if pp.id != pid]
        return [blamed[pp.id] for pp in pipes]

    def _run(self, problem, todo, opts, clock: Counter) -> tuple[tuple[str, Any], tuple[str, str] | None]:
        """Give the worker (started if need be) one problem; its result or how it ended, and the stage it was in."""
        current = None
        if self.proc is None or not self.proc.is_alive():
            self._start()
        try:
            self.conn.send((problem, todo, opts))
        except OSError:                         # a broken pipe: it died at once
            return self._died(), current
        while True:
            # importing torch and opening the GPU is no pipeline's time: a start gets START_S at least
            wait = self.timeout if self.ready else max(self.timeout, START_S)
            if not self.conn.poll(wait):
                return ("hang", f"no progress for {wait:.0f} s"), current
            try:
                msg = self.conn.recv()
            except (EOFError, OSError):
                return self._died(), current
            if msg[0] == "ready":
                self.ready, self.stillborn = True, 0
            elif msg[0] == "note":
                current = (msg[1], msg[2])
            elif msg[0] == "result":
                clock.update(msg[2])
                if self.served and msg[1] and all(_unfit(r) for r in msg[1]) and \
                        working_bytes(problem) <= opts.memory_fraction * total_bytes(self.device):
                    return ("unfit", ""), current   # it fits an empty worker: the earlier problems' leftovers may not
                return ("result", msg[1]), current
            else:
                return ("error", msg[1]), current

    def _died(self) -> tuple[str, str]:
        if self.proc is not None and self.proc.pid is not None:
            self.proc.join(5)
        return "died", _death(self.proc)

    def _stillborn(self, why: str) -> None:
        """A worker lost before it was ready: tried once more, then the sweep stops, recording nothing for it."""
        self.stillborn += 1
        if self.stillborn >= 2:
            printed = " (its own error is in this process's stderr)" if why.startswith("exited with code") else ""
            raise WorkerStartError(f"the measuring worker for {label(self.device)} {why} before it was ready, "
                                   f"{self.stillborn} times in a row{printed}; nothing was recorded for the problem "
                                   "it was given, so measuring again resumes here once the cause is fixed")
