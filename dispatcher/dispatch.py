"""Dispatcher.choose(problem) -> Decision, from a table loaded once; no I/O on the hot path."""
from __future__ import annotations

import contextlib
import dataclasses
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import store
from .cells import CELLS_PER_OCTAVE
from .decision import Decision, Source
from .device import KNOWN, DeviceInfo, describe
from .explain import Compared, Explanation, explanation
from .measurements import borrowing, held_elsewhere, read_rows, read_table, table_for  # noqa: F401 (their home was here)
from .pipeline import Pipeline, candidates
from .policy import max_relerr as relerr_budget
from .predictor import FittedModel, Predictor, PredictorConfig
from .problem import AttentionProblem
from .registry import KernelSpec, ineligible_kernels, load_registry, tactic_reasons
from .resolve import LOCAL, TimingMode, default_timing_mode, device_of, is_local, resolve_device  # noqa: F401 (their home was here)
from .rules import DEFAULT_RULE, RULES, rule_pick
from .schema import StoreError
from .table import KEEP_RULE_SPREADS, Lent, Ranking, Table, Timing, rank

CACHE_LIMIT = 65536   # distinct buckets remembered; bounded so hostile traffic cannot grow memory
MISS_LIMIT = 4096     # distinct missed cells counted between flushes
REDECIDE_S = 1.0          # a reload's time for deciding the asked cells again before its swap (~4 ms a cell)

Hit = tuple[Decision, AttentionProblem]     # a decision and the cell it was made for


@dataclass(eq=False)
class Decided:
    """One table, the model fitted to it and the decisions made from them: swapped as one value, so a
    choose() sees the old or the new table's decisions, never a mix. By problem as asked, by cell
    (AttentionProblem.cell_key), and by (cell, pipelines refused by the asked problem's plan)."""
    table: Table
    model: FittedModel
    # a problem given by its requests' lengths is asked with them: whether a plan fits may depend on them
    asked: dict[AttentionProblem | tuple[AttentionProblem, tuple[int, ...]], Hit] = field(default_factory=dict)
    cells: dict[tuple[Any, ...], Hit] = field(default_factory=dict)
    refused: dict[tuple[Any, ...], Hit] = field(default_factory=dict)


class Dispatcher:
    def __init__(self, table: Table, device: DeviceInfo, registry: dict[str, KernelSpec] | None = None,
                 rule: str = DEFAULT_RULE, max_relerr: float | None = None, timing_mode: str = "",
                 learned: bool = True, predictor: PredictorConfig | None = None):
        if rule not in RULES:
            raise ValueError(f"rule {rule!r} is unknown; use one of {', '.join(RULES)}")
        self.device, self.rule = device, rule
        self.predictor = Predictor(predictor)
        self.registry = registry or load_registry()
        self.decided = Decided(table, self.predictor.fit(table, device, self.registry))
        relerr_budget("bf16", "bf16", max_relerr)     # a bad budget or $SWITCHYARD_MAX_RELERR fails here
        self.max_relerr = max_relerr
        self.timing_mode = timing_mode
        self.learned = learned        # False: an unmeasured cell takes the nearest measured one
        self.misses: dict[AttentionProblem, int] = {}          # cells answered without a measurement
        self.db: Path | None = None                        # set by load(); used by refresh and flush
        self.elsewhere: tuple[str, ...] = ()               # set by load(): what the db holds, where none is this
        self.rule_only = False                             # set by rule_only(): no database at all
        self.borrow = False                                # set by load(): whether a refresh may read a twin GPU

    def choose(self, problem: AttentionProblem) -> Decision:
        """The decision for a problem: a dict lookup once asked before, two once its cell has been
        decided. No I/O, no locks, no tensors, no device calls: safe inside CUDA-graph capture."""
        decided = self.decided
        key = problem if problem.seq_lens is None else (problem, problem.seq_lens)
        hit = decided.asked.get(key)
        if hit is None:
            hit = self._first_decision(decided, problem)
            if len(decided.asked) >= CACHE_LIMIT:     # bounded: hostile traffic cannot grow memory,
                decided.asked = {}                    # and a full cache is not re-decided per call
            decided.asked[key] = hit
        dec, cell = hit
        if dec.source != "measured":
            # by the cell's own object (an identity match, no comparison); a plain dict increment
            # under the GIL, no lock: concurrent increments may lose a count
            m = self.misses
            n = m.get(cell)
            if n is not None:
                m[cell] = n + 1
            elif len(m) < MISS_LIMIT:
                m[cell] = 1
        return dec

    def _first_decision(self, decided: Decided, problem: AttentionProblem) -> Hit:
        hit = self._cell_decision(decided, problem)
        fastest = hit[0]
        why = self._refusals(fastest.kernel, fastest.tactic, problem)
        if why:                                     # this problem's plan would be refused
            dec, cell = self._without_refused(decided, problem, hit[1])
            # said for this problem (whether its lengths were given), not for the first one of its cell
            exactly = ("; seq_lens would count a mixed batch's chunks exactly" if problem.seq_lens is None
                       and problem.max_kv_len != problem.kv_len else "")
            took = f" {fastest.expected_us:.1f} us" if fastest.expected_us else ""
            hit = (dataclasses.replace(dec, reason=f"{dec.reason}; the cell's fastest, {fastest.pipeline}{took}, "
                                                   f"left out: {why[0]}{exactly}"), cell)
        return hit

    def _cell_decision(self, decided: Decided, problem: AttentionProblem) -> Hit:
        key = problem.cell_key()
        hit = decided.cells.get(key)
        if hit is None:
            cell = problem.cell()
            hit = (self._decide(decided, cell, problem), cell)
            if len(decided.cells) >= CACHE_LIMIT:
                decided.cells = {}
            decided.cells[key] = hit
        return hit

    def explain(self, problem: AttentionProblem) -> Explanation:
        """choose(problem)'s decision with what it ranked (dispatcher/explain.py), from one table: every
        pipeline the problem could run, its time and why it lost; each kernel that cannot serve it."""
        decided = self.decided
        fastest, cell = self._cell_decision(decided, problem)
        dec = self._first_decision(decided, problem)[0]
        left_out = self._left_out(cell, problem)
        refused = frozenset(left_out) if fastest.pipeline in left_out else frozenset()   # as _first_decision
        compared = self._compare(decided, cell, problem, refused)
        return explanation(dec, compared, candidates(self.registry, cell, self.device), left_out,
                           ineligible_kernels(self.registry, cell, self.device), self.rule)

    def take_misses(self) -> dict[AttentionProblem, tuple[str, int]]:
        """The counts since the last call, by cell with the source that answered them."""
        taken, self.misses = self.misses, {}
        decided = self.decided
        return {c: (self._cell_decision(decided, c)[0].source, n) for c, n in taken.items()}

    def cached(self) -> int:
        """Decisions held in the caches (each is emptied when it reaches CACHE_LIMIT)."""
        d = self.decided
        return len(d.asked) + len(d.cells) + len(d.refused)

    @property
    def table(self) -> Table:
        return self.decided.table

    @property
    def model(self) -> FittedModel:
        return self.decided.model

    @property
    def lent(self) -> Lent | None:
        """What of the table another GPU measured (dispatcher.measurements.table_for), or None."""
        return self.decided.table.lent

    def swap_table(self, table: Table) -> None:
        """Replace the table. The model is fitted to it and the problems asked so far are decided from it
        first, here, cell by cell (those holding the most distinct problems first, then the earliest asked),
        for up to REDECIDE_S, so that the caller's next choose() of them stays a lookup; then one assignment
        swaps it all (Decided). The choose() calls themselves are not counted: that would cost the hot path."""
        new = Decided(table, self.predictor.fit(table, self.device, self.registry))
        by_cell: dict[AttentionProblem, list[Any]] = {}
        for key, (_, cell) in list(self.decided.asked.items()):
            by_cell.setdefault(cell, []).append(key)
        end = time.perf_counter() + REDECIDE_S
        for keys in sorted(by_cell.values(), key=len, reverse=True):      # stable: the earliest asked first
            for key in keys:
                with contextlib.suppress(Exception):    # its next choose() decides it, and raises what it raises
                    new.asked[key] = self._first_decision(new, key[0] if isinstance(key, tuple) else key)
            if time.perf_counter() > end:
                break
        self.decided = new

    # -- off the fast path: once per cell ----------------------------------------------
    def _refusals(self, kernel: str, tactic: Any, problem: AttentionProblem) -> list[str]:
        """Why `problem` cannot plan `kernel` with `tactic` (registry.tactic_reasons); empty where it can."""
        spec = self.registry.get(kernel)
        return tactic_reasons(spec, dict(tactic), problem, self.device) if spec and tactic else []

    def _left_out(self, cell: AttentionProblem, problem: AttentionProblem) -> dict[str, str]:
        """The cell's pipelines whose tactic `problem` cannot plan, each with the first reason."""
        return {c.id: why[0] for c in candidates(self.registry, cell, self.device)
                if (why := self._refusals(c.kernel, c.tactic, problem))}

    def _without_refused(self, decided: Decided, problem: AttentionProblem, cell: AttentionProblem) -> Hit:
        """The cell's decision among the pipelines whose tactic `problem` can plan (registry.tactic_reasons),
        decided once per cell and set of refused pipelines."""
        refused = frozenset(self._left_out(cell, problem))
        key = (problem.cell_key(), refused)
        hit = decided.refused.get(key)
        if hit is None:
            hit = (self._decide(decided, cell, problem, refused), cell)
            if len(decided.refused) >= CACHE_LIMIT:
                decided.refused = {}
            decided.refused[key] = hit
        return hit

    def _decide(self, decided: Decided, p: AttentionProblem, asked: AttentionProblem | None = None,
                refused: frozenset[str] = frozenset()) -> Decision:
        """The decision for cell `p` (AttentionProblem.cell); `asked`, the problem as the caller gave
        it, is named in messages; `refused`: pipelines left out (tactics `asked` cannot plan)."""
        c = self._compare(decided, p, asked, refused)
        if c.ranking is None:
            return self._decision(c.rule_pick, None, None, "rule", c.where)
        return self._from_ranking(c.ranking, c.source, c.budget, c.where)

    def _compare(self, decided: Decided, p: AttentionProblem, asked: AttentionProblem | None = None,
                 refused: frozenset[str] = frozenset()) -> Compared:
        """What the decision for cell `p` ranks: the cell's measurements, else the model's prediction there,
        else the nearest measured shape's; with none of them, the rule's pick and why."""
        cands = [c for c in candidates(self.registry, p, self.device) if c.id not in refused]
        pick, rule_notes = rule_pick(self.rule, p, self.device, self.registry, cands)
        if pick is None:
            raise LookupError(f"no kernel can serve {(asked or p).describe()} on {self.device.name}: "
                              + "; ".join(f"{k}: {', '.join(r)}" for k, r in
                                          ineligible_kernels(self.registry, p, self.device).items()))
        allowed = {c.id for c in cands}
        budget = relerr_budget(p.kv_dtype, p.out_dtype, self.max_relerr)
        table, model = decided.table, decided.model
        lent = table.lent.note if table.lent else (lambda cell, measured: "")
        mine = table.own_timings(p)                 # this device's own cell in a lent family
        here = mine or table.timings(p)
        seen = Compared(here, rank(here, budget, pick.id, allowed), "measured", "", budget, pick)
        if seen.ranking is not None:
            at = (table.lent.own_at if mine and table.lent else table.measured_at).get(p, p)
            # measured on another GPU is not measured here: `measured` stays a promise about this device
            on = "" if mine else lent(p, True)
            return dataclasses.replace(seen, source="learned" if on else "measured",
                                       where=f"measured at {at.sizes()}{on}")
        if self.learned:
            rough = model.uses_ragged_prior(p)
            factor = keep_factor(model, p, rough)
            predicted = model.predict(p)
            ranking = rank(predicted, budget, pick.id, allowed, KEEP_RULE_SPREADS * factor)
            if ranking is not None:
                where = (f"predicted at its cell, {p.sizes()}, from uniform batches at the mean, plus the longest "
                         "request alone where a kernel's time follows it" if rough
                         else f"predicted at its cell, {p.sizes()}, from measured neighbours"
                         + (f" (a batch size never measured: the rule stands within {factor:g}x the keep margin)"
                            if factor != 1 else ""))
                if rough and (n := model.mixed_residuals(p, ranking.winner.pipeline.id)):
                    where += f", scaled by its error at the {n} nearest measured mixed batches"
                elif n := model.alone_corrections(p):
                    where += f", scaled by the error at the {f'{n} nearest shapes' if n > 1 else 'nearest shape'} " \
                             "measured alone"
                where += beyond_measured(table, p) + lent(p, False)
                return Compared(predicted, ranking, "learned", where, budget, pick)
        for near in model.neighbours(p):
            timed = table.timings(near)
            ranking = rank(timed, budget, pick.id, allowed)
            if ranking is not None:
                where = f"nearest measured shape {near.sizes()}{beyond_measured(table, p)}{lent(near, True)}"
                return Compared(timed, ranking, "nearest", where, budget, pick)
        why = self._rule_reason(p, table, here, bool(mine), lent, budget, pick)
        if rule_notes:
            why += " (passed over: " + "; ".join(rule_notes) + ")"
        return dataclasses.replace(seen, source="rule", where=why)

    def _rule_reason(self, p: AttentionProblem, table: Table, here: list[Timing], mine: bool, lent: Any,
                     budget: float, pick: Pipeline) -> str:
        """Why the rule decides: nothing accurate measured, no database, or none of this device's."""
        over = sorted(t.pipeline.id for t in here if t.relerr is not None and t.relerr > budget)
        if over:
            where = "here" if mine else (lent(p, True)[2:] or "here")
            return (f"every pipeline measured {where} is over the {budget:g} relative-error budget "
                    f"({', '.join(over)}); rule {self.rule} picks {pick.id}")
        if self.db is not None and not self.db.exists():
            return f"no database {self.db.name!r} (see --db / $SWITCHYARD_DB); rule {self.rule} picks {pick.id}"
        if self.rule_only:                            # `tuner decide --db none`
            return f"no database (--db none, rule_only): rule {self.rule} picks {pick.id}"
        if not table and self.elsewhere:              # the likelier mistake: the host asked, another GPU's db
            return (f"{self.db.name if self.db else 'the database'} holds no measurements of {self.device.name} "
                    f"timed in {self.timing_mode} mode, only of {', '.join(self.elsewhere)} (name that device); "
                    f"rule {self.rule} picks {pick.id}")
        return f"no measurement of this shape family on {self.device.name}; rule {self.rule} picks {pick.id}"

    def _from_ranking(self, r: Ranking, source: Source, budget: float, where: str) -> Decision:
        w = r.winner
        why = f"{where}: {w.pipeline.id} {w.median_us:.1f} us"
        if r.passed_rule is not None:
            why += (f", {r.passed_rule.median_us / w.median_us:.2f}x faster than {self.rule}'s choice "
                    f"{r.passed_rule.pipeline.id} {r.passed_rule.median_us:.1f} us (within the measured spread, "
                    f"beyond the keep margin)")
        if r.runner_up is not None and r.runner_up is not r.passed_rule:
            rel = "tie within noise with" if r.tie else f"{r.runner_up.median_us / w.median_us:.2f}x faster than"
            why += f", {rel} {r.runner_up.pipeline.id} {r.runner_up.median_us:.1f} us"
            if r.kept_rule:
                why += f" (kept {self.rule}'s choice)"
        if r.over_budget:
            why += f"; over the {budget:g} relative-error budget: {', '.join(r.over_budget)}"
        return self._decision(w.pipeline, w.median_us, w.relerr, source, why)

    def _decision(self, pipe: Pipeline, us: float | None, relerr: float | None, source: Source,
                  why: str) -> Decision:
        return Decision(kernel=pipe.kernel, q_dtype=pipe.q_dtype, fused_out_quant=pipe.fused_out_quant,
                        expected_us=us, source=source, device=self.device.name, reason=why,
                        pipeline=pipe.id, tactic=pipe.tactic, q_quant=pipe.q_quant,
                        out_quant=pipe.out_quant, relerr=relerr)


def beyond_measured(table: Table, p: AttentionProblem) -> str:
    """A note where p's sizes lie outside those its family was measured at (by more than the decision lattice's
    step), so an estimate there reads as the extrapolation it is; "" inside."""
    cells = table.by_family.get(p.family(), [])
    out = []
    for name in ("batch_size", "q_len", "kv_len", "max_kv_len"):
        if name == "max_kv_len" and p.max_kv_len == p.kv_len:
            continue
        sizes = [getattr(c, name) for c in cells]
        lo, hi, v = min(sizes, default=0), max(sizes, default=0), getattr(p, name)
        if hi and v > hi * LATTICE_STEP:
            out.append(f"{name} {v} over the {hi} measured at most")
        elif hi and v * LATTICE_STEP < lo and name != "max_kv_len":      # kv_len's note says it
            out.append(f"{name} {v} under the {lo} measured at least")
    return f" (extrapolated: {'; '.join(out)})" if out else ""


LATTICE_STEP = 2 ** (1 / CELLS_PER_OCTAVE)     # a size within a cell of the measured ones is among them


def rule_only(device: str | None = None, *, rule: str = DEFAULT_RULE,
              registry: dict[str, KernelSpec] | None = None) -> Dispatcher:
    """A dispatcher with no measurements: every decision is the rule's. `device` is a local device
    (auto, cpu, cuda[:N]) or a GPU whose description Switchyard knows (dispatcher.device.KNOWN)."""
    spec = device or "auto"
    if spec in KNOWN:
        dev = KNOWN[spec]
    elif spec.lower() in LOCAL or spec.lower().startswith("cuda:"):
        dev = describe(spec)
    else:
        raise ValueError(f"device {spec!r} is unknown without a database; name a local device (auto, cpu, "
                         f"cuda:N) or one of {', '.join(KNOWN)}")
    d = Dispatcher(Table(), dev, registry, rule, None, default_timing_mode(dev))
    d.rule_only = True
    return d


def keep_factor(model: FittedModel, p: AttentionProblem, rough: bool) -> float:
    """How many usual keep margins the rule's choice stands within: more where the predicted times are
    rough estimates (a mixed batch read from uniform ones; with prefill_between_keep, a prefill batch
    size never measured)."""
    c = model.config
    if rough:
        return c.ragged_keep
    if c.prefill_between_keep and p.phase == "prefill" and model.batch_rows(p) is not None:
        return c.prefill_between_keep
    return 1.0


def load(db: store.DbPath = None, device: str | None = None, *, rule: str = DEFAULT_RULE,
         timing_mode: str | None = None, max_relerr: float | None = None,
         registry: dict[str, KernelSpec] | None = None, predictor: PredictorConfig | None = None,
         missing_ok: bool = False, borrow: bool | None = None) -> Dispatcher:
    """Load the decision table for `device` from the database once (see Dispatcher.choose). A path that
    names no file is an error (a mistyped one would quietly decide by rule alone); with `missing_ok` and
    this host's device (auto, cpu, cuda[:N]; a recorded name needs the file), the rule decides, and
    dispatcher.live.keep_fresh loads the file once it appears. With `borrow` (default: $SWITCHYARD_BORROW,
    else on), a shape family `device` has measured too few cells of is read from a GPU of the same compute
    capability and SM count as well (measurements.table_for), and decisions from its cells say so and are
    never `measured`."""
    if not missing_ok and not store.default_path(db).exists():
        raise StoreError(f"{store.default_path(db)}: no such database; give the path of a heuristics.db (`tuner "
                         "sweep` makes one), or pass missing_ok=True to decide by the built-in rule until it exists")
    dev = device_of(db, device)
    mode = timing_mode or default_timing_mode(dev)
    borrow = borrowing() if borrow is None else borrow
    table = table_for(db, dev, mode, borrow, (predictor or PredictorConfig()).k_nearest)
    d = Dispatcher(table, dev, registry, rule, max_relerr, mode, predictor=predictor)
    d.db = store.default_path(db)          # where it was read from: refresh and miss flushes use it
    d.elsewhere = held_elsewhere(db, dev, mode) if not d.table else ()
    d.borrow = borrow
    return d
