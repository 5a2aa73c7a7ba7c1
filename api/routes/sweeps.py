"""POST /v1/sweeps -> job; GET /v1/sweeps/{id}; DELETE /v1/sweeps/{id} (cancel, keeping what was measured)."""
from __future__ import annotations

from typing import Any

from fastapi import APIRouter, HTTPException

from dispatcher import AttentionProblem, ProblemError
from tuner.library import SweepRequest, sweep_problems

from ..admission import too_big
from ..auth import Writer
from ..deps import JobsDep
from ..jobs import JobKind, JobManager, QueueFull
from ..schemas import MAX_PRESET_PROBLEMS, SweepCreate, SweepPublic
from .decisions import to_problem

router = APIRouter(prefix="/v1", tags=["sweeps"])


def _problems(body: SweepCreate, jobs: JobManager) -> tuple[JobKind, list[AttentionProblem]]:
    if (body.model is None) == (body.problems is None):
        raise HTTPException(422, detail="give either 'model' (a preset with options) or 'problems' (a list), not both")
    if body.problems is not None:
        if not body.problems:
            raise HTTPException(422, detail="'problems' is empty; give at least one problem to sweep")
        return "problems", [to_problem(p, ["body", "problems", i]) for i, p in enumerate(body.problems)]
    try:
        req = SweepRequest(model=body.model or "", tps=tuple(body.tp) if body.tp is not None else None,
                           phases=tuple(body.phases), kv_dtypes=tuple(body.kv_dtypes),
                           out_dtypes=tuple(body.out_dtypes),
                           page_sizes=tuple(body.page_sizes) if body.page_sizes is not None else None, grid=body.grid)
        probs = sweep_problems(req, jobs.device)
    except (ProblemError, ValueError) as e:
        raise HTTPException(422, detail=str(e)) from None
    if len(probs) > MAX_PRESET_PROBLEMS:
        raise HTTPException(422, detail=f"this sweep expands to {len(probs)} problems; the limit per job is "
                                        f"{MAX_PRESET_PROBLEMS}: narrow tp, phases, dtypes or page_sizes")
    return "preset", probs


@router.post("/sweeps", response_model=SweepPublic, status_code=202, dependencies=[Writer])
def create(body: SweepCreate, jobs: JobsDep) -> dict[str, Any]:
    """Queue a sweep on the daemon's device; one runs at a time, the rest wait."""
    kind, probs = _problems(body, jobs)
    for i, p in enumerate(probs):
        why = too_big(p, jobs.device)
        if why is not None:
            raise HTTPException(422, detail=f"problem {i} {why}")
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
    """Cancel: a queued sweep never starts; a running one stops after its current problem."""
    job = jobs.cancel(job_id)
    if job is None:
        raise HTTPException(404, detail=f"no sweep {job_id!r}")
    return job.public()
