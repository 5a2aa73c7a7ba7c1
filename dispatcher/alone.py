"""Shapes measured alone (a problem list, the daemon's misses: Table.alone, schema 6) as corrections to the model
of the family's grid (predictor.FittedModel.predict).

The estimators read a grid: batch rows either side (split_rows), KV lengths either side in a row (kv_line),
local planes through neighbours measured together. Read as more of the same, serving shapes measured one by one
moved decisions far from them: with three off-grid seeds' 1800 H200 shapes added to the shipped grid, the
fourth seed's regret went from 1.0024 to 1.0047 (seed 2 alone did as much: single shapes at batch 17 and 20
became the batch rows either side of 18, just past XQA's wave step). So the grid's model is fitted without
them, and each pipeline's time near them is scaled by its error at them: exp of the mean of log(measured / the
grid model's) over the alone_k nearest within alone_radius, each weighted by 1 - distance / alone_radius, over
a total weight of 1 at least (one shape at half the radius moves p half its error); its accuracy the worst of
the grid model's and those shapes'. benchmarks/results/alone/."""
from __future__ import annotations

import math
from collections.abc import Callable
from functools import partial
from typing import Any, Protocol

from .mixed_residual import Residuals
from .predictor_config import PredictorConfig
from .problem import AttentionProblem
from .table import Table, Timing


class GridModel(Protocol):       # predictor.FittedModel, of the cells a grid measured
    def predicted(self, p: AttentionProblem, stepped: bool = True) -> list[Timing]: ...
    def batch_rows(self, p: AttentionProblem) -> tuple[int, int] | None: ...


def alone_cells(table: Table, elsewhere: set[tuple[Any, ...]]) -> dict[tuple[Any, ...], list[AttentionProblem]]:
    """Per family but those read `elsewhere` (by the mixed-batch model's uniform model, which has its own), its
    uniform cells measured alone, where the family has uniform cells a grid measured (a family measured alone
    only is its own grid)."""
    out: dict[tuple[Any, ...], list[AttentionProblem]] = {}
    for fam, cells in table.by_family.items():
        lone = [c for c in cells if c.skew == 1 and c in table.alone and fam not in elsewhere]
        if lone and any(c.skew == 1 and c not in table.alone for c in cells):
            out[fam] = lone
    return out


def grid_cells(table: Table, lone: dict[tuple[Any, ...], list[AttentionProblem]],
               elsewhere: set[tuple[Any, ...]]) -> list[AttentionProblem]:
    """The cells the grid's model reads: not those measured alone, nor the mixed batches of families read
    `elsewhere` (it is never asked of them, and without them it builds no mixed-batch model of its own)."""
    off = {c for cells in lone.values() for c in cells}
    return [c for c in table.by_cell if c not in off and not (c.skew > 1 and c.family() in elsewhere)]


class AloneCorrections:
    """The grid's model (`grid`: a FittedModel of the table without the cells measured alone) and those cells."""

    def __init__(self, grid: GridModel, cells: dict[tuple[Any, ...], list[AttentionProblem]], table: Table,
                 x: Callable[[AttentionProblem], tuple[float, ...]], config: PredictorConfig):
        self.grid, self.cells, self.x, self.config = grid, cells, x, config
        # the error of the times as p is read: with whole waves of requests (stepped) or without
        self._residuals = {s: Residuals(partial(grid.predicted, stepped=s), lambda c: table.by_cell[c])
                           for s in (True, False)}

    def covers(self, p: AttentionProblem) -> bool:
        return p.skew == 1 and p.family() in self.cells

    def near(self, p: AttentionProblem) -> list[tuple[AttentionProblem, float]]:
        """The alone_k nearest cells of p's family measured alone, within alone_radius in feature space."""
        here, radius = self.x(p), self.config.alone_radius
        dist = {c: math.dist(self.x(c), here) for c in self.cells.get(p.family(), [])}
        near = sorted((c for c, d in dist.items() if d < radius), key=lambda c: (dist[c], self.x(c)))
        return [(c, dist[c]) for c in near[: self.config.alone_k]]

    def predicted(self, p: AttentionProblem, stepped: bool) -> list[Timing]:
        """The grid model's times at p, each scaled by its error at the cells measured alone near p."""
        near, radius = self.near(p), self.config.alone_radius
        out = []
        for t in self.grid.predicted(p, stepped):
            used = [(1 - d / radius, *r[t.pipeline.id]) for c, d in near
                    if t.pipeline.id in (r := self._residuals[stepped].at(c))]
            f = math.exp(sum(w * x for w, x, _ in used) / max(sum(w for w, _, _ in used), 1.0)) if used else 1.0
            errs = [e for e in (t.relerr, *(e for _, _, e in used)) if e is not None]
            out.append(Timing(t.pipeline, t.median_us * f, t.spread_us * f, max(errs) if errs else None))
        return out
