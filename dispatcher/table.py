"""The in-memory decision table: measured bucket -> nearest measured neighbour -> rule."""
from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Any

from .model import predict
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


def noise_us(a: Timing, b: Timing) -> float:
    """Two timings closer than this are a tie: the larger measured spread, at least 0.5%."""
    return max(a.spread_us, b.spread_us, 0.005 * min(a.median_us, b.median_us))


def rank(timings: Iterable[Timing], budget: float, prefer: str | None = None,
         allowed: set[str] | None = None) -> Ranking | None:
    """The winner among accurate timings: the fastest, except that `prefer` (the rule's pipeline)
    is kept when it is within noise of the fastest; ties otherwise go to the lower median, then id."""
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
    winner, tie, kept_rule = best, False, False
    if prefer and prefer != best.pipeline.id:
        kept = next((t for t in usable if t.pipeline.id == prefer), None)
        if kept is not None and kept.median_us - best.median_us <= noise_us(best, kept):
            winner, tie, kept_rule = kept, True, True
    others = [t for t in usable if t is not winner]
    runner = others[0] if others else None
    if runner is not None and not tie:
        tie = runner.median_us - winner.median_us <= noise_us(winner, runner)
    return Ranking(winner, runner, tie, tuple(sorted(over)), kept_rule)


def one_bucket(bucket: AttentionProblem, measured: dict[AttentionProblem, dict[str, Timing]]) -> list[Timing]:
    """One bucket's timings from the problems measured in it, comparable with each other: those of
    the grid point itself (else of the problem with the most pipelines), then each pipeline measured
    only at another problem, scaled by how the pipelines measured at both compare there. Unscaled,
    a tactic measured at batch 3 would race defaults measured at batch 4 (25% more work) and win."""
    order = sorted(measured, key=lambda p: (p != bucket, -len(measured[p])))
    out = dict(measured[order[0]])
    for p in order[1:]:
        shared = [pid for pid in measured[p] if pid in out]
        if not shared:
            continue            # nothing to put it on the bucket's scale with
        scale = math.exp(sum(math.log(out[pid].median_us / measured[p][pid].median_us) for pid in shared) / len(shared))
        for pid, t in measured[p].items():
            if pid not in out:
                out[pid] = Timing(t.pipeline, t.median_us * scale, t.spread_us * scale, t.relerr)
    return list(out.values())


SUPPORT_NEAR = 3     # nearest measured buckets a pipeline must mostly have run at to be predicted
# Paging moves the kernels' ranking little, so a pipeline's ratio to the fastest at the same sizes with
# another page size (its "twin") is blended in where it ranked the nearby shapes alike
# (benchmarks/results/h200-2026-12-04c/evaluate/).
TWIN_WEIGHT = 0.5
TWIN_AGREE = 0.1     # how closely the twins must have matched nearby (mean |log ratio difference|)
TWIN_CHECK = 6       # nearest measured buckets that check it
# Decode kernels re-split their work as batch x KV heads crosses the SM count: rankings jump between
# batch sizes and drift along KV, so one batch step counts as this many KV steps (.../evaluate/batch-step/).
DECODE_BATCH_STEP = 3.0
# Streaming a long cache costs a fixed time plus bytes over bandwidth: between two measured KV lengths
# of the same batch size each time is read off a straight line in KV (.../evaluate/kv-line/).
KV_LINE_FROM = 8192   # the shorter measured KV length: below it launch and split costs bend the line
KV_LINE_SPAN = 8      # the longer one at most this many times it


def _log_sizes(p: AttentionProblem) -> tuple[float, float, float]:
    step = DECODE_BATCH_STEP if p.phase == "decode" else 1.0
    return step * math.log2(p.batch_size), math.log2(p.q_len), math.log2(p.kv_len)


class Table:
    """Measurements of one device and timing mode, grouped by problem bucket and by family."""

    def __init__(self) -> None:
        self.by_bucket: dict[AttentionProblem, dict[str, Timing]] = {}
        self.by_family: dict[tuple[Any, ...], list[tuple[tuple[float, float, float], AttentionProblem]]] = {}
        self.page_sizes: set[int] = set()

    @classmethod
    def from_rows(cls, rows: Iterable[Any]) -> Table:          # sqlite3.Row or dict rows of measurements
        """Rows of ok measurements, oldest environment first: a later one overrides an earlier one.
        Several measured problems may share a bucket (a tactic search at batch 3 lands in the batch-4
        bucket): see one_bucket for how they are put on one scale."""
        exact: dict[AttentionProblem, dict[AttentionProblem, dict[str, Timing]]] = {}
        for r in rows:
            p = AttentionProblem(**{f: r[f] for f in FIELDS})
            pipe = Pipeline.from_row(r)
            exact.setdefault(p.bucket(), {}).setdefault(p, {})[pipe.id] = \
                Timing(pipe, r["median_us"], r["spread_us"] or 0.0, r["relerr"])
        t = cls()
        for bucket, measured in exact.items():
            for timing in one_bucket(bucket, measured):
                t.add(bucket, timing)
        return t

    def add(self, bucket: AttentionProblem, timing: Timing) -> None:
        if bucket not in self.by_bucket:
            self.by_bucket[bucket] = {}
            self.by_family.setdefault(bucket.family(), []).append((_log_sizes(bucket), bucket))
        self.by_bucket[bucket][timing.pipeline.id] = timing
        self.page_sizes.add(bucket.page_size)

    def __len__(self) -> int:
        return len(self.by_bucket)

    def timings(self, bucket: AttentionProblem) -> list[Timing]:
        return list(self.by_bucket.get(bucket, {}).values())

    def neighbours(self, p: AttentionProblem) -> list[AttentionProblem]:
        """Measured buckets of the same family, nearest first in log2(batch, q_len, kv_len)."""
        here = _log_sizes(p)
        pts = self.by_family.get(p.family(), [])
        return [b for _, b in sorted(pts, key=lambda x: (math.dist(x[0], here), x[0]))]

    def predicted(self, p: AttentionProblem) -> list[Timing]:
        """Each pipeline measured in this family, at p's sizes, as the local model predicts it.
        The spread is the fit's residual; the accuracy is the worst measured nearby."""
        fam = self.by_family.get(p.family(), [])
        ref = {b: min(t.median_us for t in self.by_bucket[b].values()) for _, b in fam}
        by_pipe: dict[str, list[tuple[tuple[float, float, float], Timing, float]]] = {}
        for x, b in fam:
            for pid, t in self.by_bucket[b].items():
                by_pipe.setdefault(pid, []).append((x, t, ref[b]))
        # only pipelines that ran at most of the nearest measured sizes: one that failed or was not
        # measured there would be a guess from far away (and might not run here either)
        close = self.neighbours(p)[:SUPPORT_NEAR]
        need = (len(close) + 1) // 2
        here, out = _log_sizes(p), []
        level = predict([(x, ref[b]) for x, b in fam], here)      # the fastest time, as sizes go
        if level is None:
            return []
        line = self._kv_line(p)
        level_us = min(line.values()) if line else level.us
        twins = self._twin_ratios(p)
        # (own, twins' ratios) at the nearest measured shapes: where the twins' ranking is checked
        twins_near = [(_ratios(self.by_bucket[b]), self._twin_ratios(b))
                      for b in self.neighbours(p)[:TWIN_CHECK]] if twins else []
        for pid, pts in by_pipe.items():
            if sum(pid in self.by_bucket[b] for b in close) < need:
                continue
            # a pipeline's time relative to the fastest varies slowly, and linearly in log sizes
            # around a crossover: fitting that ratio ranks pipelines better than fitting each time
            ratio = predict([(x, t.median_us / r) for x, t, r in pts], here, monotone=False)
            if ratio is None:
                continue
            near = sorted(pts, key=lambda xt: math.dist(xt[0], here))[: ratio.support]
            # within the ratios measured nearby: at the grid's edges a plane through them extrapolates,
            # and a swing there (a loser predicted ahead of every neighbour's winner) costs most
            seen = [t.median_us / r for _, t, r in near]
            mine = min(max(ratio.us, min(seen)), max(seen))
            if pid in line:
                mine = line[pid] / level_us      # measured at this batch size either side: no twin needed
            elif pid in twins and self._twins_agree(pid, twins_near):
                mine = math.exp((1 - TWIN_WEIGHT) * math.log(mine) + TWIN_WEIGHT * math.log(twins[pid]))
            us = level_us * max(mine, 1.0)
            errs = [t.relerr for _, t, _ in near if t.relerr is not None]
            # the switch margin is the measured noise nearby (relative spread of the runs the fit used);
            # the fit's own misfit is not noise a measurement would show
            rel = sorted(t.spread_us / t.median_us for _, t, _ in near)[len(near) // 2]
            out.append(Timing(pts[0][1].pipeline, us, us * rel, max(errs) if errs else None))
        return out

    def _kv_line(self, p: AttentionProblem) -> dict[str, float]:
        """In decode at long KV, each pipeline's time at p read off the straight line (in KV length)
        through its times at the nearest measured KV lengths either side, at p's batch size; {} where
        p is not so bracketed (see KV_LINE_FROM)."""
        if p.phase != "decode":
            return {}
        row = [b for _, b in self.by_family.get(p.family(), []) if b.batch_size == p.batch_size and b.q_len == p.q_len]
        lo = max((b for b in row if b.kv_len < p.kv_len), key=lambda b: b.kv_len, default=None)
        hi = min((b for b in row if b.kv_len > p.kv_len), key=lambda b: b.kv_len, default=None)
        if lo is None or hi is None or lo.kv_len < KV_LINE_FROM or hi.kv_len > KV_LINE_SPAN * lo.kv_len:
            return {}
        f = (p.kv_len - lo.kv_len) / (hi.kv_len - lo.kv_len)
        below, above = self.by_bucket[lo], self.by_bucket[hi]
        return {pid: t.median_us + f * (above[pid].median_us - t.median_us)
                for pid, t in below.items() if pid in above}

    def _twin_ratios(self, p: AttentionProblem) -> dict[str, float]:
        """Each pipeline's time over the fastest at p's sizes in the families that differ from p's
        only in page size, where measured (geometric mean over them)."""
        logs: dict[str, list[float]] = {}
        for page in self.page_sizes - {p.page_size}:
            measured = self.by_bucket.get(replace(p, page_size=page))
            for pid, r in (_ratios(measured) if measured else {}).items():
                logs.setdefault(pid, []).append(math.log(r))
        return {pid: math.exp(sum(v) / len(v)) for pid, v in logs.items()}

    @staticmethod
    def _twins_agree(pid: str, twins_near: list[tuple[dict[str, float], dict[str, float]]]) -> bool:
        """Whether the twins ranked `pid` as this family did at the nearest measured sizes (mean
        |log ratio difference| within TWIN_AGREE): where the page size does change the ranking
        (FP8 prefill, where FMHAv2 gains more at page 32), the twin is left out."""
        diffs = [abs(math.log(own[pid]) - math.log(twin[pid])) for own, twin in twins_near
                 if pid in own and pid in twin]
        return bool(diffs) and sum(diffs) / len(diffs) <= TWIN_AGREE


def _ratios(measured: dict[str, Timing]) -> dict[str, float]:
    """Each pipeline's time over the fastest measured in one bucket."""
    best = min(t.median_us for t in measured.values())
    return {pid: t.median_us / best for pid, t in measured.items()}
