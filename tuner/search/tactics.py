"""Per-problem tactic search with Optuna: a kernel's own knobs (FlashInfer's split-KV controls, PDL)
tuned for one problem size, every trial kept.

The kernel's default setting is enqueued first, so the search always knows what it must beat.
A setting measured before (by this search, or by a grid sweep into the same store) is not measured
again: its stored time is the trial's value. A small space is walked exhaustively (GridSampler),
a large one sampled (TPE). Single measurements steer the search; the default and the best few are
then timed again together in interleaved rounds, and those are the times the ranking uses."""
from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from dispatcher.pipeline import Pipeline

# a knob that makes another irrelevant: no split-KV at all leaves no split size to choose
IRRELEVANT_WHEN = {("disable_split_kv", True): ("fixed_split_size",)}
CONFIRM_TOP = 2          # besides the default, how many of the best settings are re-timed together


def canonical(params: dict, space: dict[str, tuple], grid_knobs: set[str]) -> tuple:
    """The pipeline tactic for `params`: knobs at their default value are left out (so the default
    is the same pipeline a grid sweep measures), except knobs the grid sweep itself names."""
    out = dict(params)
    for (knob, value), others in IRRELEVANT_WHEN.items():
        if out.get(knob) == value:
            for o in others:
                if o in out:
                    out[o] = space[o][0]
    kept = {k: v for k, v in out.items() if k in grid_knobs or v != space[k][0]}
    return tuple(sorted(kept.items()))


def space_size(space: dict[str, tuple]) -> int:
    return math.prod(len(v) for v in space.values())


@dataclass
class TuneResult:
    trials: list[dict] = field(default_factory=list)     # one per Optuna trial (tactic_trials rows)
    rows: list[dict] = field(default_factory=list)       # measurement rows, latest per pipeline
    best: str | None = None                              # pipeline id of the fastest confirmed setting
    default: str | None = None


def tune(base: Pipeline, space: dict[str, tuple], grid_knobs: set[str],
         measure: Callable[[list[Pipeline]], list[dict]], trials: int = 16, seed: int = 0,
         known: dict[str, float] | None = None,
         refused: Callable[[Pipeline], list[str]] | None = None, start: dict | None = None) -> TuneResult:
    """Search `space` for the fastest tactic of `base` on one problem.

    measure(pipelines) -> result rows (median_us, status...), timed interleaved when several;
    known: pipeline id -> median_us already in the store (not measured again);
    refused(pipeline) -> why the problem cannot plan that setting (registry.tactic_reasons): such a
    trial is kept with status "refused: <why>" and not measured (FlashInfer would refuse its plan);
    start: the setting enqueued first, the one to beat (default: each knob's first value)."""
    import optuna
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    names = sorted(space)
    default_params = start or {k: space[k][0] for k in names}
    small = space_size(space) <= trials
    sampler = (optuna.samplers.GridSampler({k: list(space[k]) for k in names}, seed=seed) if small
               else optuna.samplers.TPESampler(seed=seed, n_startup_trials=min(6, max(1, trials // 3))))
    study = optuna.create_study(direction="minimize", sampler=sampler)
    study.enqueue_trial(default_params)
    values: dict[str, float] = dict(known or {})
    seen: dict[str, Pipeline] = {}          # settings this search reached, by pipeline id
    latest: dict[str, dict] = {}
    result = TuneResult(default=replace(base, tactic=canonical(default_params, space, grid_knobs)).id)

    def objective(trial) -> float:
        params = {k: trial.suggest_categorical(k, list(space[k])) for k in names}
        pipe = replace(base, tactic=canonical(params, space, grid_knobs))
        seen[pipe.id] = pipe
        why = refused(pipe) if refused else []
        remeasured = not why and pipe.id not in values
        if why:
            values[pipe.id] = math.inf
        elif remeasured:
            row = measure([pipe])[0]
            latest[pipe.id] = row
            values[pipe.id] = row["median_us"] if row["status"] == "ok" else math.inf
        status = f"refused: {why[0]}" if why else latest[pipe.id]["status"] if pipe.id in latest else "ok"
        result.trials.append({"number": trial.number, "params": json.dumps(params, sort_keys=True),
                              "pipeline": pipe.id, "value_us": _finite(values[pipe.id]),
                              "status": status, "remeasured": int(remeasured)})
        return values[pipe.id]

    # the grid sampler walks every point on its own, besides the enqueued default (measured once)
    study.optimize(objective, n_trials=space_size(space) + 1 if small else trials)
    ranked = sorted((values[pid], pid) for pid in seen if math.isfinite(values[pid]))
    confirm = [result.default] + [pid for _, pid in ranked if pid != result.default][:CONFIRM_TOP]
    pipes = [seen[pid] for pid in confirm if pid in seen and math.isfinite(values[pid])]
    if len(pipes) > 1:
        for row in measure(pipes):
            latest[row["pipeline"]] = row
    result.rows = list(latest.values())
    timed = [(r["median_us"], r["pipeline"]) for r in result.rows if r["status"] == "ok"]
    timed += [(values[pid], pid) for pid in seen if pid not in latest and math.isfinite(values[pid])]
    result.best = min(timed)[1] if timed else None
    return result


def _finite(v: float) -> float | None:
    return v if math.isfinite(v) else None
