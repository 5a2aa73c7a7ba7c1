"""The measured table of one device and timing mode, by cell (dispatcher.problem.CELLS_PER_OCTAVE),
and the ranking of timings. Data only: the learned model is dispatcher/predictor.py."""
from __future__ import annotations

import json
import math
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import Any

from .balance import balance_of, bounds, stored
from .device import DeviceInfo
from .pipeline import Pipeline
from .problem import FIELDS, AttentionProblem


@dataclass(frozen=True, slots=True)
class Timing:
    pipeline: Pipeline
    median_us: float
    spread_us: float
    relerr: float | None


@dataclass(frozen=True, slots=True)
class Ranking:
    winner: Timing
    runner_up: Timing | None
    tie: bool                       # the winner is within noise of the fastest
    over_budget: tuple[str, ...]    # pipelines passed over for accuracy
    kept_rule: bool = False         # the rule's pipeline was kept although another measured faster
    passed_rule: Timing | None = None   # the rule's pipeline, within noise of the winner but beyond the keep margin


# the rule's pipeline stands against a faster one within this many spreads (the interquartile range of
# the per-round times): about the medians' standard error with the 8-56 rounds a measurement takes,
# picked on off-grid seed 1 (benchmarks/results/keep-margin/)
KEEP_RULE_SPREADS = 0.25


def noise_us(a: Timing, b: Timing) -> float:
    """Two timings closer than this are a tie: the larger measured spread, at least 0.5%."""
    return max(a.spread_us, b.spread_us, 0.005 * min(a.median_us, b.median_us))


def keep_margin_us(a: Timing, b: Timing, spreads: float = KEEP_RULE_SPREADS) -> float:
    """How much faster than the rule's pipeline another must be to replace it: `spreads` times the
    larger spread, at least 0.5%."""
    return max(spreads * max(a.spread_us, b.spread_us), 0.005 * min(a.median_us, b.median_us))


def rank(timings: Iterable[Timing], budget: float, prefer: str | None = None,
         allowed: set[str] | None = None, keep_spreads: float = KEEP_RULE_SPREADS) -> Ranking | None:
    """The winner among accurate timings: the fastest, except that `prefer` (the rule's pipeline)
    is kept when within keep_margin_us(keep_spreads) of the fastest; ties otherwise go to the lower
    median, then id. `tie`: the winner is within noise (the larger spread) of the fastest or the
    runner-up; `passed_rule`: the rule's pipeline where it was within noise but beyond the margin."""
    usable, over = [], []
    for t in timings:
        if allowed is not None and t.pipeline.id not in allowed:
            continue
        if t.relerr is not None and t.relerr > budget:
            over.append(t.pipeline.id)
        else:
            usable.append(t)
    if not usable:
        return None
    usable.sort(key=lambda t: (t.median_us, t.pipeline.id))
    best = usable[0]
    winner, tie, kept_rule, passed = best, False, False, None
    if prefer and prefer != best.pipeline.id:
        kept = next((t for t in usable if t.pipeline.id == prefer), None)
        if kept is not None and kept.median_us - best.median_us <= keep_margin_us(best, kept, keep_spreads):
            winner, tie, kept_rule = kept, True, True
        elif kept is not None and kept.median_us - best.median_us <= noise_us(best, kept):
            passed = kept
    others = [t for t in usable if t is not winner]
    runner = others[0] if others else None
    if runner is not None and not tie:
        tie = runner.median_us - winner.median_us <= noise_us(winner, runner)
    return Ranking(winner, runner, tie, tuple(sorted(over)), kept_rule, passed)


def one_cell(cell: AttentionProblem, measured: dict[AttentionProblem, dict[str, Timing]]) -> list[Timing]:
    """One cell's timings from the problems measured in it, comparable with each other: those of the
    cell's representative itself (else of the problem with the most pipelines), then each pipeline
    measured only at another problem of the cell, scaled by how the pipelines measured at both
    compare there (a tactic searched at kv 60000 races defaults measured at 60097 on their scale)."""
    order = sorted(measured, key=lambda p: (p != cell, -len(measured[p])))
    out = dict(measured[order[0]])
    for p in order[1:]:
        shared = [pid for pid in measured[p] if pid in out]
        if not shared:
            continue            # nothing to put it on the bucket's scale with
        logs = [math.log(out[pid].median_us / measured[p][pid].median_us) for pid in shared]
        scale = math.exp(sum(logs) / len(logs))
        for pid, t in measured[p].items():
            if pid not in out:
                out[pid] = Timing(t.pipeline, t.median_us * scale, t.spread_us * scale, t.relerr)
    return list(out.values())


Sizes = tuple[float, float, float]       # log2 of batch_size, q_len, kv_len


def log_sizes(p: AttentionProblem) -> Sizes:
    return math.log2(p.batch_size), math.log2(p.q_len), math.log2(p.kv_len)


@dataclass(frozen=True, eq=False)
class Lent:
    """What a dispatcher reads from another GPU's measurements (measurements.table_for): the shape families
    whose model is fitted on the twin's cells alone (two GPUs' times on one plane would mix their speeds),
    those cells, and this device's own cells of those families, which answer for themselves only."""
    twin: DeviceInfo
    families: frozenset[tuple[Any, ...]]
    cells: frozenset[AttentionProblem]
    own: dict[AttentionProblem, dict[str, Timing]] = field(default_factory=dict, compare=False, hash=False)
    own_at: dict[AttentionProblem, AttentionProblem] = field(default_factory=dict, compare=False, hash=False)
    page_sizes: frozenset[int] = frozenset()

    def note(self, p: AttentionProblem, measured: bool) -> str:
        """What a decision's reason adds where it rests on the twin's measurements ("" where it does not):
        `measured`, one from cell p's timings; else one predicted for cell p, whose family may be lent, or
        whose shape at another page size may be a lent cell (the model's page-size estimator reads it)."""
        same = f" (same SM{self.twin.sm} and {self.twin.sm_count} SMs"
        lent = p in self.cells if measured else p.family() in self.families
        if lent:
            return f", on {self.twin.name}{same}; this shape family is too little measured on this device)"
        if not measured and any(replace(p, page_size=s) in self.cells for s in self.page_sizes - {p.page_size}):
            return f", with page-size ratios from {self.twin.name}{same})"
        return ""


class Table:
    """Measurements of one device and timing mode, by cell and by family (everything but the sizes)."""

    def __init__(self) -> None:
        self.by_cell: dict[AttentionProblem, dict[str, Timing]] = {}
        self.by_family: dict[tuple[Any, ...], list[AttentionProblem]] = {}
        self.measured_at: dict[AttentionProblem, AttentionProblem] = {}   # cell -> a problem measured in it
        self.measured: set[AttentionProblem] = set()    # every problem measured, as measured (from_rows)
        self.alone: set[AttentionProblem] = set()       # cells whose every problem was measured alone (schema 6)
        self.page_sizes: set[int] = set()
        self.lent: Lent | None = None     # what of it another GPU measured (measurements.table_for)

    @classmethod
    def from_rows(cls, rows: Iterable[Any]) -> Table:          # sqlite3.Row or dict rows of measurements
        """Rows of ok measurements, oldest environment first: a later one overrides an earlier one.
        Several measured problems may share a cell: see one_cell for how they are put on one scale."""
        rows = list(rows)
        problems = [problem_of(r) for r in rows]
        exact: dict[AttentionProblem, dict[AttentionProblem, dict[str, Timing]]] = {}
        for p, timings in measured_problems(rows, problems).items():
            exact.setdefault(p.cell(), {})[p] = timings
        t = cls()
        t.measured = {p for measured in exact.values() for p in measured}
        alone = [measured_alone(r) for r in rows]
        if any(alone):                            # a cell a grid measured too is the grid's
            lone = {p for p, a in zip(problems, alone) if a} - {p for p, a in zip(problems, alone) if not a}
            t.alone = {cell for cell, measured in exact.items() if lone.issuperset(measured)}
        for cell, measured in exact.items():
            for timing in one_cell(cell, measured):
                t.add(cell, timing)
            t.measured_at[cell] = cell if cell in measured else max(measured, key=lambda m: len(measured[m]))
        return t

    def add(self, cell: AttentionProblem, timing: Timing) -> None:
        if cell not in self.by_cell:
            self.by_cell[cell] = {}
            self.by_family.setdefault(cell.family(), []).append(cell)
        self.by_cell[cell][timing.pipeline.id] = timing
        self.page_sizes.add(cell.page_size)

    def __len__(self) -> int:
        return len(self.by_cell)

    def timings(self, cell: AttentionProblem) -> list[Timing]:
        return list(self.by_cell.get(cell, {}).values())

    def own_timings(self, cell: AttentionProblem) -> list[Timing]:
        """This device's own timings of a cell in a family lent from a twin ([]: none, or nothing lent)."""
        return list(self.lent.own.get(cell, {}).values()) if self.lent else []

    def subset(self, cells: Iterable[AttentionProblem]) -> Table:
        """The same measurements, at `cells` only (a model fitted on part of a grid)."""
        t = Table()
        for c in cells:
            for x in self.timings(c):
                t.add(c, x)
            if c in self.measured_at:
                t.measured_at[c] = self.measured_at[c]
            if c in self.alone:
                t.alone.add(c)
        return t


def measured_alone(row: Any) -> bool:
    """Whether a measurement row was of a shape measured as itself (schema 6's `alone`), not a sweep grid's point."""
    return "alone" in row.keys() and bool(row["alone"])


def problem_of(row: Any) -> AttentionProblem:
    """The problem a store row (measurements, winners or misses; sqlite3.Row or dict) was recorded for: the
    columns it has (a database from before max_kv_len has uniform batches only) and stored_balance."""
    keys = row.keys()
    return AttentionProblem(**{f: row[f] for f in FIELDS if f in keys and f != "kv_balance"},
                            kv_balance=stored_balance(row))


def stored_balance(row: Any) -> float:
    """A row's kv_balance: its own, else (a database from before kv_balance) its lengths' where it was not
    laid out canonically, else 0 (canonical)."""
    keys = row.keys()
    if "kv_balance" in keys and row["kv_balance"] is not None:
        return float(row["kv_balance"])
    if "lengths" in keys and row["lengths"]:      # the lengths' own, clamped to the range of the row's sizes
        return stored(balance_of(json.loads(row["lengths"])),
                      *bounds(row["batch_size"], row["kv_len"], row["max_kv_len"], row["q_len"]))
    return 0.0


def measured_problems(rows: Iterable[Any], problems: Iterable[AttentionProblem] | None = None
                      ) -> dict[AttentionProblem, dict[str, Timing]]:
    """Each problem measured, exactly as measured, with its timings by pipeline (a later row wins); `problems`:
    the rows' problems (problem_of), where the caller has them."""
    out: dict[AttentionProblem, dict[str, Timing]] = {}
    rows = list(rows)
    for r, p in zip(rows, problems if problems is not None else map(problem_of, rows)):
        pipe = Pipeline.from_row(r)
        out.setdefault(p, {})[pipe.id] = Timing(pipe, r["median_us"], r["spread_us"] or 0.0, r["relerr"])
    return out


def ratios(measured: dict[str, Timing]) -> dict[str, float]:
    """Each pipeline's time over the fastest measured in one cell."""
    best = min(t.median_us for t in measured.values())
    return {pid: t.median_us / best for pid, t in measured.items()}
