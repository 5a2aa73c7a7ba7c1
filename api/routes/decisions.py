"""Decisions: GET /v1/decision (query parameters are the problem fields), POST /v1/decisions."""
from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, HTTPException, Query, Request

from dispatcher import AttentionProblem, ProblemError

from ..deps import DispatchersDep
from ..schemas import DecisionExplainedPublic, DecisionsPublic, DecisionsRequest, ProblemIn, ProblemQuery

router = APIRouter(prefix="/v1", tags=["decisions"])
Loc = list[str | int]      # where in the request an error is (FastAPI's `loc`)


def unprocessable(e: ProblemError, loc: Loc) -> HTTPException:
    return HTTPException(422, detail=[{"loc": [*loc, e.field], "msg": str(e), "type": "value_error"}])


def to_problem(p: ProblemIn, loc: Loc) -> AttentionProblem:
    """The problem of a request: by its sizes, or by its requests' lengths (seq_lens)."""
    data = p.model_dump(exclude={"device", "explain"}, exclude_none=True)
    try:
        if "seq_lens" in data:
            return AttentionProblem.from_dict(data)
        for size in ("batch_size", "kv_len"):
            if size not in data:
                raise ProblemError(size, f"{size} is required (or seq_lens: every request's KV tokens)")
        return AttentionProblem(**data)
    except ProblemError as e:
        raise unprocessable(e, loc) from None


def device_error(e: ValueError) -> HTTPException:
    return HTTPException(404, detail=str(e))


def unservable(e: LookupError, loc: Loc) -> HTTPException:
    """A valid problem that no kernel on the device can run: each kernel's reasons, as a 422."""
    return HTTPException(422, detail=[{"loc": loc, "msg": str(e), "type": "no_kernel"}])


@router.get("/decision", response_model=DecisionExplainedPublic, response_model_exclude_unset=True)
def decision(q: Annotated[ProblemQuery, Query()], ds: DispatchersDep, request: Request) -> dict[str, Any]:
    """The pipeline to run for one problem; with explain=true also every pipeline it was chosen from (the
    time compared, why any was passed over) and why each other kernel cannot serve it."""
    problem = to_problem(q, ["query"])
    try:
        d = ds.get(q.device)
        if q.explain:
            e = d.explain(problem)
            dec, explained = e.decision, e.to_dict()
        else:
            dec, explained = d.choose(problem), None
    except ValueError as e:
        raise device_error(e) from None
    except LookupError as e:
        raise unservable(e, ["query"]) from None
    request.app.state.metrics.decisions[dec.source] += 1
    return dec.to_dict() if explained is None else {**dec.to_dict(), "explain": explained}


@router.post("/decisions", response_model=DecisionsPublic)
def decisions(body: DecisionsRequest, ds: DispatchersDep, request: Request) -> dict[str, Any]:
    """Decisions for many problems at once, in order (at most 1024)."""
    problems = [to_problem(p, ["body", "problems", i]) for i, p in enumerate(body.problems)]
    try:
        d = ds.get(body.device)
    except ValueError as e:
        raise device_error(e) from None
    decs = []
    for i, p in enumerate(problems):
        try:
            decs.append(d.choose(p))
        except LookupError as e:
            raise unservable(e, ["body", "problems", i]) from None
    for dec in decs:
        request.app.state.metrics.decisions[dec.source] += 1
    return {"decisions": [dec.to_dict() for dec in decs], "count": len(decs)}
