"""Accuracy policy: the relative error (vs a float32 reference) a pipeline may have and still win."""
from __future__ import annotations

import math
import os

# Measured on the H200 (shared/gpu/README.md): FA2 on an FP8 cache 0.002-0.003, the XQA FP8 kernel
# 0.035-0.05 (it casts q to e4m3 and quantizes P); e4m3 output rounding alone adds ~0.036 rms.
DEFAULT_MAX_RELERR = {
    ("bf16", "bf16"): 0.02,
    ("fp8", "bf16"): 0.08,
    ("bf16", "fp8"): 0.10,
    ("fp8", "fp8"): 0.10,
}
ENV_VAR = "SWITCHYARD_MAX_RELERR"


def checked_budget(value: object, where: str) -> float:
    """A relative-error budget as a float, or ValueError naming where it came from: a budget of 0 or
    less would rule out every measurement and leave only rule decisions with no word why."""
    try:
        budget = float(value)  # type: ignore[arg-type]  # any object: a failure is the answer
    except (TypeError, ValueError):
        budget = math.nan
    if not (math.isfinite(budget) and budget > 0):
        raise ValueError(f"{where} {value!r} is not a usable relative-error budget; give a number > 0, "
                         "e.g. 0.1 (10% of the fp32 reference's norm)")
    return budget


def max_relerr(kv_dtype: str, out_dtype: str, override: float | None = None) -> float:
    """The budget for a kv/out dtype pair: `override`, else $SWITCHYARD_MAX_RELERR, else the default."""
    if override is not None:
        return checked_budget(override, "--max-relerr")
    if os.environ.get(ENV_VAR):
        return checked_budget(os.environ[ENV_VAR], ENV_VAR)
    return DEFAULT_MAX_RELERR[(_budget_class(kv_dtype), _budget_class(out_dtype))]


def _budget_class(dtype: str) -> str:
    return "fp8" if dtype == "fp8" else "bf16"      # fp16 has bf16's budget
