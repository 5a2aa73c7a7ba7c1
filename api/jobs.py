"""Background sweeps: one job at a time per device, a bounded queue, cancel keeping what was
measured, and (with tune_misses) measuring the most frequent misses when idle."""
from __future__ import annotations

import contextlib
import logging
import queue
import sqlite3
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from dispatcher import StoreError, store
from dispatcher.device import DeviceInfo, folded
from dispatcher.problem import AttentionProblem
from dispatcher.resolve import default_timing_mode
from dispatcher.table import problem_of
from tuner.clock import time_left

from .admission import too_big

if TYPE_CHECKING:
    from tuner.sweep import ProblemOutcome

JobKind = Literal["preset", "problems", "misses"]
JobState = Literal["queued", "running", "done", "cancelled", "failed"]
MAX_QUEUED = 4
JOBS_KEPT = 256                             # jobs listed by GET /v1/sweeps; the oldest finished go first

sweeps = logging.getLogger("switchyard.sweeps")
TUNE_MISSES = ("off", "writers", "anyone")   # who may make the daemon measure a miss (api/main.py)
MISSES_LOOKED_AT = 256                      # most frequent misses read to find misses_per_job admissible ones
MISSES_BACKOFF_S = 600.0                    # after a misses job failed (a worker that cannot start, say),
MISSES_BACKOFF_MAX_S = 6 * 3600.0           # doubled after each further failure in a row, up to this


@dataclass(frozen=True)
class MissPause:
    """Miss tuning paused after misses jobs failed: replaced whole, so a reader never sees half of one."""
    until: float = 0.0
    failed_in_a_row: int = 0
    last_error: str | None = None
    host_in_a_row: int = 0          # of those, the latest run that no job could have avoided (host_failure)

    def after_failure(self, error: str, now: float, host: bool = True) -> MissPause:
        """The pause after one more failed misses job: doubling with each failure of the host in a row
        (`host`: see host_failure); the first step only where the job's own problems failed (they are
        forgotten, so the next job tunes other misses, and the host did its part)."""
        steps = self.host_in_a_row if host else 0
        pause = min(MISSES_BACKOFF_S * 2.0 ** min(steps, 32), MISSES_BACKOFF_MAX_S)
        return MissPause(now + pause, self.failed_in_a_row + 1, error, self.host_in_a_row + 1 if host else 0)


def host_failure(e: BaseException) -> bool:
    """Whether a misses job's failure is the host's, which any other misses would meet too: a worker that
    cannot start, or a database or disk that cannot be written (read-only, locked, full)."""
    from tuner.isolation import WorkerStartError
    return isinstance(e, (WorkerStartError, StoreError, sqlite3.Error, OSError))


class QueueFull(Exception):
    pass


@dataclass
class Job:
    id: str
    kind: JobKind
    problems: list[AttentionProblem]
    state: JobState = "queued"
    done: int = 0
    resumed: int = 0                # problems already measured: done at once, so not in the ETA's rate
    first: tuple[float, int] | None = None   # (time, problems measured) at the first measured now: the rate's start
    measured: int = 0
    counts: dict[str, int] = field(default_factory=dict)
    error: str | None = None
    created_at: float = field(default_factory=time.time)
    started_at: float | None = None
    finished_at: float | None = None
    cancel: threading.Event = field(default_factory=threading.Event)

    def public(self) -> dict[str, Any]:
        total = len(self.problems)
        eta, first = None, self.first
        if self.state == "running" and first is not None:
            eta = time_left(time.time() - first[0], self.done - self.resumed - first[1], total - self.done)
        return {"id": self.id, "kind": self.kind, "state": self.state, "total": total, "done": self.done,
                "progress": self.done / total if total else 1.0, "eta_s": eta, "measured": self.measured,
                "counts": self.counts, "error": self.error,
                "cancel_requested": self.cancel.is_set() and self.state == "running", "created_at": self.created_at,
                "started_at": self.started_at, "finished_at": self.finished_at}


class JobManager:
    def __init__(self, db: str | Path | None, device: DeviceInfo, tune_misses: bool = False, idle_s: float = 5.0,
                 misses_per_job: int = 16):
        self.db, self.device = db, device
        self.jobs: dict[str, Job] = {}
        self._queue: queue.Queue[Job] = queue.Queue()
        self._running: Job | None = None
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self.tune_misses, self.idle_s, self.misses_per_job = tune_misses, idle_s, misses_per_job
        self.miss_pause = MissPause()   # no miss tuning before its `until`; a job that measures clears it
        self._worker = threading.Thread(target=self._run, name="switchyard-jobs", daemon=True)
        self._worker.start()

    def queued(self) -> int:
        """Jobs waiting to start (a cancelled one frees its slot at once)."""
        return sum(j.state == "queued" for j in self.jobs.values())

    def submit(self, kind: JobKind, problems: list[AttentionProblem]) -> Job:
        if not problems:
            raise ValueError("a sweep needs at least one problem")
        with self._lock:
            if self.queued() >= MAX_QUEUED:
                raise QueueFull(f"{MAX_QUEUED} sweeps are already queued on {self.device.name}; "
                                "wait for one to finish or cancel one (DELETE /v1/sweeps/{id})")
            job = Job(uuid.uuid4().hex[:12], kind, problems)
            self.jobs[job.id] = job
            finished = [j.id for j in self.jobs.values() if j.finished_at is not None]
            for old in finished[: max(0, len(self.jobs) - JOBS_KEPT)]:
                del self.jobs[old]                 # the oldest finished ones: the list stays bounded
            self._queue.put(job)
        return job

    def cancel(self, job_id: str) -> Job | None:
        job = self.jobs.get(job_id)
        if job is None:
            return None
        job.cancel.set()
        if job.state == "queued":
            job.state, job.finished_at = "cancelled", time.time()
        return job

    def miss_tuning(self) -> dict[str, Any] | None:
        """Why and how long miss tuning is paused (None: it is not), for /healthz."""
        pause = self.miss_pause
        left = pause.until - time.time()
        if not self.tune_misses or left <= 0:
            return None
        return {"paused_for_s": round(left), "failed_in_a_row": pause.failed_in_a_row, "last_error": pause.last_error}

    def busy(self) -> bool:
        return self._running is not None or self.queued() > 0

    def stop(self) -> None:
        self._stop.set()
        if self._running:
            self._running.cancel.set()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                job = self._queue.get(timeout=self.idle_s)
            except queue.Empty:
                if self.tune_misses and time.time() >= self.miss_pause.until:
                    try:
                        self._queue_misses()
                    except (StoreError, sqlite3.DatabaseError):
                        pass                   # a database gone bad: /healthz says so; try again later
                continue
            if job.state != "queued":
                continue
            self._running = job
            try:
                self._execute(job)
            finally:
                self._running = None

    def _execute(self, job: Job) -> None:
        from tuner.library import run_problems
        from tuner.options import SweepOptions
        from tuner.sweep import ran
        started = time.time()
        job.state, job.started_at = "running", started
        sweeps.info("sweep %s (%s) started: %d problems", job.id, job.kind, len(job.problems))

        def tick(outcome: ProblemOutcome) -> None:
            job.resumed += outcome.resumed           # before done: a reader never sees a rate of done alone
            job.done += 1
            if job.first is None and not outcome.resumed:
                job.first = (time.time(), job.done - job.resumed)
            job.measured += sum(ran(r) for r in outcome.rows)    # as the CLI counts: neither screened nor unsupported
            for r in outcome.rows:
                job.counts[r["status"]] = job.counts.get(r["status"], 0) + 1
        try:
            run_problems(job.problems, self.device, self.db, default_timing_mode(self.device),
                         SweepOptions(should_stop=job.cancel.is_set, isolate=True, alone=job.kind != "preset"),
                         on_problem=tick, say=lambda m: None)
            # cancelled only if it stopped short: a cancel that came as the last problem finished is "done"
            job.state = "done" if job.done >= len(job.problems) else "cancelled"
            if job.first is not None:           # it measured: the worker starts, miss tuning need not wait
                self.miss_pause = MissPause()
            if job.kind == "misses" and job.state == "done":
                with contextlib.suppress(StoreError, sqlite3.DatabaseError):   # counted again later, at worst
                    self._forget_misses(job.problems)
        except Exception as e:  # noqa: BLE001 (a failed job is reported, the daemon goes on)
            job.state, job.error = "failed", f"{type(e).__name__}: {e}"
            if job.kind == "misses":        # the same misses would fail again at once, every idle_s, for ever
                host = host_failure(e)
                self.miss_pause = self.miss_pause.after_failure(job.error, time.time(), host)
                if not host:                # these problems fail: tune the next misses instead
                    with contextlib.suppress(StoreError, sqlite3.DatabaseError):
                        self._forget_misses(job.problems)
        job.finished_at = time.time()
        sweeps.log(logging.WARNING if job.state == "failed" else logging.INFO, "sweep %s %s after %.0f s: %d of %d "
                   "problems, %d pipelines measured%s", job.id, job.state, job.finished_at - started,
                   job.done, len(job.problems), job.measured, f" ({job.error})" if job.error else "")

    def _queue_misses(self) -> None:
        conn = store.open_readonly(self.db)
        if conn is None:
            return
        try:
            rows = store.misses(conn, self.device.name, MISSES_LOOKED_AT)
        finally:
            conn.close()
        probs = []
        for r in rows:
            try:
                p = problem_of(r)
            except ValueError:
                continue
            if too_big(p, self.device) is None:          # the bounds a token-holder's POST /v1/sweeps has
                probs.append(p)
            if len(probs) == self.misses_per_job:
                break
        if probs and not self.busy():
            self.submit("misses", probs)

    def _forget_misses(self, problems: list[AttentionProblem]) -> None:
        conn = sqlite3.connect(str(store.default_path(self.db)), timeout=10)
        try:
            conn.create_function("folded", 1, folded)     # as store.misses chose them: any spelling
            with conn:
                conn.executemany("delete from misses where folded(device_name) = ? and problem_key = ?",
                                 [(folded(self.device.name), p.key()) for p in problems])
        finally:
            conn.close()


