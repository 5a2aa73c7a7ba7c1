"""A runner that misbehaves on purpose, per its tactic: for the fault-isolation tests."""
import os
import time

from tuner.runners.torch_sdpa import RUNNER as SDPA


class Faulty:
    kernel = "faulty"

    def unavailable(self, device):
        return None

    def build(self, pipe, x):
        mode = pipe.tactic_dict()["mode"]
        if mode == "raise":
            raise RuntimeError("injected failure")
        ok = SDPA.build(pipe, x)
        if mode == "abort":
            return lambda: os.abort()
        if mode == "hang":
            return lambda: time.sleep(3600)
        return ok


RUNNER = Faulty()
