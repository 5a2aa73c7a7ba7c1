"""A runner whose import leaves its worker unable to measure any later problem, as a worker whose earlier
problems left the GPU's memory full would: for the isolation tests. LEAKY_MODE=inputs: making a problem's
inputs fails; LEAKY_MODE=memory: the worker sees no free memory, so every pipeline "does not fit". (The worker
imports a runner after the first problem's inputs are made, so a fresh worker always measures one problem.)"""
import os

import tuner.measure as measure
from tuner.runners.torch_sdpa import RUNNER as SDPA


def _full(p, device, seed=0):
    raise MemoryError("out of memory (injected: this worker's earlier problems hold it)")


if os.environ.get("LEAKY_MODE", "inputs") == "inputs":
    measure.make_inputs = _full
else:
    measure.free_bytes = lambda device: 0


class Leaky:
    kernel = "leaky"

    def unavailable(self, device):
        return None

    def build(self, pipe, x):
        return SDPA.build(pipe, x)


RUNNER = Leaky()
