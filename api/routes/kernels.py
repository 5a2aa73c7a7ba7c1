"""GET /v1/kernels: the registry; with problem parameters, each kernel's eligibility and reasons."""
from __future__ import annotations

import dataclasses
from typing import Annotated, Any, Optional

from fastapi import APIRouter, HTTPException, Query

from dispatcher import AttentionProblem, KernelSpec, ProblemError, ineligibility_reasons
from dispatcher.problem import DEFAULTS

from ..deps import DispatchersDep
from .decisions import unprocessable

router = APIRouter(prefix="/v1", tags=["kernels"])


def spec_public(spec: KernelSpec) -> dict[str, Any]:
    d = dataclasses.asdict(spec)
    d["combos"] = [f"{c['q']}/{c['kv']}/{c['out']}" for c in d["combos"]]
    for per_kind in ("tactics", "tune", "maskless"):       # {device kind: {knob: values}}
        d[per_kind] = {kind: dict(knobs) for kind, knobs in getattr(spec, per_kind)}
    d["group_sizes"] = dict(spec.group_sizes)
    return d


@router.get("/kernels")
def kernels(ds: DispatchersDep, phase: Optional[str] = None, num_qo_heads: Optional[int] = None,
            num_kv_heads: Optional[int] = None, head_dim: int = DEFAULTS["head_dim"],
            page_size: int = DEFAULTS["page_size"], batch_size: Annotated[int, Query()] = 1,
            kv_len: Annotated[int, Query()] = 1024, max_kv_len: int = 0, kv_balance: float = 0.0, q_len: int = 1,
            q_dtype: str = DEFAULTS["q_dtype"],
            kv_dtype: str = DEFAULTS["kv_dtype"], out_dtype: str = DEFAULTS["out_dtype"],
            causal: bool = DEFAULTS["causal"], window_left: int = DEFAULTS["window_left"],
            has_sinks: bool = DEFAULTS["has_sinks"], device: Optional[str] = None) -> dict[str, Any]:
    """Every declared kernel; given a problem (phase and heads at least), why each can or cannot serve it."""
    try:
        d = ds.get(device)
    except ValueError as e:
        raise HTTPException(404, detail=str(e)) from None
    listed = [spec_public(s) for s in d.registry.values()]
    out = {"device": d.device.name, "kernels": listed}
    given: dict[str, Any] = dict(phase=phase, num_qo_heads=num_qo_heads, num_kv_heads=num_kv_heads)
    if any(v is not None for v in given.values()):
        missing = [k for k, v in given.items() if v is None]
        if missing:
            raise HTTPException(422, detail=[{"loc": ["query", missing[0]], "type": "missing",
                                              "msg": f"{missing[0]} is required with a problem (give phase, "
                                                     "num_qo_heads "
                                                     "and num_kv_heads together)"}])
        try:
            p = AttentionProblem(**given, head_dim=head_dim, page_size=page_size, batch_size=batch_size, kv_len=kv_len,
                                 max_kv_len=max_kv_len, kv_balance=kv_balance, q_len=q_len, q_dtype=q_dtype,
                                 kv_dtype=kv_dtype, out_dtype=out_dtype, causal=causal, window_left=window_left,
                                 has_sinks=has_sinks)
        except ProblemError as e:
            raise unprocessable(e, ["query"]) from None
        for k in listed:
            k["reasons"] = ineligibility_reasons(d.registry[k["id"]], p, d.device)
            k["eligible"] = not k["reasons"]
    return out
