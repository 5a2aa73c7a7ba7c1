"""The Switchyard REST app: create_app(db, device) builds it; `tuner serve` runs it."""
from __future__ import annotations

from contextlib import asynccontextmanager

from fastapi import FastAPI

from dispatcher.store import default_path

from .deps import Dispatchers
from .routes import decisions


def create_app(db=None, device: str | None = None) -> FastAPI:
    @asynccontextmanager
    async def lifespan(app: FastAPI):
        app.state.dispatchers = Dispatchers(db, device)
        app.state.dispatchers.get(None)      # load the host's table at start, not on the first request
        yield

    app = FastAPI(title="Switchyard", version="0.1.0", lifespan=lifespan,
                  description="Measured attention-kernel decisions per problem size.")
    app.include_router(decisions.router)

    @app.get("/healthz", tags=["health"])
    def healthz():
        return {"status": "ok", "db": str(default_path(db))}

    return app
