"""The learned model: each pipeline's time at an unmeasured shape, from the measured table.

Settings live in one value (PredictorConfig, a JSON file for `tuner evaluate --predictor-config`);
`Predictor(config).fit(table, device)` gives a FittedModel whose estimators can be called alone:

- level(p):     the fastest pipeline's time, a local plane through the fastest measured times;
- plane(p):     each pipeline's time over the fastest, a local plane through those ratios, kept within
                the ratios measured nearby (a plane extrapolates at the grid's edge);
- twin(p):      the same ratios measured at p's sizes with another page size, where they ranked the
                nearest measured shapes as p's own family did;
- kv_line(p):   decode at long KV: each pipeline's time on the straight line in KV length through its
                times at the measured KV lengths either side, at p's batch size;
- between_rows(p): for a batch size never measured, each pipeline's time in the measured batch
                sizes either side (each within its own row, by the estimators above), in log time over log batch.
- split_rows(p): decode, a batch size never measured, kernels that split a batch by its size alone
                (`split_kv` in kernels.toml): the kernel's time in the measured batch sizes either side,
                interpolated in log time over log of the busiest SM's work (FP8 XQA runs batch 41 of 2
                KV heads as it runs batch 64: one CTA per request and head, one wave); for "resident"
                rules over log batch, but with a step where the busiest SM's load rises (a second CTA
                joins the first on some SM: BF16 XQA at batch 17 of 8 KV heads costs 1.4x batch 16).
- ragged_prior(p): a mixed batch: each pipeline from uniform batches by how its kernel plans one
                (`ragged` in kernels.toml), scaled by its error at measured mixed batches nearby
                (dispatcher/mixed_residual.py); the rule's choice stands within ragged_keep its margins.
- a family with shapes measured alone (Table.alone): the estimators read its grid, and those shapes
                scale the times near them by their error there (dispatcher/alone.py).

One rule combines them (FittedModel.predicted): ragged_prior's times (corrected) for a mixed batch; for a
uniform one, only the family's uniform cells are read; between_rows' times where it applies; else a
pipeline's time is split_rows' where it covers it, else kv_line's where kv_line covers it; else
level x its ratio, the ratio being plane's blended with twin's (weight twin_weight, in log space)
where the twin agrees, else plane's alone; never below level. predict(p) raises a uniform decode
batch's times to the dominated floor (dispatcher/floor.py); the estimators read one another without it.

Neighbours are found in feature space (features): log2 of the sizes, a decode batch step weighed
batch_step times a KV step, and hardware terms from the device's SM count, so that shapes either
side of a change in how the kernels split their work are farther apart. Pure Python; it runs once
per decided cell, never on choose()'s hot path."""
from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from .alone import AloneCorrections, alone_cells, grid_cells
from .cells import Q_TILE, q_tiles
from .device import DeviceInfo
from .estimates import log_between, scaled, slower, split_weight, summed
from .floor import DominatedFloor
from .mixed_residual import Residuals, modelled
from .model import fit_plane
from .pipeline import fixed_split, split_pages
from .predictor_config import PredictorConfig as PredictorConfig  # re-exported: its home before
from .problem import AttentionProblem
from .registry import KernelSpec, SplitRule, load_registry, planned_chunk
from .table import Table, Timing, ratios

Features = tuple[float, ...]
RISING = (True, True, True, True, False, True)     # per feature: does time rise with it (see features)
MEMO_LIMIT = 200_000      # predictions a model fitted with remember=True keeps (about 1.3 KB each)


def features(p: AttentionProblem, config: PredictorConfig, sm_count: int) -> Features:
    """Where a shape sits for the neighbour search and the local planes."""
    b, q, kv = math.log2(p.batch_size), math.log2(p.q_len), math.log2(p.kv_len)
    skew = config.skew_weight * math.log2(p.skew)
    if p.phase != "decode":
        return b, q, kv, skew, config.tile_weight * math.log2(q_tiles(p.q_len) * Q_TILE / p.q_len)
    ctas = math.log2(p.batch_size * p.num_kv_heads / sm_count) if sm_count else 0.0
    return (config.batch_step * b, q, kv, skew, config.split_weight * max(0.0, -ctas - 1.0),
            config.wave_weight * max(0.0, ctas - 1.0))


class Predictor:
    def __init__(self, config: PredictorConfig | None = None):
        self.config = config or PredictorConfig()

    def fit(self, table: Table, device: DeviceInfo | None,
            registry: dict[str, KernelSpec] | None = None, remember: bool = False) -> FittedModel:
        """The model fitted to `table`, which must not change afterwards; `device` gives the SM count the
        hardware features use (None: unknown, those features are left out); `registry` each kernel's
        ragged cost (default: the built-in kernels); `remember`: keep every prediction, for a caller that
        asks the same sizes many times (the adaptive search: benchmarks/results/search-memo/)."""
        registry = registry or load_registry()
        ragged = {k: s.ragged for k, s in registry.items()}
        cc = device.sm if device else 0
        splits = {k: {dt: r for dt, r in s.split_kv if r.applies_to(cc)} for k, s in registry.items()}
        splits = {k: rules for k, rules in splits.items() if rules}
        return FittedModel(table, self.config, device.sm_count if device else 0, ragged, splits, remember)


class FittedModel:
    """The model fitted to one table (the features of every measured cell, computed once)."""

    def __init__(self, table: Table, config: PredictorConfig, sm_count: int, ragged: dict[str, str] | None = None,
                 splits: dict[str, dict[str, SplitRule]] | None = None, remember: bool = False):
        self.table = table = modelled(table, config.mixed_residual_16bit_kv)
        self.config, self.sm_count, self.ragged, self.splits = config, sm_count, ragged or {}, splits or {}
        self._mixed = {fam for fam, cells in table.by_family.items() if any(c.skew > 1 for c in cells)}
        self._uniform: FittedModel | None = None      # mixed_residual_k: the model of the uniform cells alone
        if config.mixed_residual_k and self._mixed:
            self._uniform = FittedModel(table.subset([c for c in table.by_cell if c.skew == 1]), config, sm_count,
                                        ragged, splits, remember)
            self._residuals = Residuals(self._uniform.ragged_prior, lambda c: table.by_cell[c])
        # families the uniform model reads, mixed batches corrected (a family measured mixed only keeps its planes)
        self._corrected = {f for f in self._mixed if f in self._uniform.table.by_family} if self._uniform else set()
        self._memo: dict[tuple[AttentionProblem, bool], tuple[Timing, ...]] | None = {} if remember else None
        self._x: dict[AttentionProblem, Features] = {
            c: features(c, config, sm_count) for cells in table.by_family.values() for c in cells}
        self._floor = DominatedFloor(table)
        # alone_k: shapes measured alone are no input of the grid's estimators; they correct them near them
        self._alone: AloneCorrections | None = None
        if config.alone_k and (lone := alone_cells(table, self._corrected)):    # the uniform model has its own
            grid = FittedModel(table.subset(grid_cells(table, lone, self._corrected)), config, sm_count, ragged,
                               splits, remember)
            self._alone = AloneCorrections(grid, lone, table, self.x, config)

    def x(self, p: AttentionProblem) -> Features:
        got = self._x.get(p)
        return got if got is not None else features(p, self.config, self.sm_count)

    def neighbours(self, p: AttentionProblem) -> list[AttentionProblem]:
        """Measured cells of p's family, nearest first in feature space."""
        here = self.x(p)
        cells = self.table.by_family.get(p.family(), [])
        return sorted(cells, key=lambda c: (math.dist(self._x[c], here), self._x[c]))

    # -- the estimators ---------------------------------------------------------------------------
    def level(self, p: AttentionProblem) -> float | None:
        """The fastest pipeline's time at p."""
        fam = self.table.by_family.get(p.family(), [])
        pts = [(self._x[c], min(t.median_us for t in self.table.by_cell[c].values())) for c in fam]
        here = self.x(p)
        rising = RISING[: len(here)]               # the split term falls as the batch grows
        fit = fit_plane(pts, here, self.config.k_nearest, self.config.ridge, monotone=rising)
        return fit.us if fit else None

    def plane(self, p: AttentionProblem) -> dict[str, tuple[float, list[tuple[Timing, float]]]]:
        """Each pipeline's ratio to the fastest at p, with the measured (timing, ratio) pairs it used;
        only pipelines that ran at most of the nearest measured shapes."""
        fam = self.table.by_family.get(p.family(), [])
        here, cfg = self.x(p), self.config
        close = self.neighbours(p)[: cfg.support_near]
        need = (len(close) + 1) // 2
        by_pipe: dict[str, list[tuple[Features, Timing, float]]] = {}
        for c in fam:
            r = ratios(self.table.by_cell[c])
            for pid, t in self.table.by_cell[c].items():
                by_pipe.setdefault(pid, []).append((self._x[c], t, r[pid]))
        out = {}
        for pid, pts in by_pipe.items():
            if sum(pid in self.table.by_cell[c] for c in close) < need:
                continue            # one that failed or was not measured nearby: a guess from far away
            fit = fit_plane([(x, r) for x, _, r in pts], here, cfg.k_nearest, cfg.ridge, monotone=False)
            if fit is None:
                continue
            near = sorted(pts, key=lambda xt: math.dist(xt[0], here))[: fit.support]
            seen = [r for _, _, r in near]
            out[pid] = (min(max(fit.us, min(seen)), max(seen)), [(t, r) for _, t, r in near])
        return out

    def twin(self, p: AttentionProblem) -> dict[str, float]:
        """Each pipeline's ratio to the fastest at p's sizes in the families that differ from p's only
        in page size, where measured (geometric mean over them)."""
        logs: dict[str, list[float]] = {}
        for page in self.table.page_sizes - {p.page_size}:
            measured = self.table.by_cell.get(replace(p, page_size=page))
            for pid, r in (ratios(measured) if measured else {}).items():
                logs.setdefault(pid, []).append(math.log(r))
        return {pid: math.exp(sum(v) / len(v)) for pid, v in logs.items()}

    def twins_near(self, p: AttentionProblem) -> list[tuple[dict[str, float], dict[str, float]]]:
        """(own ratios, twins' ratios) at the nearest measured shapes: where the twins are checked."""
        return [(ratios(self.table.by_cell[c]), self.twin(c)) for c in self.neighbours(p)[: self.config.twin_check]]

    def twin_agrees(self, pid: str, near: list[tuple[dict[str, float], dict[str, float]]]) -> bool:
        """Whether the twins ranked `pid` as p's family did at the nearest measured shapes (`near`,
        from twins_near): where the page size changes the ranking (FP8 prefill), they are left out."""
        diffs = [abs(math.log(own[pid]) - math.log(twin[pid])) for own, twin in near if pid in own and pid in twin]
        return bool(diffs) and sum(diffs) / len(diffs) <= self.config.twin_agree

    def kv_line(self, p: AttentionProblem) -> dict[str, float]:
        """Decode at long KV: each pipeline's time off the line through its times at the measured KV
        lengths either side, at p's batch size; {} where p is not so bracketed."""
        if p.phase != "decode":
            return {}
        row = [c for c in self.table.by_family.get(p.family(), []) if c.batch_size == p.batch_size]
        lo = max((c for c in row if c.kv_len < p.kv_len), key=lambda c: c.kv_len, default=None)
        hi = min((c for c in row if c.kv_len > p.kv_len), key=lambda c: c.kv_len, default=None)
        cfg = self.config
        if lo is None or hi is None or lo.kv_len < cfg.kv_line_from or hi.kv_len > cfg.kv_line_span * lo.kv_len:
            return {}
        f = (p.kv_len - lo.kv_len) / (hi.kv_len - lo.kv_len)
        below, above = self.table.by_cell[lo], self.table.by_cell[hi]
        return {pid: t.median_us + f * (above[pid].median_us - t.median_us)
                for pid, t in below.items() if pid in above}

    # -- the one rule that combines them -------------------------------------------------------------
    def batch_rows(self, p: AttentionProblem) -> tuple[int, int] | None:
        """The measured batch sizes either side of p's in its family; None where p's batch size was
        measured or is not bracketed."""
        if self._alone is not None and self._alone.covers(p):
            return self._alone.grid.batch_rows(p)
        rows = {c.batch_size for c in self.table.by_family.get(p.family(), [])}
        lo = max((b for b in rows if b < p.batch_size), default=None)
        hi = min((b for b in rows if b > p.batch_size), default=None)
        return None if p.batch_size in rows or lo is None or hi is None else (lo, hi)

    def between_rows(self, p: AttentionProblem) -> list[Timing] | None:
        """For a batch size never measured: each pipeline's time at p's other sizes in the measured
        batch sizes either side (measured there, or predicted within that row), interpolated in log
        time over log batch. None where p's batch size was measured or is not bracketed."""
        rows = self.batch_rows(p)
        if rows is None:
            return None
        lo, hi = rows
        below = {t.pipeline.id: t for t in self.at(p.with_sizes(batch_size=lo))}
        above = {t.pipeline.id: t for t in self.at(p.with_sizes(batch_size=hi))}
        w = math.log(p.batch_size / lo) / math.log(hi / lo)
        return [log_between(below[pid], above[pid], w) for pid in below.keys() & above.keys()]

    def split_rows(self, p: AttentionProblem) -> dict[str, Timing]:
        """Decode at a batch size never measured: each pipeline of a kernel with a split_kv rule, between
        its times in the measured batch sizes either side, by the busiest SM's work; {} where p's batch
        was measured, is not bracketed, or the SM count is unknown."""
        if p.phase != "decode" or not self.sm_count or not self.config.split_rows:
            return {}
        rules = {k: r[p.kv_dtype] for k, r in self.splits.items() if p.kv_dtype in r}
        rows = self.batch_rows(p) if rules else None
        if rows is None:
            return {}
        lo, hi = rows

        def ruled(t: Timing) -> bool:      # a fixed or disabled split is not the kernel's own
            return (t.pipeline.kernel in rules and not fixed_split(t.pipeline)
                    and not dict(t.pipeline.tactic).get("disable_split_kv"))
        below = {t.pipeline.id: t for t in self.at(p.with_sizes(batch_size=lo)) if ruled(t)}
        above = {t.pipeline.id: t for t in self.at(p.with_sizes(batch_size=hi)) if ruled(t)}
        out = {}
        for pid in below.keys() & above.keys():
            w = split_weight(rules[below[pid].pipeline.kernel], p, lo, hi, below[pid], above[pid], self.sm_count,
                             self.config.resident_step)
            out[pid] = log_between(below[pid], above[pid], min(max(w, 0.0), 1.0))
        return out

    def _corrects(self, p: AttentionProblem) -> bool:
        """p's family is read by the uniform model, mixed batches corrected (mixed_residual_k)."""
        return p.family() in self._corrected

    def counts_spread(self, p: AttentionProblem) -> Callable[[Any], bool]:
        """Whose corrections at p take the standard deviation term (PredictorConfig.mixed_residual_std_*)."""
        waves = p.batch_size * p.num_kv_heads / self.sm_count if self.sm_count else math.inf
        scope = self.config.mixed_residual_std_scope
        return lambda pipe: waves >= self.config.mixed_residual_std_waves and not (
            (scope >= 1 and self.ragged.get(pipe.kernel) == "longest") or (scope >= 2 and fixed_split(pipe)))

    def _mixed_near(self, p: AttentionProblem) -> list[AttentionProblem]:
        here = self.x(p)
        return sorted((c for c in self.table.by_family.get(p.family(), []) if c.skew > 1),
                      key=lambda c: (math.dist(self._x[c], here), self._x[c]))

    def mixed_residuals(self, p: AttentionProblem, pipeline: str) -> int:
        """How many measured mixed batches correct `pipeline`'s prior time at p (0: none)."""
        if p.skew == 1 or not self._corrects(p):
            return 0
        return len(self._residuals.used(pipeline, self._mixed_near(p), self.config.mixed_residual_k))

    def uses_ragged_prior(self, p: AttentionProblem) -> bool:
        """Whether predict(p) reads uniform batches (ragged_prior): a mixed batch of a family measured
        uniform only, or corrected by its measured mixed batches (mixed_residual_k)."""
        return p.skew > 1 and (p.family() not in self._mixed or self._corrects(p))

    def ragged_prior(self, p: AttentionProblem) -> list[Timing]:
        """A mixed batch, each pipeline from uniform batches (the rules, each with its measurements and where it
        was picked and reported: docs/mixed-batches.md, "The grid and the model"):
        - a per-request kernel (`ragged = "longest"`, XQA): below `longest_alone_waves` waves of CTAs (batch x
          KV heads over SMs) or with FP8 KV and an FP8 split rule, the slower of the mean batch and one wave at
          the longest length; else the mean batch plus the longest request alone;
        - a balanced plan (FA2-TC's own): the mean batch, with FP8 KV from one wave scaled by how unbalanced the
          batch is (`fp8_unbalanced`); from `unsplit_waves` the longest request unsplit, one wave at its
          length if slower; with 16-bit KV up to two waves at the piece FlashInfer's plan cuts (`planned_chunks`);
        - a fixed split: below `unsplit_waves` the uniform batch at the longest length (its CUDA-graph plan pads
          every request to the longest one's chunks), from there the mean batch, or one wave of its chunks if
          slower with FP8 KV (`fp8_fixed_chunks`) or where the own plan cuts the longest request shorter."""
        def at(stepped: bool = True, **sizes: int) -> dict[str, Timing]:
            return {t.pipeline.id: t for t in self.at(p.with_sizes(**sizes), stepped)}
        sms = self.sm_count
        waves = p.batch_size * p.num_kv_heads / sms if sms else 0.0
        full = bool(sms) and waves >= self.config.unsplit_waves
        fp8 = p.kv_dtype == "fp8" and p.phase == "decode"
        slope = self.config.fp8_unbalanced * (max(waves - 1, 0) / 0.5) ** self.config.unbalanced_wave_power
        partial = 1.0 + slope * (p.balance_range()[1] - p.balance) if fp8 else 1.0
        split_longest = not sms or waves >= self.config.longest_alone_waves      # no SM count: the old rule
        unsplit = fp8 and not self.config.fp8_longest_alone     # for kernels with an FP8 split rule here (XQA)
        wave = min(p.batch_size, max(1, sms // p.num_kv_heads)) if sms else p.batch_size
        mean = at(stepped=False, max_kv_len=p.kv_len)      # its short requests end early: no whole waves
        alone = at(batch_size=1, kv_len=p.max_kv_len) if split_longest else {}
        one_wave = at(batch_size=wave, kv_len=p.max_kv_len, max_kv_len=p.max_kv_len)
        # the uniform batch at the longest length: one wave of it where requests run unsplit, else all of it
        top = one_wave if full else at(batch_size=p.batch_size, kv_len=p.max_kv_len, max_kv_len=p.max_kv_len)
        out, pieces = [], {k: self._planned_piece(p, k, waves) for k in {m.pipeline.kernel for m in mean.values()}}
        for pid, m in mean.items():
            t: Timing | None
            piece = pieces[m.pipeline.kernel]          # one plan per kernel, however many of its pipelines
            if fixed_split(m.pipeline) and full and ((fp8 and self.config.fp8_fixed_chunks) or
                                                     (piece or p.max_kv_len) < p.max_kv_len):
                n = min(p.max_kv_len, split_pages(m.pipeline) * p.page_size)      # one wave of its chunks
                t = slower(m, at(batch_size=wave, kv_len=n, max_kv_len=n).get(pid, m))
            elif fixed_split(m.pipeline):
                t = m if full else top.get(pid)
            elif self.ragged.get(m.pipeline.kernel) == "longest":
                alone_rule = split_longest and not (unsplit and "fp8" in self.splits.get(m.pipeline.kernel, {}))
                src, combine = (alone, summed) if alone_rule else (one_wave, slower)
                t = combine(m, src[pid]) if pid in src else None
            elif piece is not None:         # one wave at the longest request's piece of the plan
                t = slower(m, at(batch_size=wave, kv_len=piece, max_kv_len=piece).get(pid, m))
            elif full:
                t = slower(m, top[pid]) if pid in top else m
            else:
                t = scaled(m, partial) if waves >= 1 else m
            if t is not None:
                out.append(t)
        return out

    def _planned_piece(self, p: AttentionProblem, kernel: str, waves: float) -> int | None:
        """The longest request's piece (tokens) in FlashInfer's own plan of a balanced 16-bit KV decode batch,
        from unsplit_waves to where the plan cuts nothing (planned_chunks); None: the wave rules price it."""
        rule = self.splits.get(kernel, {}).get(p.kv_dtype)      # a window: the plan cuts the pages it reads
        if (self.config.planned_chunks and p.kv_dtype != "fp8" and p.phase == "decode" and p.window_left < 0 and rule
                and self.ragged.get(kernel) == "total" and self.config.unsplit_waves <= waves <= rule.sm_multiple):
            return planned_chunk(p, rule.sm_multiple * self.sm_count)
        return None

    def at(self, p: AttentionProblem, stepped: bool = True) -> list[Timing]:
        """What the model's table says at p (modelled: not a 16-bit cache's mixed batches): its measurements
        where p's cell is in it, else predicted(p)."""
        return self.table.timings(p) or self.predicted(p, stepped)

    def predict(self, p: AttentionProblem, stepped: bool = True) -> list[Timing]:
        """Each pipeline measured in p's family, at p's sizes: predicted(p), raised to the dominated floor."""
        return self._floor.raised(p, self.predicted(p, stepped), self.config.dominated_floor)

    def predicted(self, p: AttentionProblem, stepped: bool = True) -> list[Timing]:
        """The estimators' times at p, by the one rule. The spread is the median relative spread
        of the measurements used (the switch margin: the noise a measurement would show); the
        accuracy is the worst measured nearby. Remembered where the fit asked it to (Predictor.fit)."""
        if self._memo is None:
            return self._predict(p, stepped)
        got = self._memo.get((p, stepped))
        if got is None:
            if len(self._memo) >= MEMO_LIMIT:
                self._memo.clear()
            got = self._memo[(p, stepped)] = tuple(self._predict(p, stepped))
        return list(got)

    def alone_corrections(self, p: AttentionProblem) -> int:
        """How many cells measured alone scale p's predicted times (0: none)."""
        if self._corrects(p) and self._uniform is not None:     # the uniform model reads p
            return self._uniform.alone_corrections(p)
        return len(self._alone.near(p)) if self._alone and self._alone.covers(p) else 0

    def _predict(self, p: AttentionProblem, stepped: bool) -> list[Timing]:
        if self._alone is not None and self._alone.covers(p) and not self._corrects(p):
            return self._alone.predicted(p, stepped)
        if self._corrects(p):
            assert self._uniform is not None
            if p.skew == 1:
                return self._uniform.predicted(p, stepped)
            return self._residuals.corrected(self._uniform.ragged_prior(p), self._mixed_near(p),
                                             self.config.mixed_residual_k, self.config.mixed_residual_std,
                                             self.counts_spread(p))
        if self.uses_ragged_prior(p):
            return self.ragged_prior(p)
        if self.config.between_rows:
            bracketed = self.between_rows(p)
            if bracketed:
                return bracketed
        level = self.level(p)
        if level is None:
            return []
        split = self.split_rows(p) if stepped else {}
        line = self.kv_line(p)
        level_us = min(line.values()) if line else level
        twins = self.twin(p)
        checked = self.twins_near(p) if twins else []
        out = []
        for pid, (ratio, near) in self.plane(p).items():
            if pid in split:
                out.append(split[pid])
                continue
            if pid in line:
                ratio = line[pid] / level_us
            elif pid in twins and self.twin_agrees(pid, checked):
                w = self.config.twin_weight
                ratio = math.exp((1 - w) * math.log(ratio) + w * math.log(twins[pid]))
            us = level_us * max(ratio, 1.0)
            errs = [t.relerr for t, _ in near if t.relerr is not None]
            rel = sorted(t.spread_us / t.median_us for t, _ in near)[len(near) // 2]
            out.append(Timing(near[0][0].pipeline, us, us * rel, max(errs) if errs else None))
        return out
