"""`tuner` with per-kernel resident steps from $RS (JSON: kernel -> step; the others keep resident_step)."""
import json
import os
import sys

from dispatcher import estimates, predictor
from tuner.cli.app import app

STEPS = json.loads(os.environ.get("RS") or "{}")


def per_kernel(rule, p, lo, hi, below, above, sm_count, resident_step):
    return estimates.split_weight(rule, p, lo, hi, below, above, sm_count,
                                  STEPS.get(below.pipeline.kernel, resident_step))


predictor.split_weight = per_kernel
sys.argv[0] = "tuner"
app()
