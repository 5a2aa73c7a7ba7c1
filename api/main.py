"""The Switchyard daemon: create_app(...) builds it; `tuner serve` runs it."""
from __future__ import annotations

import sqlite3
from contextlib import asynccontextmanager

from fastapi import FastAPI
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from fastapi.responses import PlainTextResponse

from dispatcher import store
from dispatcher.device import describe
from dispatcher.store import default_path

from .auth import configured_token
from .deps import Dispatchers
from .jobs import JobManager
from .metrics import Metrics
from .fast import FastLayer
from .routes import decisions, environments, kernels, sweeps



def create_app(db=None, device: str | None = None, token_file: str | None = None, tune_misses: bool = False,
               refresh_s: float = 2.0, idle_s: float = 5.0) -> FastAPI:
    token = configured_token(token_file)

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        app.state.dispatchers = Dispatchers(db, device, refresh_s)
        app.state.dispatchers.get(None)      # load the host's table at start, not on the first request
        app.state.jobs = JobManager(db, describe("auto"), tune_misses=tune_misses, idle_s=idle_s)
        yield
        app.state.jobs.stop()
        app.state.dispatchers.close()

    app = FastAPI(title="Switchyard", version="0.1.0", lifespan=lifespan,
                  description="Measured attention-kernel decisions per problem size; background sweeps.")
    app.state.db, app.state.token, app.state.metrics = db, token, Metrics()
    for r in (decisions.router, kernels.router, environments.router, sweeps.router):
        app.include_router(r)

    @app.exception_handler(RequestValidationError)
    async def invalid(request, exc: RequestValidationError):
        # FastAPI echoes the bad input back; an input such as Infinity cannot be encoded (a 500)
        return JSONResponse(status_code=422, content={"detail": [
            {"loc": list(e.get("loc", ())), "msg": e.get("msg", ""), "type": e.get("type", "")} for e in exc.errors()]})

    app.state.fast = None
    app.add_middleware(FastLayer)

    @app.get("/healthz", tags=["health"])
    def healthz():
        return {"status": "ok", "db": str(default_path(db))}

    @app.get("/metrics", response_class=PlainTextResponse, tags=["health"])
    def metrics():
        jobs = app.state.jobs
        running = [j for j in jobs.jobs.values() if j.state == "running"]
        stored = 0
        conn = store.open_readonly(db)
        if conn is not None:
            try:
                stored = conn.execute("select count(*) from measurements").fetchone()[0]
            except sqlite3.DatabaseError:
                stored = 0
            finally:
                conn.close()
        by_state = {}
        for j in jobs.jobs.values():
            by_state[j.state] = by_state.get(j.state, 0) + 1
        return app.state.metrics.render({
            "switchyard_measurements_stored": ("Measurements in the database.", [({}, stored)]),
            "switchyard_sweep_progress": ("Fraction done of the running sweep.",
                                          [({"id": j.id}, j.done / max(len(j.problems), 1)) for j in running]),
            "switchyard_sweeps": ("Sweeps by state.", [({"state": k}, v) for k, v in sorted(by_state.items())]),
        })

    return app
