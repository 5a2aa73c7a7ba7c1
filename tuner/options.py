"""How a sweep measures: one frozen value passed from the CLI, REST jobs and workers down to each problem."""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from dispatcher.rules import DEFAULT_RULE

from .search.screen import ScreenConfig, checked_screen

TacticMode = Literal["grid", "default", "optuna"]
TACTIC_MODES: tuple[TacticMode, ...] = ("grid", "default", "optuna")


@dataclass(frozen=True)
class SweepOptions:
    max_relerr: float | None = None    # overrides the per-dtype defaults (dispatcher.policy)
    retry_failed: bool = False
    rule: str = DEFAULT_RULE
    tactics: str = "grid"              # grid: every declared tactic; default: the kernels' own; optuna: searched
    trials: int = 16                   # with tactics="optuna": trials per problem and kernel pipeline
    seed: int = 0
    memory_fraction: float = 0.8       # of free device memory (CPU: of physical memory) a problem may use
    deadline: float | None = None      # time.time() after which no new problem starts (resumable)
    should_stop: Callable[[], bool] | None = None   # checked between problems (a cancelled job)
    isolate: bool = False              # run pipelines in a worker process (tuner/isolation.py)
    candidate_timeout_s: float = 120.0 # with isolate: silence longer than this is a hang
    screen: float = ScreenConfig.slower  # adaptive search: skip pipelines this many times the fastest nearby (0: off)
    alone: bool = False                # shapes measured as themselves (--problems, the daemon's problems and misses),
                                       # not a grid's points: stored so (the model reads them as local corrections)

    def __post_init__(self) -> None:
        if self.tactics not in TACTIC_MODES:
            raise ValueError(f"tactics {self.tactics!r} is not one of {', '.join(TACTIC_MODES)}")
        if self.trials < 1:
            raise ValueError(f"trials {self.trials} must be at least 1")
        checked_screen(self.screen, "screen")

    @property
    def all_tactics(self) -> bool:
        return self.tactics == "grid"
