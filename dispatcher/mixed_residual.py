"""Measured mixed batches as corrections to the ragged prior (predictor.FittedModel.predict).

The prior reads a mixed batch from uniform ones; where the family has mixed batches measured, each
pipeline's prior time at the query is multiplied by how far off the prior was at the nearest measured
mixed batches: exp(mean + w x standard deviation) of log(measured / prior) over the `k` nearest in
feature space that ran the pipeline (w: PredictorConfig.mixed_residual_std, for the pipelines that
PredictorConfig.mixed_residual_std_waves and _scope name, else 0; one such batch: its own factor).
Read as local planes with skew as one more size, the same measurements made decisions worse
(benchmarks/results/mixed-residual/): a few hundred mixed points spread over four dimensions leave
planes far from the query, and the uniform cells' planes bent by them."""
from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

from .problem import AttentionProblem
from .table import Table, Timing

Prior = Callable[[AttentionProblem], list[Timing]]
CORRECTING_KV_DTYPES = ("fp8",)   # KV dtypes whose measured mixed batches correct the prior (modelled)


def modelled(table: Table, with_16bit_kv: int) -> Table:
    """The cells the model reads: without a BF16 or FP16 KV cache's measured mixed batches where their family
    has uniform ones to read them from, unless `with_16bit_kv` (PredictorConfig.mixed_residual_16bit_kv). As
    corrections they made decisions worse in all 12 comparisons scored, H200 and H100: near two waves the
    prior's error there changes sign (benchmarks/results/bf16-mixed-corrections/). They stay in the
    dispatcher's table: a measured one is still decided as measured."""
    uniform = {c.family() for c in table.by_cell if c.skew == 1}
    kept = [c for c in table.by_cell
            if with_16bit_kv or c.skew == 1 or c.kv_dtype in CORRECTING_KV_DTYPES or c.family() not in uniform]
    return table if len(kept) == len(table.by_cell) else table.subset(kept)


class Residuals:
    """Per measured mixed cell and pipeline: log(measured / prior) and the measured relative error,
    computed once per cell."""

    def __init__(self, prior: Prior, measured: Callable[[AttentionProblem], dict[str, Timing]]):
        self.prior, self.measured = prior, measured
        self._at: dict[AttentionProblem, dict[str, tuple[float, float | None]]] = {}

    def at(self, cell: AttentionProblem) -> dict[str, tuple[float, float | None]]:
        got = self._at.get(cell)
        if got is None:
            prior = {t.pipeline.id: t.median_us for t in self.prior(cell)}
            got = {pid: (math.log(t.median_us / prior[pid]), t.relerr) for pid, t in self.measured(cell).items()
                   if prior.get(pid) and t.median_us > 0}
            self._at[cell] = got
        return got

    def used(self, pid: str, nearest: Sequence[AttentionProblem], k: int) -> list[tuple[float, float | None]]:
        """The residuals of `pid` at the k nearest of `nearest` (nearest first) that ran it."""
        return [r[pid] for c in nearest if pid in (r := self.at(c))][:k]

    def corrected(self, base: list[Timing], nearest: Sequence[AttentionProblem], k: int, std_weight: float,
                  wary: Callable[[Any], bool] = lambda pipeline: True) -> list[Timing]:
        """`base` (the prior), each pipeline scaled by its residuals at the k nearest of `nearest` (measured
        mixed cells, nearest first) that ran it: exp(their mean + `std_weight` x their standard deviation)
        where `wary(pipeline)`, so that a pipeline whose prior is off by different factors nearby (FA2-TC's
        own plan at 1.9-4 waves: 0.4-1.9x) reads slower, else exp(their mean); unscaled where none did. Its
        accuracy the worst of the prior's and those cells' (a pipeline over the error budget in mixed batches
        stays over it)."""
        out = []
        for t in base:
            used = self.used(t.pipeline.id, nearest, k)
            logs = [r for r, _ in used]
            f = math.exp(_mean_plus_std(logs, std_weight if wary(t.pipeline) else 0.0)) if used else 1.0
            errs = [e for e in (t.relerr, *(e for _, e in used)) if e is not None]
            out.append(Timing(t.pipeline, t.median_us * f, t.spread_us * f, max(errs) if errs else None))
        return out


def _mean_plus_std(xs: list[float], std_weight: float) -> float:
    """mean + std_weight x population standard deviation, in floats: statistics.pstdev works in exact
    fractions, about 25x slower here, and its results differ from these by 1e-15 at most."""
    m = math.fsum(xs) / len(xs)
    return m + std_weight * math.sqrt(math.fsum((x - m) ** 2 for x in xs) / len(xs))
