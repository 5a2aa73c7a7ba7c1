"""`tuner` with experiment.patch's prefill wave rule switched on by $PW (JSON: tile, kernels, kv; empty: off)."""
import json
import os
import sys

from dispatcher import predictor
from tuner.cli.app import app

if os.environ.get("PW"):
    predictor.PREFILL_WAVES.update(json.loads(os.environ["PW"]), on=1)
sys.argv[0] = "tuner"
app()
