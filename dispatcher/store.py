"""Read side of the store: stdlib sqlite3, read-only, loaded once into memory."""
from __future__ import annotations

import os
import sqlite3
from pathlib import Path

from .schema import SCHEMA_VERSION, StoreError

DEFAULT_DB = "heuristics.db"
ENV_VAR = "SWITCHYARD_DB"


def default_path(db: str | os.PathLike | None = None) -> Path:
    return Path(db or os.environ.get(ENV_VAR) or DEFAULT_DB)


def check_version(conn: sqlite3.Connection, path: Path) -> int:
    try:
        row = conn.execute("select value from meta where key = 'schema_version'").fetchone()
    except sqlite3.DatabaseError as e:
        raise StoreError(f"{path} is not a Switchyard database ({e}); point --db at a heuristics.db "
                         "written by `tuner sweep`, or at a new path") from None
    version = int(row[0]) if row else 0
    if version > SCHEMA_VERSION:
        raise StoreError(f"{path} has schema version {version}, newer than this Switchyard knows "
                         f"({SCHEMA_VERSION}); upgrade Switchyard to read it")
    return version


def open_readonly(db: str | os.PathLike | None = None) -> sqlite3.Connection | None:
    """A read-only connection, or None when the file does not exist (no measurements yet)."""
    path = default_path(db)
    if not path.exists():
        return None
    try:
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=10)
        conn.row_factory = sqlite3.Row
        check_version(conn, path)
    except sqlite3.DatabaseError as e:
        raise StoreError(f"{path} cannot be read as SQLite ({e}); point --db at a heuristics.db") from None
    return conn


def environments(conn: sqlite3.Connection) -> list[dict]:
    return [dict(r) for r in conn.execute("select * from environments order by id")]


def ok_measurements(conn: sqlite3.Connection, env_ids: list[int]) -> list[sqlite3.Row]:
    marks = ",".join("?" * len(env_ids))
    return conn.execute(f"select * from measurements where status = 'ok' and env_id in ({marks}) "
                        "order by env_id, id", env_ids).fetchall()
