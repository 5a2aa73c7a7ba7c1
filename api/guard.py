"""What bounds the daemon's memory and connections under hostile traffic, before the app sees a byte.

- a connection must deliver a whole request (headers and body) within REQUEST_TIMEOUT_S of opening
  or of its previous response, or it is closed (half-open and trickling connections held 800
  sockets open before);
- at most MAX_CONNECTIONS connections are open; further ones are closed at once;
- headers are at most MAX_HEADER_BYTES (h11 answers 400 beyond), a query string at most
  MAX_QUERY_BYTES (414) and a body at most MAX_BODY_BYTES (413; api/fast.py reads it before the app);
- the access log is one line per request with the target cut to LOG_TARGET_CHARS.
The numbers are in benchmarks/results/hostile-flood.txt, measured under a flood."""
from __future__ import annotations

import asyncio
import logging
from typing import Any

from uvicorn.protocols.http.h11_impl import H11Protocol

REQUEST_TIMEOUT_S = 10.0
MAX_CONNECTIONS = 512
LIMIT_CONCURRENCY = 256          # uvicorn's own cap on requests in flight: 503 beyond
MAX_HEADER_BYTES = 16 * 1024
MAX_QUERY_BYTES = 2048
MAX_BODY_BYTES = 1 << 20         # 1024 problems of POST /v1/decisions take ~300 KB
LOG_TARGET_CHARS = 160

access = logging.getLogger("switchyard.access")


class GuardedH11(H11Protocol):
    """uvicorn's h11 protocol with a deadline for each request to arrive, and a connection cap."""

    request_timeout_s = REQUEST_TIMEOUT_S
    max_connections = MAX_CONNECTIONS

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._deadline: asyncio.TimerHandle | None = None
        self._awaited: Any = None
        if len(self.connections) > self.max_connections:
            transport.close()
            return
        self._arm()

    def _arm(self) -> None:
        self._deadline = self.loop.call_later(self.request_timeout_s, self._too_slow)
        self._awaited = self.cycle             # a new request is one that is not this cycle

    def _too_slow(self) -> None:
        if self.cycle is self._awaited or (self.cycle is not None and self.cycle.more_body):
            self.transport.close()             # nothing (or not all) of a request came in time

    def handle_events(self) -> None:
        super().handle_events()
        arrived = self.cycle is not None and self.cycle is not self._awaited and not self.cycle.more_body
        if arrived and self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def on_response_complete(self) -> None:
        if not self.transport.is_closing():    # the next request on this connection gets its own deadline
            if self._deadline is not None:     # (armed first: a pipelined request handled below counts as come)
                self._deadline.cancel()
            self._arm()
        super().on_response_complete()

    def connection_lost(self, exc: Exception | None) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
        super().connection_lost(exc)


def uvicorn_settings(request_timeout_s: float = REQUEST_TIMEOUT_S,
                     max_connections: int = MAX_CONNECTIONS) -> dict[str, Any]:
    """Keyword arguments for uvicorn.run that apply the bounds above."""
    protocol = type("GuardedH11", (GuardedH11,), {"request_timeout_s": request_timeout_s,
                                                  "max_connections": max_connections})
    return {"http": protocol, "limit_concurrency": min(LIMIT_CONCURRENCY, max_connections),
            "h11_max_incomplete_event_size": MAX_HEADER_BYTES, "timeout_keep_alive": 5, "access_log": False}


def log_request(scope: dict[str, Any], status: int, seconds: float) -> None:
    if access.isEnabledFor(logging.INFO):
        query = scope.get("query_string", b"").decode("latin-1")
        target = scope.get("path", "") + (f"?{query}" if query else "")
        if len(target) > LOG_TARGET_CHARS:
            target = f"{target[:LOG_TARGET_CHARS]}...({len(target)} chars)"
        client = scope.get("client") or ("-", 0)
        access.info('%s "%s %s" %d %.1f ms', client[0], scope.get("method", "-"), target, status, seconds * 1e3)
