"""A device check of the CUDA-graph timer on torch kernels alone (no FlashInfer, no JIT: it runs in
seconds on a bare machine): three candidates of one "problem", two close and one far behind, timed
by tuner.timing.time_interleaved with the graph timer. Prints each one's stats and what the timer's
warm-up replay measured, and exits non-zero when the far one was timed in rounds or the close ones
were not. Usage: python3 benchmarks/timing_smoke.py"""
from __future__ import annotations

import sys

import torch

from tuner.timing import TimingConfig, time_interleaved
from tuner.timing.cuda import CudaTimer


def matmul(n: int, copies: int = 2):
    """Callables over rotated copies, as the sweep builds them: one n x n bf16 matmul each."""
    pairs = [(torch.randn(n, n, device="cuda", dtype=torch.bfloat16),
              torch.randn(n, n, device="cuda", dtype=torch.bfloat16)) for _ in range(copies)]
    return [lambda a=a, b=b: a @ b for a, b in pairs]


def main() -> int:
    cfg = TimingConfig()
    timer = CudaTimer("graph", cfg)
    fns = {"close-a": matmul(4096), "close-b": matmul(4096), "far": matmul(8192)}   # ~8x the work
    for f in fns.values():
        f[0]()                                   # as the accuracy check does before timing
    torch.cuda.synchronize()
    notes = []
    stats = time_interleaved(fns, timer, note=lambda stage, pid: notes.append((stage, pid)), first_warm=True)
    rounds = {k: sum(n == ("time", k) for n in notes) for k in fns}
    for k, s in stats.items():
        print(f"{k:8s} median {s.median_us:9.1f} us  min {s.min_us:9.1f}  max {s.max_us:9.1f}  reps {s.reps}  rounds "
              f"{rounds[k]}")
    ok = (stats["far"].median_us > 3 * stats["close-a"].median_us and rounds["far"] == 0
          and rounds["close-a"] == rounds["close-b"] == cfg.rounds)
    print(f"next-op baseline {timer.next_us:.2f} us;", "far dropped before the rounds" if ok else "FAILED", flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
