"""A runner whose import makes the worker's inputs fail for every later problem, as a worker whose earlier
problems left the GPU's memory full would: for the isolation tests. (The worker imports a runner after the
first problem's inputs are made, so a fresh worker always makes its first problem's.)"""
import tuner.measure as measure
from tuner.runners.torch_sdpa import RUNNER as SDPA


def _full(p, device, seed=0):
    raise MemoryError("out of memory (injected: this worker's earlier problems hold it)")


measure.make_inputs = _full


class Leaky:
    kernel = "leaky"

    def unavailable(self, device):
        return None

    def build(self, pipe, x):
        return SDPA.build(pipe, x)


RUNNER = Leaky()
