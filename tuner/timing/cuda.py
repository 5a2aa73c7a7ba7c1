"""CUDA timing: graph replay (GPU time) or eager calls (host overhead included), CUDA events.

Each timed call is followed by a small "next op" kernel standing for the layer's next kernel:
identical PDL kernels launched back to back overlap in a way no real layer does (on the H200, 20
back-to-back XQA calls measured 303.5 us each against 238-240 us with PDL off or a kernel between
them). The next op's own time is measured the same way and subtracted."""
from __future__ import annotations

import statistics
from collections import Counter

import torch

from .base import Prepared, TimingConfig, calls_per_graph, part, warm_up

# a GPU-side wait queued before each timed replay (~50 us at H200 clocks): the start event and the
# replay are then both queued before the GPU reaches them, so no host launch gap is timed
LEAD_CYCLES = 100_000
TIDY_BYTES = 2 * 2**30          # unused cached memory above which a capture first empties the cache


class CudaTimer:
    def __init__(self, mode: str, cfg: TimingConfig = TimingConfig()):
        if mode not in ("graph", "eager"):
            raise ValueError(f"CUDA timing mode {mode!r} is not graph or eager")
        self.mode, self.cfg = mode, cfg
        self.parts: Counter = Counter()     # seconds per part of prepare (see harness.part)
        self._keep = []
        self._a = torch.randn(1 << 18, device="cuda")
        self._b = torch.empty_like(self._a)
        self.next_us = self._baseline()
        self.parts.clear()

    def next_op(self) -> None:
        torch.mul(self._a, 1.0001, out=self._b)      # ~1 MB elementwise: a small next kernel

    def _baseline(self) -> float:
        timed, _ = self._prepare_calls([lambda: None], False)
        return statistics.median(timed()[0] for _ in range(7))

    def prepare(self, fns, first_warm: bool = False) -> Prepared:
        """As WallTimer.prepare; a warm-up call of a large problem (one KV copy) costs milliseconds."""
        timed, (us, n, replay) = self._prepare_calls(list(fns), first_warm)

        def round_() -> tuple[float, int]:
            us, n = timed()
            return self._less_next(us), n
        return Prepared(round_, (self._less_next(us), n, replay))

    def _less_next(self, us: float) -> float:
        """A call's time without the next op that follows it in every timed repeat."""
        return max(us - self.next_us, 0.0)

    def _prepare_calls(self, fns, first_warm: bool):
        with part(self.parts, "warmup"):
            # graph mode: the capture's first replay runs every copy before any timed round, so only a
            # pipeline that never ran needs an eager call first (lazy set-up must not happen inside a
            # capture); the copies share that set-up (one plan, one workspace: see build_rotated)
            passes, warm = (self.cfg.warmup, fns) if self.mode == "eager" else (0 if first_warm else 1, fns[:1])
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                warm_up(warm, passes, first_warm and self.mode == "eager", self.next_op)
            torch.cuda.current_stream().wait_stream(side)
            torch.cuda.synchronize()
        # long calls need fewer repeats per replay to time well: most of a sweep's GPU time is in them
        with part(self.parts, "estimate"):
            one_us = self._one_call_us(fns[0])
        n = calls_per_graph(one_us, len(fns), self.cfg)
        reps = n // len(fns)

        def body():
            for _ in range(reps):
                for f in fns:
                    f()
                    self.next_op()

        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        with part(self.parts, "capture"):
            if self.mode == "graph":
                run, replay_us = self._capture(body)      # the warm-up replay, timed
                first = (replay_us / n, n, replay_us)
            else:
                run, first = body, (one_us, 1, one_us)    # eager: the estimate call stands for it

        lead = self.mode == "graph"       # eager mode times the host's launches on purpose

        def timed():
            return elapsed_us(run, start, end, lead) / n, n
        return timed, first

    def _capture(self, body):
        """A CUDA graph of `body`, in its own memory pool as torch.cuda.graph makes it, but without
        emptying the device and pinned-host caches at every capture: that made each FlashInfer
        wrapper built afterwards pay cudaMalloc / cudaHostAlloc again (milliseconds per pipeline).
        The device cache is still emptied when it holds much unused memory (a large problem's
        warm-up temporaries): a graph's pool cannot use the general cache's free blocks, and without
        this large problems ran out of memory (benchmarks/results/h200-2026-12-03/)."""
        if torch.cuda.memory_reserved() - torch.cuda.memory_allocated() > TIDY_BYTES:
            torch.cuda.empty_cache()
        g = torch.cuda.CUDAGraph()
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            g.capture_begin()
            try:
                body()
            except BaseException:
                try:
                    g.capture_end()        # leave the stream usable; the pipeline's error is what counts
                except Exception:  # noqa: BLE001
                    pass
                raise
            g.capture_end()
        torch.cuda.current_stream().wait_stream(side)
        # the first replay is the warm-up; timed as a round is (the GPU kept busy while the host
        # launches it), it also tells a candidate far out of the race (harness.out_of_the_race)
        events = (torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
        first_us = elapsed_us(g.replay, *events, True)
        self._keep.append(g)                    # graphs live until release()
        return g.replay, first_us

    def _one_call_us(self, f) -> float:
        """One eager call (and the next op): an estimate of a call's length, launch overhead included."""
        return elapsed_us(lambda: (f(), self.next_op()), torch.cuda.Event(enable_timing=True),
                          torch.cuda.Event(enable_timing=True), False)

    def release(self) -> None:
        self._keep = []


def elapsed_us(run, start, end, lead: bool) -> float:
    """Microseconds of `run` between two CUDA events; with `lead`, a GPU-side wait is queued first,
    so that the host's launch of `run` is not timed."""
    if lead:
        torch.cuda._sleep(LEAD_CYCLES)
    start.record()
    run()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) * 1000.0
