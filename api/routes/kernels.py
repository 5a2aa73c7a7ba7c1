"""GET /v1/kernels: the registry; with problem parameters, each kernel's eligibility and reasons."""
from __future__ import annotations

import dataclasses
from typing import Annotated, Optional

from fastapi import APIRouter, HTTPException, Query

from dispatcher import AttentionProblem, ProblemError, eligible

from ..deps import DispatchersDep
from .decisions import unprocessable

router = APIRouter(prefix="/v1", tags=["kernels"])
OPTIONAL = {f.name for f in dataclasses.fields(AttentionProblem) if f.default is dataclasses.MISSING}


def spec_public(spec) -> dict:
    d = dataclasses.asdict(spec)
    d["combos"] = [f"{c['q']}/{c['kv']}/{c['out']}" for c in d["combos"]]
    d["tactics"] = {kind: dict(knobs) for kind, knobs in spec.tactics}
    d["group_sizes"] = dict(spec.group_sizes)
    return d


@router.get("/kernels")
def kernels(ds: DispatchersDep, phase: Optional[str] = None, num_qo_heads: Optional[int] = None,
            num_kv_heads: Optional[int] = None, head_dim: Optional[int] = None, page_size: Optional[int] = None,
            batch_size: Annotated[int, Query()] = 1, kv_len: Annotated[int, Query()] = 1024,
            q_len: Annotated[int, Query()] = 1, q_dtype: str = "bf16", kv_dtype: str = "bf16",
            out_dtype: str = "bf16", causal: bool = True, window_left: int = -1, has_sinks: bool = False,
            device: Optional[str] = None):
    """Every declared kernel; given a problem (phase, heads, head_dim, page_size), why each can or cannot serve it."""
    try:
        d = ds.get(device)
    except ValueError as e:
        raise HTTPException(404, detail=str(e)) from None
    out = {"device": d.device.name, "kernels": [spec_public(s) for s in d.registry.values()]}
    given = dict(phase=phase, num_qo_heads=num_qo_heads, num_kv_heads=num_kv_heads, head_dim=head_dim, page_size=page_size)
    if any(v is not None for v in given.values()):
        missing = [k for k, v in given.items() if v is None]
        if missing:
            raise HTTPException(422, detail=[{"loc": ["query", missing[0]], "type": "missing",
                                              "msg": f"{missing[0]} is required with a problem (give phase, num_qo_heads, "
                                                     "num_kv_heads, head_dim and page_size together)"}])
        try:
            p = AttentionProblem(**given, batch_size=batch_size, kv_len=kv_len, q_len=q_len, q_dtype=q_dtype,
                                 kv_dtype=kv_dtype, out_dtype=out_dtype, causal=causal, window_left=window_left,
                                 has_sinks=has_sinks)
        except ProblemError as e:
            raise unprocessable(e, ["query"]) from None
        for k in out["kernels"]:
            k["reasons"] = eligible(d.registry[k["id"]], p, d.device)
            k["eligible"] = not k["reasons"]
    return out
