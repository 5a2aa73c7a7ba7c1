"""Why a decision, in full: every pipeline the problem could run with the time the decision compared
(measured at its cell, or predicted at its sizes), why any was passed over, and each kernel that cannot
serve the problem at all. Off the hot path: for `tuner decide --explain`, GET /v1/decision?explain=true
and a reader wondering why FA3 lost."""
from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Protocol

from .decision import Decision
from .device import DeviceInfo
from .pipeline import candidates
from .policy import max_relerr as relerr_budget
from .problem import AttentionProblem
from .registry import KernelSpec, ineligible_kernels
from .rules import rule_pick
from .table import Timing, rank


class Deciding(Protocol):
    """What of a Dispatcher (dispatcher/dispatch.py, which imports this module) an explanation reads."""
    registry: dict[str, KernelSpec]
    device: DeviceInfo
    rule: str
    max_relerr: float | None
    learned: bool
    decided: Any

    def choose(self, problem: AttentionProblem) -> Decision: ...

    def plan_refusals(self, kernel: str, tactic: Any, problem: AttentionProblem) -> list[str]: ...


@dataclass(frozen=True, slots=True)
class Considered:
    pipeline: str
    us: float | None          # the time the decision compared; None where there is none
    relerr: float | None
    note: str                 # "chosen", why it was passed over, or ""
    rule: bool = False        # the built-in rule's pick


@dataclass(frozen=True)
class Explanation:
    decision: Decision
    timings: str                              # where the times come from: measured at / predicted at / none
    considered: tuple[Considered, ...]        # fastest first; those without a time last
    ineligible: dict[str, list[str]]          # kernel -> why it cannot serve the problem
    rule: str                                 # the built-in rule the decision falls back to and keeps within noise

    def to_dict(self) -> dict[str, Any]:
        return {"timings": self.timings, "considered": [asdict(c) for c in self.considered],
                "ineligible": self.ineligible, "rule": self.rule}


def explain(d: Deciding, problem: AttentionProblem) -> Explanation:
    """The decision `d.choose(problem)` with what it was chosen from (see the module's docstring)."""
    dec = d.choose(problem)
    cell = problem.cell()
    cands = candidates(d.registry, cell, d.device)
    budget = relerr_budget(cell.kv_dtype, cell.out_dtype, d.max_relerr)
    timings, basis = _compared(d, cell, {c.id for c in cands}, budget)
    pick, _ = rule_pick(d.rule, cell, d.device, d.registry, cands)
    rows = []
    for c in cands:
        t = timings.get(c.id)
        rows.append(Considered(c.id, t.median_us if t else None, t.relerr if t else None,
                               _note(d, c.id, c.kernel, c.tactic, t, dec, problem, budget, basis),
                               pick is not None and pick.id == c.id))
    rows.sort(key=lambda r: (r.us is None, r.us or 0.0, r.pipeline))
    return Explanation(dec, basis, tuple(rows), ineligible_kernels(d.registry, cell, d.device), d.rule)


def _compared(d: Deciding, cell: AttentionProblem, allowed: set[str], budget: float
              ) -> tuple[dict[str, Timing], str]:
    """The timings the decision ranked, in Dispatcher._decide's order: the cell's measurements, else
    the model's prediction at the cell's sizes, else the nearest measured shape's."""
    table, model = d.decided.table, d.decided.model
    here = table.own_timings(cell) or table.timings(cell)
    if rank(here, budget, None, allowed) is not None:
        at = table.measured_at.get(cell, cell)
        return {t.pipeline.id: t for t in here}, f"measured at {at.sizes()}"
    if d.learned:
        predicted = model.predict(cell)
        if rank(predicted, budget, None, allowed) is not None:
            return {t.pipeline.id: t for t in predicted}, f"predicted at {cell.sizes()}"
    for near in model.neighbours(cell):
        timed = table.timings(near)
        if rank(timed, budget, None, allowed) is not None:
            return {t.pipeline.id: t for t in timed}, f"measured at the nearest shape, {near.sizes()}"
    return {}, "none: no measurement or prediction for this problem; the rule decides"


def _note(d: Deciding, pid: str, kernel: str, tactic: Any, t: Timing | None, dec: Decision,
          problem: AttentionProblem, budget: float, basis: str) -> str:
    if pid == dec.pipeline:
        return "chosen"
    refused = d.plan_refusals(kernel, tactic, problem)
    if refused:
        return f"left out: {refused[0]}"
    if t is None:
        return ("not measured in this cell" if basis.startswith("measured") else
                "no prediction: never measured near" if basis.startswith("predicted") else "")
    if t.relerr is not None and t.relerr > budget:
        return f"over the {budget:g} relative-error budget ({t.relerr:.3g})"
    return ""
