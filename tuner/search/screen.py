"""Screening in the adaptive search: a pipeline far slower than the fastest at every nearest measured
shape is not built at a new point (as Triton's `prune_configs_by` drops configs a performance model
rules out, but from this device's own measurements). On the shipped H200 grid torch SDPA was a third
of the pipelines and never within 1.58x of the fastest; building, checking and capturing a pipeline
costs the same whether it can win or not (benchmarks/results/screen/).

A screened pipeline is stored with status "screened" and the reason, so that a resumed search does
not measure it (and counts it as far behind there, as the stopped one did) and a grid sweep of the same
database does. Every rule's pick is measured anyway:
`tuner evaluate` compares the learned choice with it."""
from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from dispatcher.device import DeviceInfo
from dispatcher.pipeline import Pipeline
from dispatcher.predictor import FittedModel
from dispatcher.problem import AttentionProblem
from dispatcher.registry import KernelSpec
from dispatcher.rules import RULES, rule_pick
from dispatcher.table import Table

# (problem, its pipelines, the ids it may leave out: never stored) -> {pipeline id: why it is not measured}
Screen = Callable[[AttentionProblem, list[Pipeline], set[str]], dict[str, str]]


@dataclass(frozen=True)
class ScreenConfig:
    """When a pipeline is not measured at a point: at least `slower` times the fastest pipeline's time at
    each of the `neighbours` nearest measured shapes of the point's family (measured there, not failed:
    a failure says nothing about speed). Picked on the shipped H200 grid, reported on other grids
    (benchmarks/results/screen/): from 1.5x to 3x the held-out regret stayed within 0.0002 of nothing
    screened; at 2x, on that grid, nothing screened was within 1.2x of the fastest where it was left out."""
    slower: float = 2.0
    neighbours: int = 4

    def __post_init__(self) -> None:
        if not self.slower > 1:
            raise ValueError(f"screen factor {self.slower} must be above 1 (2: a pipeline 2x slower than the fastest "
                             "at the nearest measured shapes is not measured); to screen nothing, pass no screen "
                             "(--screen 0)")
        if self.neighbours < 1:
            raise ValueError(f"screen neighbours {self.neighbours} must be at least 1")

    def reasons(self, p: AttentionProblem, pipes: list[Pipeline], model: FittedModel,
                screened: dict[tuple[AttentionProblem, str], float] | None = None) -> dict[str, str]:
        """The pipelines of `pipes` not worth measuring at p, with why; {} where p's family has fewer
        measured shapes than `neighbours` (other than p's own). `screened`: (cell, pipeline) -> ratio of
        those this search (or the stopped one it resumes) left out, which count as that far behind there
        (else a cell where a pipeline was screened would have it measured at every point near it)."""
        near = [c for c in model.neighbours(p.cell()) if c != p.cell()][: self.neighbours]
        if len(near) < self.neighbours:
            return {}
        fastest = {c: min(t.median_us for t in model.table.by_cell[c].values()) for c in near}
        left_out = screened or {}
        out = {}
        for pipe in pipes:
            ratios = [t.median_us / fastest[c] if (t := model.table.by_cell[c].get(pipe.id)) is not None
                      else left_out.get((c, pipe.id)) for c in near]
            if any(r is None for r in ratios):
                continue            # failed or not measured at one: no evidence of its speed there
            least = min(r for r in ratios if r is not None)
            if least >= self.slower:
                nearest = near[0]
                out[pipe.id] = (f"screened: {least:.1f}x the fastest or slower at the {len(near)} nearest measured "
                                f"(or screened) shapes (the nearest: batch {nearest.batch_size}, q_len "
                                f"{nearest.q_len}, kv_len {nearest.kv_len}); not measured by the adaptive search "
                                "(--screen 0 measures it)")
        return out


def checked_screen(factor: float, where: str) -> float:
    """A screen factor as given (--screen, SweepOptions.screen), or ValueError naming where: above 1, or 0
    for no screen."""
    if factor and not 1 < factor < float("inf"):
        raise ValueError(f"{where} {factor} is out of range; give a factor above 1 (2: a pipeline 2x slower than "
                         "the fastest at the nearest measured shapes is not measured) or 0 to measure every pipeline")
    return factor


def screened_fits(fit: Callable[[Table], FittedModel], factor: float, device: DeviceInfo,
                  registry: dict[str, KernelSpec], earlier: Iterable[tuple[AttentionProblem, str]] = (),
                  ) -> tuple[Callable[[Table], FittedModel], Screen | None]:
    """The adaptive search's fit and the screen that reads its latest model (None for factor 0), as the
    sweep (tuner/library.py) and its replay (tuner evaluate --adaptive) both use them. `earlier`: the
    (problem, pipeline id) pairs a search stopped before this one screened (Store.screened)."""
    if not factor:
        return fit, None
    latest: list[FittedModel] = []

    def fitted(table: Table) -> FittedModel:
        latest[:] = [fit(table)]
        return latest[0]
    return fitted, screen_for(ScreenConfig(factor), lambda: latest[-1] if latest else None, device, registry,
                              earlier)


def screen_for(config: ScreenConfig, model: Callable[[], FittedModel | None], device: DeviceInfo,
               registry: dict[str, KernelSpec], earlier: Iterable[tuple[AttentionProblem, str]] = ()) -> Screen:
    """A sweep's screen on the latest fitted model (`model()`; None before the first fit: nothing
    screened), sparing every rule's pick (among all `pipes`), and remembering what it left out
    (ScreenConfig.reasons), from the start of a resumed search on: `earlier` (problem, pipeline id) pairs
    count as `config.slower` behind, as this search's own do."""
    screened = {(p.cell(), pid): config.slower for p, pid in earlier}

    def screen(p: AttentionProblem, pipes: list[Pipeline], fresh: set[str]) -> dict[str, str]:
        fitted = model()
        if fitted is None:
            return {}
        out = config.reasons(p, [pipe for pipe in pipes if pipe.id in fresh], fitted, screened)
        for rule in RULES if out else ():
            pick, _ = rule_pick(rule, p, device, registry, pipes)
            if pick is not None:
                out.pop(pick.id, None)
        for pid in out:
            screened[(p.cell(), pid)] = config.slower
        return out
    return screen
