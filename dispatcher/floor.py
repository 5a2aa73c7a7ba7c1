"""A floor under the learned model's decode times: a uniform decode batch does at least the work of any
measured batch it dominates (no more requests, each no longer: batch size and the longest KV length at
most its own), so no pipeline runs it faster than it ran that one. The local planes know nothing of
this and, where the measured points are sparse (an adaptive sweep's table), read FA2-TC's fixed
split-KV plan at batch 8 x 2.9k KV at 22 us, under its 54 us at batch 4 x 2k (79 us measured at 8 x
2.9k, where XQA took 26). Decode only: measured prefill batches ran faster than ones they dominate 5-7x
as often as decode ones, 0.32% of pairs beyond 5% (benchmarks/results/dominated-floor/)."""
from __future__ import annotations

from dataclasses import replace

from .problem import AttentionProblem
from .table import Table, Timing


class DominatedFloor:
    """Each pipeline's slowest measured time among the cells a uniform problem dominates."""

    def __init__(self, table: Table):
        self.table = table
        self._by_batch = {fam: sorted(cells, key=lambda c: c.batch_size) for fam, cells in table.by_family.items()}

    def floors(self, p: AttentionProblem) -> dict[str, float]:
        """pipeline id -> its slowest time at a measured cell p dominates; {} for prefill and for a mixed
        batch (its short requests may be shorter than a measured batch's)."""
        out: dict[str, float] = {}
        if p.skew > 1 or p.phase != "decode":
            return out
        for c in self._by_batch.get(p.family(), []):
            if c.batch_size > p.batch_size:
                break
            if c.max_kv_len <= p.kv_len:
                for pid, t in self.table.by_cell[c].items():
                    if t.median_us > out.get(pid, 0.0):
                        out[pid] = t.median_us
        return out

    def raised(self, p: AttentionProblem, timings: list[Timing], factor: float) -> list[Timing]:
        """`timings` at p, each at least `factor` times its floor (its spread scaled alike)."""
        floors = self.floors(p) if factor else {}
        out = []
        for t in timings:
            low = factor * floors.get(t.pipeline.id, 0.0)
            out.append(replace(t, median_us=low, spread_us=t.spread_us * low / t.median_us)
                       if low > t.median_us > 0 else t)
        return out
