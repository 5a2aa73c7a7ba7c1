"""Switchyard's dispatcher: which attention pipeline to run for a problem, from measurements.

    from dispatcher import AttentionProblem, load
    d = load("heuristics.db")
    dec = d.choose(AttentionProblem(phase="decode", num_qo_heads=40, num_kv_heads=8, head_dim=128,
                                    page_size=16, batch_size=12, kv_len=1900, kv_dtype="fp8", out_dtype="fp8"))

Importing this package pulls in neither torch kernels, fastapi, optuna nor flashinfer.
"""
from .decision import Decision
from .device import DeviceInfo
from .dispatch import Dispatcher, load
from .problem import AttentionProblem, ProblemError
from .registry import KernelSpec, ineligibility_reasons, load_registry
from .schema import StoreError

__all__ = ["AttentionProblem", "Decision", "DeviceInfo", "Dispatcher", "KernelSpec", "ProblemError",
           "StoreError", "ineligibility_reasons", "load", "load_registry"]
