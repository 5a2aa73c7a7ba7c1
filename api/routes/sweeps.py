"""POST /v1/sweeps -> job; GET /v1/sweeps/{id}; DELETE /v1/sweeps/{id} (cancel, keeping what was measured)."""
from __future__ import annotations

import math
from typing import Any

from fastapi import APIRouter, HTTPException

from dispatcher import AttentionProblem
from tuner.library import SweepRequest, SweepRequestError, sweep_problems

from ..admission import gpu_memory_for, too_big
from ..auth import Writer
from ..deps import JobsDep
from ..jobs import JobKind, JobManager, QueueFull
from ..schemas import MAX_PRESET_PROBLEMS, SweepCreate, SweepPublic
from .decisions import Loc, to_problem

router = APIRouter(prefix="/v1", tags=["sweeps"])


def invalid(msg: str, loc: Loc, kind: str = "value_error") -> HTTPException:
    """A 422 shaped as FastAPI's own (a list of loc, msg, type), as every other endpoint answers."""
    return HTTPException(422, detail=[{"loc": loc, "msg": msg, "type": kind}])


def _problems(body: SweepCreate, jobs: JobManager) -> tuple[JobKind, list[AttentionProblem]]:
    if (body.model is None) == (body.problems is None):
        which = "neither was given" if body.model is None else "both were given"
        raise invalid(f"give either 'model' (a preset with options, e.g. \"llama4-scout\") or 'problems' (a list): "
                      f"{which}", ["body"])
    if body.problems is not None:
        if body.tiles:
            raise invalid("'tiles' adds sizes to a preset's grid; 'problems' are swept as given: put the sizes in "
                          "the list, or send 'model' instead", ["body", "tiles"])
        if not body.problems:
            raise invalid("'problems' is empty; give at least one problem to sweep", ["body", "problems"])
        return "problems", [to_problem(p, ["body", "problems", i]) for i, p in enumerate(body.problems)]
    try:
        req = SweepRequest(model=body.model or "", tps=tuple(body.tp) if body.tp is not None else None,
                           phases=tuple(body.phases), kv_dtypes=tuple(body.kv_dtypes),
                           out_dtypes=tuple(body.out_dtypes),
                           page_sizes=tuple(body.page_sizes) if body.page_sizes is not None else None, grid=body.grid,
                           tiles=body.tiles)
        probs = sweep_problems(req, jobs.device)
    except SweepRequestError as e:      # an option of the body's, named as the body names it
        raise invalid(str(e), ["body", e.field]) from None
    except ValueError as e:             # a ProblemError's field is a problem's, not the body's: no deeper loc
        raise invalid(str(e), ["body"]) from None
    if len(probs) > MAX_PRESET_PROBLEMS:
        raise invalid(f"this sweep expands to {len(probs)} problems; the limit per job is {MAX_PRESET_PROBLEMS}: "
                      "narrow tp, phases, dtypes or page_sizes, or leave out tiles", ["body"])
    return "preset", probs


@router.post("/sweeps", response_model=SweepPublic, status_code=202, dependencies=[Writer])
def create(body: SweepCreate, jobs: JobsDep) -> dict[str, Any]:
    """Queue a sweep on the daemon's device; one runs at a time, the rest wait."""
    kind, probs = _problems(body, jobs)
    for i, p in enumerate(probs):
        why = too_big(p, jobs.device)
        if why is not None and kind == "problems":
            raise invalid(f"problem {i} {why}", ["body", "problems", i], "too_big")
        if why is not None:                 # a preset's point: which one, and how to leave it out
            gpu = f"a GPU of {math.ceil(gpu_memory_for(p) / 2**30)} GiB or more"
            how = (f"the mixed grid's batches are this large whatever the options: sweep it on {gpu}"
                   if body.grid == "mixed" else f"narrow the grid (grid, tp, phases, dtypes or page_sizes) or sweep "
                   f"on {gpu}")
            raise invalid(f"the preset's grid holds {p.describe()}, which {why}: {how}", ["body"], "too_big")
    try:
        return jobs.submit(kind, probs).public()
    except QueueFull as e:
        raise HTTPException(429, detail=str(e)) from None


@router.get("/sweeps/{job_id}", response_model=SweepPublic)
def get(job_id: str, jobs: JobsDep) -> dict[str, Any]:
    job = jobs.jobs.get(job_id)
    if job is None:
        raise HTTPException(404, detail=f"no sweep {job_id!r}; GET /v1/sweeps lists them")
    return job.public()


@router.get("/sweeps")
def list_(jobs: JobsDep) -> dict[str, Any]:
    return {"sweeps": [j.public() for j in jobs.jobs.values()]}


@router.delete("/sweeps/{job_id}", response_model=SweepPublic, dependencies=[Writer])
def cancel(job_id: str, jobs: JobsDep) -> dict[str, Any]:
    """Cancel: a queued sweep never starts; a running one stops after its current problem; one that has
    ended is a 409 (nothing to cancel)."""
    ended = jobs.jobs.get(job_id)
    if ended is not None and ended.state in ("done", "cancelled", "failed"):
        raise HTTPException(409, detail=f"sweep {job_id!r} has already ended ({ended.state}); nothing to cancel")
    job = jobs.cancel(job_id)
    if job is None:
        raise HTTPException(404, detail=f"no sweep {job_id!r}")
    return job.public()
