"""Adaptive sampling of a problem grid (`tuner sweep --search adaptive`): measure a spread-out
coarse subset, then refine where the answer is in doubt, until a measurement budget is spent.

The budget is a fraction of the whole grid, shared between families (everything but the sizes) in
proportion to the square root of their sizes (allocate): a family of 22 prefill points given a third
of them has too few neighbours for any fit, while a third of a 91-point decode family is plenty.
Every family's coarse points are measured before any family is refined (a search cut by a deadline
has sampled them all); then the families are refined in turn, a few points each:
- coarse: farthest-point sampling in log2(batch, q_len, kv_len), corners first, for half the budget,
  in two passes over the families (FIRST_COARSE);
- refine: the unmeasured point whose nearest measured neighbours disagree on the winner, or where
  the learned model's best two pipelines are predicted within noise of each other, is measured
  next (a few at a time, refitting in between); the farthest from anything measured breaks ties.
  With `between`, the points considered include shapes off the grid's lattice: the cell halfway
  (in log size) between two measured neighbours along one axis whose winners differ, where the
  crossover lies.
Measuring is the caller's: `measure(problems)` runs them (a sweep on the GPU, or a replay)."""
from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable

from dispatcher.cells import cell_size, size_cell
from dispatcher.policy import max_relerr
from dispatcher.predictor import FittedModel, Predictor
from dispatcher.problem import AttentionProblem
from dispatcher.table import Table, rank

NEIGHBOURS = 4        # measured neighbours whose winners are compared
STEP = 4              # points measured between refits
# a family's coarse points measured before the first fit (the farthest-first ones, at least 4): the rest is
# measured after it, so that the search's screen can leave out pipelines far behind there too
# (benchmarks/results/screen/)
FIRST_COARSE, FIRST_COARSE_MIN = 0.3, 4


def log_sizes(p: AttentionProblem) -> tuple[float, float, float, float]:
    """Where p sits for spreading points: log2 of batch, q_len, mean KV and longest-over-mean."""
    return math.log2(p.batch_size), math.log2(p.q_len), math.log2(p.kv_len), math.log2(p.skew)


def farthest_first(points: list[AttentionProblem], n: int) -> list[AttentionProblem]:
    """n points spread over the family: the smallest and largest first, then each next point the
    one farthest from all chosen (deterministic: ties go to the grid's order)."""
    if not points:
        return []
    pts = sorted(points, key=lambda p: log_sizes(p))
    chosen = [pts[0]] + ([pts[-1]] if len(pts) > 1 else [])
    dist = {p: min(math.dist(log_sizes(p), log_sizes(c)) for c in chosen) for p in pts}
    while len(chosen) < min(n, len(pts)):
        nxt = max((p for p in pts if p not in chosen), key=lambda p: dist[p])
        chosen.append(nxt)
        for p in pts:
            dist[p] = min(dist[p], math.dist(log_sizes(p), log_sizes(nxt)))
    return chosen[:n]


def doubt(p: AttentionProblem, model: FittedModel) -> tuple[bool, bool, float, float]:
    """Sort key, most doubtful first: (neighbours disagree, predicted margin within noise, -margin,
    distance to the nearest measured point). The margin is the estimators' own (FittedModel.predicted):
    the dominated floor moved replays of the search the wrong way (benchmarks/results/dominated-floor/)."""
    budget = max_relerr(p.kv_dtype, p.out_dtype)
    near = model.neighbours(p)[:NEIGHBOURS]
    winners = {r.winner.pipeline.id for b in near if (r := rank(model.table.timings(b), budget))}
    pred = rank(model.predicted(p), budget)
    margin, within = math.inf, False
    if pred is not None and pred.runner_up is not None:
        w, ru = pred.winner, pred.runner_up
        margin = ru.median_us / w.median_us - 1
        within = ru.median_us - w.median_us <= max(w.spread_us, ru.spread_us)
    gap = math.dist(log_sizes(p), log_sizes(near[0])) if near else math.inf
    return (len(winners) > 1, within, -margin, gap)


def allocate(sizes: dict[tuple, int], total: int) -> dict[tuple, int]:
    """`total` points over families of these sizes, in proportion to sqrt(size), none over its size
    and each at least one: what a capped family cannot take goes to the others. The largest families
    are served first, equal ones in `sizes`' order, so that every run splits the budget the same way."""
    share = {f: 0 for f in sizes}
    left, open_ = total, sorted((f for f, n in sizes.items() if n > 0), key=lambda f: -sizes[f])
    while left > 0 and open_:
        weight = sum(math.sqrt(sizes[f]) for f in open_)
        grant = {f: max(1, math.floor(left * math.sqrt(sizes[f]) / weight)) for f in open_}
        for f in open_:
            g = min(grant[f], sizes[f] - share[f], left)
            share[f] += g
            left -= g
        open_ = [f for f in open_ if share[f] < sizes[f]]
    return share


def midpoint(a: AttentionProblem, b: AttentionProblem) -> AttentionProblem | None:
    """The cell halfway between two shapes that differ along one size (log scale), or None when
    they are adjacent cells already or differ along more than one."""
    da = (a.batch_size, a.q_len, a.kv_len, a.max_kv_len)
    db = (b.batch_size, b.q_len, b.kv_len, b.max_kv_len)
    axes = [i for i in range(4) if da[i] != db[i]]
    if len(axes) != 1:
        return None
    i = axes[0]
    if i == 0:
        mid = round(math.sqrt(da[0] * db[0]))
    else:
        mid = cell_size((size_cell(da[i]) + size_cell(db[i])) // 2)
    if mid in (da[i], db[i]):
        return None
    names = ("batch_size", "q_len", "kv_len", "max_kv_len")
    cell = a.with_sizes(**{names[i]: mid}).cell()
    got = (cell.batch_size, cell.q_len, cell.kv_len, cell.max_kv_len)[i]
    # a cell's representative may move within its query tile (AttentionProblem.cell): still between?
    return cell if min(da[i], db[i]) < got < max(da[i], db[i]) else None


def crossovers(model: FittedModel, family: list[AttentionProblem]) -> list[AttentionProblem]:
    """Midpoints between neighbouring measured shapes of a family whose measured winners differ."""
    cells = [c for c in family if c in model.table.by_cell]
    if not cells:
        return []
    budget = max_relerr(cells[0].kv_dtype, cells[0].out_dtype)
    won = {c: r.winner.pipeline.id for c in cells if (r := rank(model.table.timings(c), budget))}
    out = []
    for a in cells:
        for b in model.neighbours(a)[1:NEIGHBOURS + 1]:
            if a in won and b in won and won[a] != won[b] and (m := midpoint(a, b)) is not None:
                out.append(m)
    return sorted(set(out), key=lambda p: p.key())


def default_fit(table: Table) -> FittedModel:
    return Predictor().fit(table, None, remember=True)


def adaptive_sweep(grid: list[AttentionProblem], measure: Callable[[list[AttentionProblem]], None],
                   measured: Callable[[], Table], fraction: float = 1 / 3,
                   say: Callable[[str], None] = lambda m: None,
                   stopped: Callable[[], bool] = lambda: False,
                   fit: Callable[[Table], FittedModel] = default_fit,
                   between: bool = False) -> list[AttentionProblem]:
    """Measure at most ceil(fraction x |grid|) points of `grid`, shared between its families (see
    allocate); returns the points chosen, family by family. Every family's coarse points come first, then the
    families are refined in turn, a few points each, so that a search cut short (`stopped()`: a
    deadline such as --max-minutes, a cancel) has sampled every family, not measured the first ones
    fully and the rest not at all. The coarse points come in two passes over the families, with a fit
    between (`fit` is called then and before each refinement round). `measured()` reads back what the
    store holds (the table the model fits: a new one each call, which later measurements leave alone); a
    rerun resumes a stopped search."""
    if not 0 < fraction <= 1:
        raise ValueError(f"budget fraction {fraction} is out of range; use a fraction in (0, 1], e.g. 0.33")
    families: dict[tuple, list[AttentionProblem]] = defaultdict(list)
    for p in grid:
        families[p.family()].append(p)
    budgets = allocate({f: len(pts) for f, pts in families.items()}, math.ceil(fraction * len(grid)))
    chosen: dict[tuple, list[AttentionProblem]] = {}
    coarse: dict[tuple, list[AttentionProblem]] = {}
    held = measured()      # read once: measuring one family's coarse points adds no cell to another
    for fam, pts in families.items():
        on_grid = {p.cell() for p in pts}                  # a resumed search counts what it measured,
        chosen[fam] = ([p for p in pts if held.timings(p.cell())]  # off the grid's lattice too
                       + [c for c in held.by_family.get(fam, []) if c not in on_grid])
        coarse[fam] = [p for p in farthest_first(pts, max(1, budgets[fam] // 2) if budgets[fam] else 0)
                       if p not in chosen[fam]]
    cut = {fam: max(FIRST_COARSE_MIN, math.ceil(FIRST_COARSE * len(pts))) for fam, pts in coarse.items()}
    if any(held.by_family.get(fam) for fam in families) and any(coarse.values()):
        fit(held)                   # resumed: the screen reads what the store holds from the first point
    for first in (True, False):     # a first share of every family's coarse points, a fit, then the rest
        if not first and any(len(pts) > cut[fam] for fam, pts in coarse.items()):
            fit(measured())         # read by the caller's screen (tuner/search/screen.py), not here
        for fam in families:
            part = coarse[fam][:cut[fam]] if first else coarse[fam][cut[fam]:]
            if part:
                measure(part)
                chosen[fam] += part
            if stopped():
                return _stopped(say, chosen, measured(), "sampling coarsely")
    active = [fam for fam in families if len(chosen[fam]) < budgets[fam]]
    def reached(fam: tuple) -> None:
        say(f"adaptive: {len(chosen[fam])} of {len(families[fam])} points of {_name(families[fam][0])}")
    for fam in families:
        if fam not in active:
            reached(fam)
    while active:
        model = fit(measured())
        for fam in list(active):
            nxt = _refinement(fam, families[fam], chosen[fam], budgets[fam], model, between)
            if nxt:
                measure(nxt)
                chosen[fam] += nxt
            if not nxt or len(chosen[fam]) >= budgets[fam]:
                active.remove(fam)
                reached(fam)
            if stopped():
                return _stopped(say, chosen, measured(), "refining")
    return [p for pts in chosen.values() for p in pts]


def _refinement(fam: tuple, pts: list[AttentionProblem], chosen: list[AttentionProblem], budget: int,
                model: FittedModel, between: bool) -> list[AttentionProblem]:
    """The family's next few points: the unmeasured ones in most doubt (see doubt), up to its budget."""
    rest = [p for p in pts if p not in chosen]
    if between:
        rest += [m for m in crossovers(model, model.table.by_family.get(fam, [])) if m not in chosen + rest]
    ranked = sorted(rest, key=lambda p: doubt(p.cell(), model), reverse=True)
    return ranked[:min(STEP, budget - len(chosen))]


def _stopped(say: Callable[[str], None], chosen: dict[tuple, list[AttentionProblem]], held: Table,
             doing: str) -> list[AttentionProblem]:
    """The points chosen so far; the message counts those the store holds (the deadline may cut a batch)."""
    stored = sum(1 for pts in chosen.values() for p in pts if held.timings(p.cell()))
    say(f"adaptive: stopped early while {doing}, {stored} points measured in {len(chosen)} families; "
        "run the same command again to resume")
    return [p for pts in chosen.values() for p in pts]


def _name(p: AttentionProblem) -> str:
    return f"{p.phase} {p.num_qo_heads}/{p.num_kv_heads} page {p.page_size} {p.kv_dtype}/{p.out_dtype}"

