"""Timing the candidates of one problem: tuner/timing/base.py has the protocol and the race;
wall.py times on the CPU, cuda.py on a GPU (graph replay or eager calls)."""
from __future__ import annotations

from .base import MODES, Stats, Timer, TimingConfig, TimingMode, time_interleaved


def make_timer(mode: str, cfg: TimingConfig = TimingConfig()) -> Timer:
    if mode not in MODES:
        raise ValueError(f"timing mode {mode!r} is not one of {', '.join(MODES)}")
    if mode == "wall":
        from .wall import WallTimer
        return WallTimer(cfg)
    from .cuda import CudaTimer  # imports CUDA state: only where a GPU is timed
    return CudaTimer(mode, cfg)


__all__ = ["MODES", "Stats", "Timer", "TimingConfig", "TimingMode", "make_timer", "time_interleaved"]
