"""Runners: the code that runs one kernel family. A runner takes a pipeline and a problem's inputs and
returns a callable producing the pipeline's output; the harness times it, the sweep decides what runs."""
from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Protocol

import torch

from dispatcher.device import DeviceInfo
from dispatcher.pipeline import Pipeline

from ..inputs import PagedInputs

Fn = Callable[[], torch.Tensor]


class Runner(Protocol):
    kernel: str

    def unavailable(self, device: DeviceInfo) -> str | None:
        """Why this runner cannot run on the device (a missing library, say); None when it can."""

    def build(self, pipe: Pipeline, x: PagedInputs) -> Fn:
        """Plan once; the returned callable runs the whole pipeline (q-quant, kernel, out-quant)."""

    # optional: build_rotated(pipe, copies) -> list[Fn], one callable per rotated copy of the inputs
    # (a runner with a costly plan shares it between copies; see build_rotated below)


def build_rotated(runner: Runner, pipe: Pipeline, copies: list[PagedInputs]) -> list[Fn]:
    """One callable per rotated input copy: the runner's own build_rotated when it has one (a plan
    shared by the copies), else one build per copy."""
    own = getattr(runner, "build_rotated", None)
    return own(pipe, copies) if own else [runner.build(pipe, xi) for xi in copies]


# kernel id -> (module, attribute); imported on first use so the CPU never imports flashinfer code
MODULES = {
    "torch-sdpa": ("tuner.runners.torch_sdpa", "RUNNER"),
    "trtllm-xqa": ("tuner.runners.flashinfer_xqa", "RUNNER"),
    "fa2": ("tuner.runners.flashinfer_fa", "FA2"),
    "fa2-tc": ("tuner.runners.flashinfer_fa", "FA2_TC"),
    "fa3": ("tuner.runners.flashinfer_fa", "FA3"),
    "cudnn": ("tuner.runners.flashinfer_fa", "CUDNN"),
    "trtllm-fmha-v2": ("tuner.runners.flashinfer_trtllm", "FMHA_V2"),
    "trtllm-gen": ("tuner.runners.flashinfer_trtllm", "TRTLLM_GEN"),
}


def extra_runners() -> dict[str, tuple[str, str]]:
    """$SWITCHYARD_RUNNERS="kernel=package.module:ATTR,...": runners for kernels a user file declares.
    From the environment, so that worker processes find them too."""
    import os
    out = {}
    for item in filter(None, os.environ.get("SWITCHYARD_RUNNERS", "").split(",")):
        kernel, _, where = item.partition("=")
        mod, _, attr = where.partition(":")
        if not (kernel and mod and attr):
            raise ValueError(f"SWITCHYARD_RUNNERS entry {item!r} is not kernel=module:ATTR")
        out[kernel.strip()] = (mod.strip(), attr.strip())
    return out


def get_runner(kernel: str) -> Runner | None:
    where = MODULES.get(kernel) or extra_runners().get(kernel)
    return getattr(importlib.import_module(where[0]), where[1]) if where else None


def runnable(kernel: str, device: DeviceInfo) -> tuple[Runner | None, str | None]:
    r = get_runner(kernel)
    if r is None:
        return None, f"no runner for {kernel} in this version"
    return r, r.unavailable(device)
