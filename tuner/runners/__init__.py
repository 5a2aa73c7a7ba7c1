"""Runners: the code that runs one kernel family. A runner takes a pipeline and a problem's inputs and
returns a callable producing the pipeline's output; the harness times it, the sweep decides what runs."""
from __future__ import annotations

import importlib
from typing import Callable, Protocol

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


MODULES = {
    "torch-sdpa": "tuner.runners.torch_sdpa",
}


def get_runner(kernel: str) -> Runner | None:
    mod = MODULES.get(kernel)
    return importlib.import_module(mod).RUNNER if mod else None


def runnable(kernel: str, device: DeviceInfo) -> tuple[Runner | None, str | None]:
    r = get_runner(kernel)
    if r is None:
        return None, f"no runner for {kernel} in this version"
    return r, r.unavailable(device)
