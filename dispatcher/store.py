"""Read side of the store: stdlib sqlite3, read-only, loaded once into memory."""
from __future__ import annotations

import os
import sqlite3
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .device import folded
from .schema import SCHEMA_VERSION, StoreError

if TYPE_CHECKING:
    from .problem import AttentionProblem

DEFAULT_DB = "heuristics.db"
ENV_VAR = "SWITCHYARD_DB"
MISSES_KEPT = 10_000    # rows of the misses table; beyond it the rarest, then the oldest, are dropped
DbPath = str | os.PathLike[str] | None      # None: $SWITCHYARD_DB, else ./heuristics.db


def default_path(db: DbPath = None) -> Path:
    return Path(db or os.environ.get(ENV_VAR) or DEFAULT_DB)


def check_version(conn: sqlite3.Connection, path: Path) -> int:
    try:
        row = conn.execute("select value from meta where key = 'schema_version'").fetchone()
    except sqlite3.OperationalError as e:
        if "no such table" not in str(e):
            raise                                   # not our verdict: let the caller retry or explain
        raise StoreError(f"{path} is not a Switchyard database ({e}); give a heuristics.db written by "
                         "`tuner sweep` (a .db.xz from benchmarks/results: `xz -dk` it first)") from None
    except sqlite3.DatabaseError as e:
        raise StoreError(f"{path} is not a Switchyard database ({e}); give a heuristics.db written by "
                         "`tuner sweep` (a .db.xz from benchmarks/results: `xz -dk` it first)") from None
    version = int(row[0]) if row else 0
    if version > SCHEMA_VERSION:
        raise StoreError(f"{path} has schema version {version}, newer than this Switchyard knows "
                         f"({SCHEMA_VERSION}); upgrade Switchyard to read it")
    return version


def open_readonly(db: DbPath = None) -> sqlite3.Connection | None:
    """A read-only connection, or None when the file does not exist (no measurements yet)."""
    path = default_path(db)
    if not path.exists():
        return None
    if path.is_dir():
        raise StoreError(f"{path} is a directory; give a heuristics.db file")
    last = None
    # mode=ro still needs to create the WAL index beside the file; in a read-only directory
    # immutable=1 reads the file as it is (nothing else may be writing it then)
    for flags in ("mode=ro", "mode=ro&immutable=1"):
        try:
            conn = sqlite3.connect(f"file:{path}?{flags}", uri=True, timeout=10)
            conn.row_factory = sqlite3.Row
            check_version(conn, path)
            return conn
        except StoreError:
            raise
        except sqlite3.OperationalError as e:
            last = e
        except sqlite3.DatabaseError as e:
            raise StoreError(f"{path} cannot be read as SQLite ({e}); give a heuristics.db written by "
                             "`tuner sweep`") from None
    raise StoreError(f"{path} cannot be opened ({last}); check its permissions") from None


def environments(conn: sqlite3.Connection) -> list[dict[str, Any]]:
    return [dict(r) for r in conn.execute("select * from environments order by id")]


def last_device_name(db: DbPath) -> str | None:
    """The device of the newest environment in `db` (what a report is about when none is named)."""
    conn = open_readonly(db)
    if conn is None:
        return None
    try:
        envs = environments(conn)
        return str(envs[-1]["device_name"]) if envs else None
    finally:
        conn.close()


def device_names(db: DbPath) -> list[str]:
    """The devices of `db`'s environments, sorted (none: an empty or missing db)."""
    conn = open_readonly(db)
    if conn is None:
        return []
    try:
        return sorted({str(e["device_name"]) for e in environments(conn)})
    finally:
        conn.close()


def ok_measurements(conn: sqlite3.Connection, env_ids: list[int]) -> list[sqlite3.Row]:
    marks = ",".join("?" * len(env_ids))
    return conn.execute(f"select * from measurements where status = 'ok' and env_id in ({marks}) "
                        "order by env_id, id", env_ids).fetchall()


def add_misses(db: DbPath, device_name: str, timing_mode: str,
               counts: Mapping[AttentionProblem, tuple[str, int]]) -> None:
    """Add miss counts {problem: (source, n)}; a short write transaction, off the hot path."""
    import datetime as dt

    from .schema import MISSES_DDL, PROBLEM_COLUMNS, SQL_TYPES
    path = default_path(db)
    if not path.exists() or not counts:
        return
    stamp = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
    conn = sqlite3.connect(str(path), timeout=10)
    try:
        check_version(conn, path)
        with conn:
            conn.execute(MISSES_DDL)
            have = {r[1] for r in conn.execute("pragma table_info(misses)")}
            for col, kind in PROBLEM_COLUMNS.items():       # a database this reader never migrated (schema 4)
                if col not in have:
                    conn.execute(f"alter table misses add column {col} {SQL_TYPES[kind]}")
            cols = ["device_name", "timing_mode", "problem_key", *PROBLEM_COLUMNS, "source", "count", "last_seen"]
            sql = (f"insert into misses ({', '.join(cols)}) values ({', '.join('?' * len(cols))}) "
                   "on conflict (device_name, timing_mode, problem_key) do update set "
                   "count = count + excluded.count, source = excluded.source, last_seen = excluded.last_seen")
            for p, (source, n) in counts.items():
                vals = [int(v) if isinstance(v, bool) else v for v in (getattr(p, c) for c in PROBLEM_COLUMNS)]
                conn.execute(sql, [device_name, timing_mode, p.key(), *vals, source, n, stamp])
            conn.execute("delete from misses where rowid in (select rowid from misses order by count asc, "
                         "last_seen asc limit max(0, (select count(*) from misses) - ?))", [MISSES_KEPT])
    finally:
        conn.close()


def misses(conn: sqlite3.Connection, device_name: str | None = None, limit: int = 100) -> list[dict[str, Any]]:
    """The most frequent misses, of the device named in any case and spacing (as decisions take it), or of all."""
    conn.create_function("folded", 1, folded)
    try:
        where, args = ("where folded(device_name) = ?", [folded(device_name)]) if device_name else ("", [])
        return [dict(r) for r in conn.execute(
            f"select * from misses {where} order by count desc, problem_key limit ?", [*args, limit])]
    except sqlite3.OperationalError:       # a database from before the misses table
        return []


def signature(db: DbPath) -> tuple[tuple[int, int] | None, ...]:
    """A cheap change check: size and mtime of the database and its WAL."""
    path = default_path(db)
    out: list[tuple[int, int] | None] = []
    for p in (path, path.with_name(path.name + "-wal")):
        try:
            st = p.stat()
            out.append((st.st_mtime_ns, st.st_size))
        except OSError:
            out.append(None)
    return tuple(out)


def content_version(db: DbPath) -> tuple[Any, ...] | None:
    """What the table is built from, in three numbers: changes only when measurements do."""
    conn = open_readonly(db)
    if conn is None:
        return None
    try:
        m = conn.execute("select coalesce(max(id), 0), count(*), coalesce(max(created_at), '') from "
                         "measurements").fetchone()
        e = conn.execute("select count(*) from environments").fetchone()[0]
        return (*m, e)
    finally:
        conn.close()
