"""A pure-ASGI layer in front of the app: times every request for /metrics, and answers a repeated
GET /v1/decision from its parsed problem without FastAPI's per-request machinery.

The cache maps a raw query string to the problem it parsed into (after the full route validated it
once); every hit still calls Dispatcher.choose(), so hot reloads and miss counts stay exact. JSON
bodies are cached per Decision object, which a reload replaces."""
from __future__ import annotations

import json
import time

QUERY_CACHE_LIMIT = 65536
DECISION_PATH = "/v1/decision"


class FastLayer:
    """Added with app.add_middleware(FastLayer); it finds the app's state in the ASGI scope."""

    def __init__(self, app):
        self.app = app
        self.queries: dict[bytes, tuple] = {}
        self.bodies: dict[int, tuple] = {}

    def remember(self, query: bytes, problem, device) -> None:
        if len(self.queries) < QUERY_CACHE_LIMIT:
            self.queries[query] = (problem, device)

    def body(self, dec) -> bytes:
        hit = self.bodies.get(id(dec))
        if hit is None or hit[0] is not dec:       # id() reuse after a reload: check identity
            if len(self.bodies) >= QUERY_CACHE_LIMIT:
                self.bodies.clear()
            hit = (dec, json.dumps(dec.to_dict()).encode())
            self.bodies[id(dec)] = hit
        return hit[1]

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        t = time.perf_counter()
        state = scope["app"].state
        if state.fast is None:
            state.fast = self              # the route hands parsed problems to this layer
        self.state = state
        if scope["method"] == "GET" and scope["path"] == DECISION_PATH:
            hit = self.queries.get(scope["query_string"])
            try:
                dec = self.state.dispatchers.get(hit[1]).choose(hit[0]) if hit is not None else None
            except (ValueError, LookupError):   # its device gone after a reload: the route says so
                self.queries.pop(scope["query_string"], None)
                dec = None
            if dec is not None:
                self.state.metrics.decisions[dec.source] += 1
                body = self.body(dec)
                await send({"type": "http.response.start", "status": 200,
                            "headers": [(b"content-type", b"application/json"),
                                        (b"content-length", str(len(body)).encode())]})
                await send({"type": "http.response.body", "body": body})
                self.state.metrics.observe(DECISION_PATH, time.perf_counter() - t)
                return
        await self.app(scope, receive, send)
        route = scope.get("route")
        self.state.metrics.observe(getattr(route, "path", "other"), time.perf_counter() - t)
