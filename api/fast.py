"""A pure-ASGI layer in front of the app. For every request it enforces the size bounds of
api/guard.py before the app reads anything, refuses a write without a valid token before its body
is read, times the request for /metrics and writes one bounded access-log line.

GET /v1/decision in the plain form (known fields, each once, integers and booleans spelled
canonically) is answered here from the parsed problem without FastAPI's per-request machinery; every
other form, and every error, goes to the route, which says what is wrong. Nothing here is keyed by
raw request text: memory follows the dispatcher's bounded decision cache, whatever the spelling."""
from __future__ import annotations

import json
import re
import time
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import parse_qsl

from dispatcher import AttentionProblem, ProblemError
from dispatcher.problem import FIELDS

from .auth import write_refusal
from .guard import MAX_BODY_BYTES, MAX_QUERY_BYTES, log_request

DECISION_PATH = "/v1/decision"
WRITES = {("POST", "/v1/sweeps"), ("DELETE", "/v1/sweeps")}
BODY_CACHE_LIMIT = 4096
_INT = re.compile(r"-1|0|[1-9][0-9]{0,9}")
_INT_FIELDS = {"num_qo_heads", "num_kv_heads", "head_dim", "page_size", "batch_size", "kv_len", "max_kv_len", "q_len",
               "window_left"}
_BOOL_FIELDS = {"causal", "has_sinks"}

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]


def plain_query(query: bytes) -> tuple[AttentionProblem, str | None] | None:
    """The problem and device of a query in the plain form; None for anything else (the route decides)."""
    try:
        pairs = parse_qsl(query.decode("ascii"), keep_blank_values=True)
    except (UnicodeDecodeError, ValueError):
        return None
    fields = dict(pairs)
    if len(fields) != len(pairs):
        return None                                   # a repeated field: the route says which
    device = fields.pop("device", None)
    args: dict[str, Any] = {}
    for k, v in fields.items():
        if k in _INT_FIELDS:
            if not _INT.fullmatch(v):
                return None
            args[k] = int(v)
        elif k in _BOOL_FIELDS:
            if v not in ("true", "false"):
                return None
            args[k] = v == "true"
        elif k in FIELDS:
            args[k] = v
        else:
            return None
    try:
        return AttentionProblem(**args), device
    except (ProblemError, TypeError):
        return None


async def respond(send: Send, status: int, body: bytes, kind: bytes = b"application/json") -> None:
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", kind), (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})


def detail(status: int, text: str) -> tuple[int, bytes]:
    return status, json.dumps({"detail": text}).encode()


class FastLayer:
    """Added with app.add_middleware(FastLayer); it finds the app's state in the ASGI scope."""

    def __init__(self, app: Callable[[Scope, Receive, Send], Awaitable[None]]):
        self.app = app
        self.bodies: dict[int, tuple[Any, bytes]] = {}

    def body(self, dec: Any) -> bytes:
        hit = self.bodies.get(id(dec))
        if hit is None or hit[0] is not dec:       # id() reuse after a reload: check identity
            if len(self.bodies) >= BODY_CACHE_LIMIT:
                self.bodies.clear()
            hit = (dec, json.dumps(dec.to_dict()).encode())
            self.bodies[id(dec)] = hit
        return hit[1]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        t = time.perf_counter()
        status: dict[str, Any] = {"code": 500, "fast": False}

        async def sent(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                status["code"] = message["status"]
            await send(message)
        try:
            refused = self.refusal(scope)
            if refused is not None:
                await respond(sent, *refused)
                return
            receive, refused = await self.bounded_body(scope, receive)
            if refused is not None:
                await respond(sent, *refused)
                return
            status["fast"] = await self.decision(scope, sent)
            if not status["fast"]:
                await self.app(scope, receive, sent)
        finally:
            state = scope["app"].state
            route = DECISION_PATH if status["fast"] else getattr(scope.get("route"), "path", "other")
            state.metrics.observe(route, time.perf_counter() - t)
            log_request(scope, status["code"], time.perf_counter() - t)

    def refusal(self, scope: Scope) -> tuple[int, bytes] | None:
        """414 for an oversized query; 401/403 for a write without a valid token (before its body)."""
        if len(scope.get("query_string", b"")) > MAX_QUERY_BYTES:
            return detail(414, f"the query string is {len(scope['query_string'])} bytes; at most {MAX_QUERY_BYTES} "
                               "are read (POST /v1/decisions takes many problems in a body)")
        method, path = scope["method"], scope["path"]
        if (method, path) in WRITES or (method == "DELETE" and path.startswith("/v1/sweeps/")):
            why = write_refusal(scope["app"].state.token, dict(scope["headers"]).get(b"authorization"))
            if why is not None:
                return detail(*why)
        return None

    async def bounded_body(self, scope: Scope, receive: Receive) -> tuple[Receive, tuple[int, bytes] | None]:
        """A body over MAX_BODY_BYTES is refused (413) by its declared length, or as soon as that many
        bytes have come; a body within it is read here and handed to the app whole."""
        if scope["method"] in ("GET", "HEAD", "OPTIONS"):
            return receive, None
        too_big = detail(413, f"the request body is over {MAX_BODY_BYTES} bytes; send at most "
                              f"{MAX_BODY_BYTES} (1024 problems per POST /v1/decisions)")
        declared = dict(scope["headers"]).get(b"content-length", b"0")
        if not declared.isdigit() or int(declared) > MAX_BODY_BYTES:
            return receive, too_big
        chunks, size, more = [], 0, True
        while more:
            message = await receive()
            if message["type"] != "http.request":
                return receive, None                 # the client went away: the app sees that too
            chunks.append(message.get("body", b""))
            size += len(chunks[-1])
            if size > MAX_BODY_BYTES:
                return receive, too_big
            more = message.get("more_body", False)
        whole = {"type": "http.request", "body": b"".join(chunks), "more_body": False}
        handed = {"done": False}

        async def replay() -> dict[str, Any]:
            if handed["done"]:
                return await receive()               # after the body: disconnects as they come
            handed["done"] = True
            return whole
        return replay, None

    async def decision(self, scope: Scope, send: Send) -> bool:
        """Answer GET /v1/decision in the plain form; False to let the route answer."""
        if scope["method"] != "GET" or scope["path"] != DECISION_PATH:
            return False
        parsed = plain_query(scope.get("query_string", b""))
        if parsed is None:
            return False
        state = scope["app"].state
        try:
            dec = state.dispatchers.get(parsed[1]).choose(parsed[0])
        except (ValueError, LookupError):             # an unknown device, no kernel: the route says so
            return False
        state.metrics.decisions[dec.source] += 1
        await respond(send, 200, self.body(dec))
        return True
