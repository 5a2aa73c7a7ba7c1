"""GET /v1/environments, /v1/coverage, /v1/misses."""
from __future__ import annotations

from typing import Any, Optional

from fastapi import APIRouter, HTTPException, Query, Request

from dispatcher import store
from dispatcher.store import DbPath, default_path
from tuner.library import overview

from ..deps import DispatchersDep

router = APIRouter(prefix="/v1", tags=["environments"])


@router.get("/environments")
def environments(request: Request) -> dict[str, Any]:
    """Each measured environment (device, versions, timing mode) with counts and coverage."""
    return {**overview(request.app.state.db), "db": default_path(request.app.state.db).name}   # no host paths


def _misses(db: DbPath, device: str | None, limit: int) -> list[dict[str, Any]]:
    conn = store.open_readonly(db)
    if conn is None:
        return []
    try:
        return store.misses(conn, device, limit)
    finally:
        conn.close()


@router.get("/misses")
def misses(request: Request, ds: DispatchersDep, device: Optional[str] = None,
           limit: int = Query(100, ge=1, le=1000)) -> dict[str, Any]:
    """Problems answered by 'learned', 'nearest' or 'rule' (not measured), most frequent first."""
    for d in ds.all():           # include what is still in memory, not yet flushed
        live_counts = d.take_misses()
        if live_counts:
            store.add_misses(d.db, d.device.name, d.timing_mode, live_counts)
    rows = _misses(request.app.state.db, device, limit)
    keep = ("problem_key", "device_name", "source", "count", "last_seen", "phase", "num_qo_heads", "num_kv_heads",
            "head_dim", "page_size", "batch_size", "q_len", "kv_len", "max_kv_len", "kv_balance", "q_dtype", "kv_dtype",
            "out_dtype")
    return {"misses": [{k: r.get(k) for k in keep} for r in rows], "count": len(rows)}


@router.get("/coverage")
def coverage(ds: DispatchersDep, request: Request, device: Optional[str] = None) -> dict[str, Any]:
    """Measured cells per shape family (this device's; `lent_cells` from `lent_from`, a GPU of the same
    architecture, where it has too few: dispatcher.measurements.table_for; the size ranges are then the
    lent cells'), families the learned model covers, and the top misses."""
    try:
        d = ds.get(device)
    except ValueError as e:
        raise HTTPException(404, detail=str(e)) from None
    fams = []
    table = d.table                 # with what of it was lent: a refresh swaps both at once
    lent = table.lent
    for fam, b in sorted(table.by_family.items(), key=lambda kv: str(kv[0])):
        twin = lent.twin.name if lent and fam in lent.families else None
        own = sum(c.family() == fam for c in lent.own) if lent and twin else len(b)
        fams.append({"phase": fam[0], "num_qo_heads": fam[1], "num_kv_heads": fam[2], "head_dim": fam[3],
                     "page_size": fam[4], "kv_dtype": fam[6], "out_dtype": fam[7], "measured_cells": own,
                     "lent_cells": len(b) if twin else 0, "lent_from": twin,
                     "batch_size": [min(x.batch_size for x in b), max(x.batch_size for x in b)],
                     "kv_len": [min(x.kv_len for x in b), max(x.kv_len for x in b)],
                     "skew": [min(x.skew for x in b), max(x.skew for x in b)],
                     "learned": len(b) >= 3})
    return {"device": d.device.name, "timing_mode": d.timing_mode, "families": fams,
            "misses": _misses(request.app.state.db, d.device.name, 20)}
