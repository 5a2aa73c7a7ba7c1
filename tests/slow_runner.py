"""A runner whose call sleeps `ms`, longer on the worker that $SLEEPER_SLOW names ("cpu#1:2.0"): a
device that measures slower, for the multi-device tests (its times are real wall-clock measurements)."""
import os
import time

import torch


class Sleeper:
    kernel = "sleeper"

    def unavailable(self, device):
        return None

    def build(self, pipe, x):
        who, _, factor = os.environ.get("SLEEPER_SLOW", "").partition(":")
        slow = float(factor) if who and who == os.environ.get("SWITCHYARD_WORKER_DEVICE") else 1.0
        ms = float(pipe.tactic_dict()["ms"]) * slow
        out = torch.zeros(x.q.shape, dtype=x.q.dtype)
        ref_rows = x.check_rows()

        def run():
            time.sleep(ms / 1000)
            out[ref_rows] = x.ref.to(out.dtype)      # the reference rows: accurate, so it is timed
            return out
        return run


RUNNER = Sleeper()
