"""Why a decision, in full (Dispatcher.explain): every pipeline the problem could run with the time the
decision ranked (measured at its cell, predicted at its cell, or the nearest measured shape's), why
each one not chosen lost, and each kernel that cannot serve the problem at all. Off the hot path: for
`tuner decide --explain`, GET /v1/decision?explain=true and a reader wondering why FA3 lost."""
from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from .decision import Decision, Source
from .pipeline import Pipeline
from .table import Ranking, Timing


@dataclass(frozen=True)
class Compared:
    """What one decision ranked (Dispatcher._compare): the timings, their ranking (None: the rule decides),
    where they come from, in the words of the decision's reason."""
    timings: list[Timing]
    ranking: Ranking | None
    source: Source
    where: str
    budget: float                 # the relative-error budget
    rule_pick: Pipeline


@dataclass(frozen=True, slots=True)
class Considered:
    pipeline: str
    us: float | None          # the time the decision ranked; None where it had none
    relerr: float | None
    note: str                 # "chosen", why it lost, or ""
    rule_pick: bool = False   # the built-in rule's pick


@dataclass(frozen=True)
class Explanation:
    decision: Decision
    timings: str                              # where the times come from (or why the rule decides)
    considered: tuple[Considered, ...]        # fastest first; those without a time last
    ineligible: dict[str, list[str]]          # kernel -> why it cannot serve the problem
    rule: str                                 # the built-in rule the decision falls back to and keeps within noise

    def to_dict(self) -> dict[str, Any]:
        return {"timings": self.timings, "considered": [asdict(c) for c in self.considered],
                "ineligible": self.ineligible, "rule": self.rule}


UNTIMED = {"measured": "not measured in this cell", "learned": "no prediction: never measured near",
           "nearest": "not measured at the nearest shape", "rule": ""}


def explanation(dec: Decision, compared: Compared, pipelines: list[Pipeline], left_out: dict[str, str],
                ineligible: dict[str, list[str]], rule: str) -> Explanation:
    """`dec` with a row for each of `pipelines` (those the problem's cell could run); `left_out`: why the
    asked problem cannot plan a pipeline, by id."""
    timed = {t.pipeline.id: t for t in compared.timings}
    rows = [Considered(p.id, t.median_us if (t := timed.get(p.id)) else None, t.relerr if t else None,
                       _note(p.id, t, dec, compared, left_out), p.id == compared.rule_pick.id) for p in pipelines]
    rows.sort(key=lambda r: (r.us is None, r.us or 0.0, r.pipeline))
    return Explanation(dec, compared.where, tuple(rows), ineligible, rule)


def _note(pid: str, t: Timing | None, dec: Decision, c: Compared, left_out: dict[str, str]) -> str:
    r = c.ranking
    if pid == dec.pipeline:
        return "chosen" + ("; the rule's pick, kept within the keep margin" if r and r.kept_rule else "")
    if pid in left_out:
        return f"left out: {left_out[pid]}"
    if t is None:
        return UNTIMED[c.source]
    if t.relerr is not None and t.relerr > c.budget:
        return f"over the {c.budget:g} relative-error budget ({t.relerr:.3g})"
    if r and r.kept_rule and dec.expected_us is not None and t.median_us < dec.expected_us:
        return "faster, within the keep margin of the rule's pick, which stands"
    if r and r.passed_rule is t:
        return "the rule's pick: within noise of the chosen, beyond the keep margin"
    return ""
