"""Measured mixed batches as corrections to the ragged prior (predictor.FittedModel.predict).

The prior reads a mixed batch from uniform ones; where the family has mixed batches measured, each
pipeline's prior time at the query is multiplied by how far off the prior was at the nearest measured
mixed batches (the geometric mean of measured / prior over the `k` nearest in feature space that ran
the pipeline). Read as local planes with skew as one more size, the same measurements made decisions
worse (benchmarks/results/mixed-residual/): a few hundred mixed points spread over four dimensions
leave planes far from the query, and the uniform cells' planes bent by them."""
from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from .problem import AttentionProblem
from .table import Timing

Prior = Callable[[AttentionProblem], list[Timing]]


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

    def corrected(self, base: list[Timing], nearest: Sequence[AttentionProblem], k: int) -> list[Timing]:
        """`base` (the prior), each pipeline scaled by its residual at the k nearest of `nearest` (measured
        mixed cells, nearest first) that ran it, unscaled where none did; its accuracy the worst of the
        prior's and those cells' (a pipeline over the error budget in mixed batches stays over it)."""
        out = []
        for t in base:
            used = self.used(t.pipeline.id, nearest, k)
            f = math.exp(sum(r for r, _ in used) / len(used)) if used else 1.0
            errs = [e for e in (t.relerr, *(e for _, e in used)) if e is not None]
            out.append(Timing(t.pipeline, t.median_us * f, t.spread_us * f, max(errs) if errs else None))
        return out
