"""The Switchyard daemon: create_app(...) builds it; `tuner serve` runs it."""
from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, PlainTextResponse

from dispatcher import StoreError, store
from dispatcher.device import describe
from dispatcher.store import default_path

from .auth import configured_token
from .deps import Dispatchers
from .fast import FastLayer
from .jobs import TUNE_MISSES, JobManager
from .metrics import Metrics
from .routes import decisions, environments, kernels, sweeps


def without_host_path(text: str, db: str | Path | None) -> str:
    """`text` with the database's path cut to its name: no host paths over HTTP."""
    return text.replace(str(default_path(db)), default_path(db).name)


def db_problem(db: str | Path | None) -> str | None:
    """Why the database cannot be read now (a file replaced by garbage while serving), or None."""
    try:
        conn = store.open_readonly(db)
        if conn is not None:
            try:
                conn.execute("select count(*) from environments").fetchone()
            finally:
                conn.close()
    except (StoreError, sqlite3.DatabaseError) as e:
        return without_host_path(str(e), db)
    return None


def create_app(db: str | Path | None = None, device: str | None = None, token_file: str | None = None,
               tune_misses: str = "off", refresh_s: float = 2.0, idle_s: float = 5.0,
               token: str | None = None) -> FastAPI:
    """tune_misses: "off"; "writers" (only with a token configured); "anyone" (also without one:
    unauthenticated readers then choose what this host measures, within the sweep bounds).
    The write token: `token`, else --token-file / $SWITCHYARD_TOKEN_FILE / $SWITCHYARD_TOKEN."""
    token = token or configured_token(token_file)
    if tune_misses not in TUNE_MISSES:
        raise ValueError(f"tune_misses {tune_misses!r} is not one of {', '.join(TUNE_MISSES)}")
    if tune_misses == "writers" and not token:
        raise ValueError("--tune-misses measures what unauthenticated GET /v1/decision requests ask for, so it "
                         "needs writes enabled (SWITCHYARD_TOKEN or --token-file); to accept that without a "
                         "token, pass --tune-misses-without-token")

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        app.state.dispatchers = Dispatchers(db, device, refresh_s)
        app.state.dispatchers.get(None)      # load the host's table at start, not on the first request
        app.state.jobs = JobManager(db, describe("auto"), tune_misses=tune_misses != "off", idle_s=idle_s)
        app.state.db_at_start = default_path(db).exists()
        yield
        app.state.jobs.stop()
        app.state.dispatchers.close()

    app = FastAPI(title="Switchyard", version="0.1.0", lifespan=lifespan,
                  description="Measured attention-kernel decisions per problem size; background sweeps.")
    app.state.db, app.state.token, app.state.metrics = db, token, Metrics()
    for r in (decisions.router, kernels.router, environments.router, sweeps.router):
        app.include_router(r)

    @app.exception_handler(RequestValidationError)
    async def invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        # FastAPI echoes the bad input back; an input such as Infinity cannot be encoded (a 500)
        return JSONResponse(status_code=422, content={"detail": [
            {"loc": list(e.get("loc", ())), "msg": e.get("msg", ""), "type": e.get("type", "")} for e in exc.errors()]})

    @app.exception_handler(StoreError)
    @app.exception_handler(sqlite3.DatabaseError)
    async def unreadable(request: Request, exc: Exception) -> JSONResponse:
        why = db_problem(db) or str(exc).replace(str(default_path(db)), default_path(db).name)
        return JSONResponse(status_code=503, content={"detail": f"the database cannot be read: {why}"})

    app.add_middleware(FastLayer)

    @app.get("/healthz", tags=["health"])
    def healthz() -> JSONResponse:
        why = db_problem(db)
        if why is None and getattr(app.state, "db_at_start", False) and not default_path(db).exists():
            why = (f"{default_path(db).name} is gone (moved or deleted while serving); decisions are the built-in "
                   "rule's until it is back")
        body: dict[str, Any] = {"status": "ok" if why is None else "degraded", "db": default_path(db).name}
        if why is not None:
            body["reason"] = why
        paused = app.state.jobs.miss_tuning()
        if paused is not None:
            body["miss_tuning"] = {**paused, "last_error": without_host_path(paused["last_error"] or "", db)}
        return JSONResponse(status_code=200 if why is None else 503, content=body)

    @app.get("/metrics", response_class=PlainTextResponse, tags=["health"])
    def metrics() -> str:
        jobs = app.state.jobs
        running = [j for j in jobs.jobs.values() if j.state == "running"]
        stored = 0
        conn = store.open_readonly(db)
        if conn is not None:
            try:
                stored = conn.execute("select count(*) from measurements").fetchone()[0]
            finally:
                conn.close()
        by_state: dict[str, int] = {}
        for j in jobs.jobs.values():
            by_state[j.state] = by_state.get(j.state, 0) + 1
        ds = app.state.dispatchers.all()
        metrics: Metrics = app.state.metrics
        return metrics.render({
            "switchyard_measurements_stored": ("Measurements in the database.", [({}, stored)]),
            "switchyard_sweep_progress": ("Fraction done of the running sweep.",
                                          [({"id": j.id}, j.done / max(len(j.problems), 1)) for j in running]),
            "switchyard_sweeps": ("Sweeps by state.", [({"state": k}, v) for k, v in sorted(by_state.items())]),
            "switchyard_dispatchers": ("Dispatchers loaded (one per device asked for).", [({}, len(ds))]),
            "switchyard_cached_decisions": ("Decisions cached, over all dispatchers.",
                                            [({}, sum(d.cached() for d in ds))]),
        })

    return app
