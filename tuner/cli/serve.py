"""tuner serve: the daemon (api/), with its bounds and start-up checks."""
from __future__ import annotations

import sys
from typing import Annotated, Optional

import typer

from dispatcher.store import default_path

from .app import Db, Dev, app, err, friendly, written_db

LOG_LEVELS = ("critical", "error", "warning", "info", "debug", "trace")


@app.command()
@friendly
def serve(host: Annotated[str, typer.Option(help="bind address (loopback by default)")] = "127.0.0.1",
          port: Annotated[int, typer.Option(min=0, max=65535)] = 8177, db: Db = None, device: Dev = None,
          token_file: Annotated[Optional[str], typer.Option(help="file holding the bearer token for write endpoints "
                                                                "(or set SWITCHYARD_TOKEN)")] = None,
          tune_misses: Annotated[bool, typer.Option("--tune-misses", help="measure the most frequent misses when no "
                                                                           "sweep runs (needs writes enabled: a token)")
                                 ] = False,
          tune_misses_without_token: Annotated[bool, typer.Option(
              "--tune-misses-without-token",
              help="tune misses even without a token: unauthenticated readers then choose what this host measures, "
                   "within the bounds POST /v1/sweeps has")] = False,
          refresh_s: Annotated[float, typer.Option(min=0.05, help="how often to check the database for new "
                                                                  "winners")] = 2.0,
          idle_s: Annotated[float, typer.Option(min=0.05, help="idle time before tuning misses")] = 5.0,
          log_level: Annotated[str, typer.Option(help="critical | error | warning | info | debug | trace")] = "info",
          request_timeout_s: Annotated[float, typer.Option(min=0.1, help="a connection must send a whole request "
                                                                         "within this long, or it is closed")] = 10.0,
          max_connections: Annotated[int, typer.Option(min=1, help="open connections at most; more are closed at "
                                                                   "once")] = 512,
          new_db: Annotated[bool, typer.Option("--new-db", help="start with a new, empty database where --db names "
                                                                "none (POST /v1/sweeps fills it with a token, or "
                                                                "tuned misses with --tune-misses-without-token)")
                            ] = False):
    """Run the daemon: decisions over REST (docs at /docs), background sweeps, metrics at /metrics.

    Example: SWITCHYARD_TOKEN=secret tuner serve --tune-misses
    """
    import logging

    import uvicorn

    from api.auth import configured_token
    from api.guard import uvicorn_settings
    from api.main import create_app
    from dispatcher.resolve import device_of
    from dispatcher.store import open_readonly

    from ..store import Store
    if log_level.lower() not in LOG_LEVELS:
        raise ValueError(f"--log-level {log_level!r} is not one of {', '.join(LOG_LEVELS)}")
    token = configured_token(token_file)
    policy = "anyone" if tune_misses_without_token else "writers" if tune_misses else "off"
    _check_port(host, port)                 # before --new-db makes a file: uvicorn would only log the error
    if not default_path(db).exists():
        if not new_db:                      # a mistyped --db would serve the rule alone, and quietly
            raise ValueError(f"{default_path(db)}: no such database; point --db (or $SWITCHYARD_DB) at a "
                             "heuristics.db, run `tuner sweep` to make one, or pass --new-db (with a token, or "
                             "--tune-misses-without-token) to serve an empty one that sweeps or tuned misses fill")
        if not token and policy != "anyone":
            raise ValueError("--new-db needs something to fill the new database: writes enabled (SWITCHYARD_TOKEN or "
                             "--token-file) for POST /v1/sweeps, or --tune-misses-without-token to measure its misses")
        Store(written_db(db, "tuner serve --new-db")).close()
        fills = " and ".join(["POST /v1/sweeps"] * bool(token) + ["tuning misses"] * (policy != "off"))
        err.print(f"{default_path(db)}: a new, empty database ({fills} fills it)", highlight=False)
    conn = open_readonly(db)                # garbage, another program's file, a directory: one line here
    if conn is not None:
        conn.close()
    device_of(db, device)                   # a device neither here nor in the database: one line here
    app = create_app(db=db, device=device, token_file=token_file, tune_misses=policy,
                     refresh_s=refresh_s, idle_s=idle_s)
    for name in ("switchyard.access", "switchyard.sweeps"):     # requests, and each sweep's start and end
        logger = logging.getLogger(name)
        if not logger.handlers:
            logger.addHandler(logging.StreamHandler(sys.stdout))
        logger.setLevel(logging.INFO if log_level.lower() in ("info", "debug", "trace") else logging.WARNING)
    uvicorn.run(app, host=host, port=port, log_level=log_level.lower(),
                **uvicorn_settings(request_timeout_s, max_connections))


def _check_port(host: str, port: int) -> None:
    """ValueError naming the address when it cannot be bound: taken, or not this host's. Every address
    the host resolves to is tried, as uvicorn binds them (IPv6 included)."""
    import socket
    try:
        infos = socket.getaddrinfo(host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as e:
        raise ValueError(f"--host {host!r} does not resolve ({e.strerror}); give an address such as "
                         "127.0.0.1") from None
    for family, kind, proto, _, address in infos:
        with socket.socket(family, kind, proto) as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)     # as uvicorn does: TIME_WAIT is no obstacle
            if family == socket.AF_INET6:
                s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            try:
                s.bind(address)
            except OSError as e:
                raise ValueError(f"cannot listen on {host}:{port} ({e.strerror}): another process holds the port, "
                                 "or the host is not this machine's; pass another --port (or --host)") from None
