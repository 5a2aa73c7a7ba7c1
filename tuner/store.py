"""Write side of the store (sqlite-utils). One transaction per problem: a crash loses no finished row."""
from __future__ import annotations

import contextlib
import datetime as dt
import json
import os
import sqlite3
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import sqlite_utils

from dispatcher.device import DeviceInfo
from dispatcher.pipeline import Pipeline
from dispatcher.problem import AttentionProblem
from dispatcher.schema import (
    ADDED_IN_4,
    ADDED_IN_5,
    ADDED_IN_6,
    ENVIRONMENTS,
    MEASUREMENTS,
    MISSES_DDL,
    SCHEMA_VERSION,
    TRIALS_DDL,
    WINNERS,
    StoreError,
)
from dispatcher.store import check_version, default_path
from dispatcher.table import Ranking, problem_of

# a measurement's status (tuner/measure.py); screened: not measured, the adaptive search ruled it out
STATUSES = ("ok", "inaccurate", "failed", "unsupported", "screened")
RETRIED = ("failed", "inaccurate")     # what --retry-failed measures again


def kept(statuses: dict[str, str], retry_failed: bool, screening: bool = False) -> set[str]:
    """The stored pipelines a rerun does not measure again (inaccurate too: a rerun with another --max-relerr,
    or a fixed kernel, must be able to check them again). Screened ones only where the rerun screens too
    (an adaptive search): any other sweep measures them."""
    return {pid for pid, status in statuses.items()
            if (not retry_failed or status not in RETRIED) and (screening or status != "screened")}


def now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")


def balance_key(row: Mapping[str, Any]) -> tuple[str, float]:
    """A measurement row from before schema 5 measured at its own lengths: the key that carries their
    kv_balance, and the balance."""
    p = problem_of(row)
    return p.key(), p.kv_balance


def _cc(device: DeviceInfo) -> str:
    return ".".join(map(str, device.compute_capability)) if device.compute_capability else ""


def _env_key(device: DeviceInfo, timing_mode: str) -> str:
    v = device.versions
    return "|".join([device.name, _cc(device), timing_mode, v.get("torch", ""), v.get("cuda", ""),
                     v.get("flashinfer", "")])


class Store:
    def __init__(self, db: str | os.PathLike | None = None):
        self.path = default_path(db)
        if self.path.is_dir():
            raise StoreError(f"{self.path} is a directory; give --db a file path such as heuristics.db")
        if not self.path.parent.is_dir():
            raise StoreError(f"{self.path} cannot be created: its directory {self.path.parent} does not exist; "
                             "create it, or give --db a path in an existing one")
        try:
            self.db = sqlite_utils.Database(sqlite3.connect(str(self.path), timeout=30, isolation_level=None))
            self.db.execute("pragma busy_timeout = 30000")
            if not self.path.exists() or self.db.conn.execute("pragma journal_mode").fetchone()[0] != "wal":
                self.db.execute("pragma journal_mode = wal")
            self._migrate()
        except sqlite3.OperationalError as e:
            if "readonly" in str(e) or "unable to open" in str(e):
                raise StoreError(f"{self.path} cannot be written ({e}): the file or its directory is read-only; "
                                 "sweep into a writable --db (decisions can still be read from this one)") from None
            raise StoreError(f"{self.path} cannot be used as a Switchyard database ({e}); "
                             "point --db at a heuristics.db or a new path") from None
        except sqlite3.DatabaseError as e:
            raise StoreError(f"{self.path} cannot be used as a Switchyard database ({e}); "
                             "point --db at a heuristics.db or a new path") from None

    def _key_by_balance(self) -> None:
        """Schema 5: a batch measured at its own lengths takes their kv_balance, and the key that carries it
        (per environment and lengths: one key may have been measured in other layouts elsewhere)."""
        rows = list(self.db.query("select * from measurements where lengths is not null and kv_balance is null "
                                  "group by env_id, problem_key, lengths"))
        for row in rows:
            env, old, lens = row["env_id"], row["problem_key"], row["lengths"]
            new, balance = balance_key(row)
            self.db.execute("update measurements set problem_key = ?, kv_balance = ? where env_id = ? and "
                            "problem_key = ? and lengths = ?", [new, balance, env, old, lens])
            self.db.execute("update winners set problem_key = ?, kv_balance = ? where env_id = ? and problem_key = ?",
                            [new, balance, env, old])
            self.db.execute("update tactic_trials set problem_key = ? where env_id = ? and problem_key = ?",
                            [new, env, old])

    def _migrate(self) -> None:
        if "meta" in self.db.table_names():
            if check_version(self.db.conn, self.path) < SCHEMA_VERSION:
                with self.transaction():                        # 1 -> 2 -> 3: new tables; 4, 5, 6: new columns
                    self.db.execute(MISSES_DDL)
                    self.db.execute(TRIALS_DDL)
                    for added in (ADDED_IN_4, ADDED_IN_5, ADDED_IN_6):
                        for table, columns in added.items():
                            have = {c.name for c in self.db[table].columns}
                            for col, kind in columns.items():
                                if col not in have:
                                    self.db.execute(f"alter table {table} add column {col} {kind}")
                            if "max_kv_len" in columns:     # every batch measured before was uniform
                                self.db.execute(f"update {table} set max_kv_len = kv_len where max_kv_len is null")
                    self._key_by_balance()
                    self.db.execute("update meta set value = ? where key = 'schema_version'", [str(SCHEMA_VERSION)])
            return
        if self.db.table_names():
            raise StoreError(f"{self.path} is a SQLite file of another program (tables: "
                             f"{', '.join(self.db.table_names()[:5])}); point --db at a new path")
        with self.transaction():
            self.db["meta"].create({"key": str, "value": str}, pk="key")
            self.db["meta"].insert({"key": "schema_version", "value": str(SCHEMA_VERSION)})
            self.db["environments"].create(ENVIRONMENTS, pk="id", not_null={"key"})
            self.db["environments"].create_index(["key"], unique=True)
            self.db["measurements"].create(MEASUREMENTS, pk="id", foreign_keys=[("env_id", "environments", "id")])
            self.db["measurements"].create_index(["env_id", "problem_key", "pipeline"], unique=True)
            self.db["winners"].create(WINNERS, pk=("env_id", "problem_key"),
                                      foreign_keys=[("env_id", "environments", "id")])
            self.db.execute(MISSES_DDL)
            self.db.execute(TRIALS_DDL)

    def close(self) -> None:
        self.db.conn.close()

    @contextlib.contextmanager
    def transaction(self):
        """One atomic write. The connection is in autocommit mode (isolation_level=None), where
        `with conn:` alone would commit every statement on its own. Inside another, it joins that one."""
        if self.db.conn.in_transaction:
            yield
            return
        self.db.execute("begin immediate")
        try:
            yield
        except BaseException:
            self.db.execute("rollback")
            raise
        self.db.execute("commit")

    # -- environments ----------------------------------------------------------------
    def existing_environment(self, device: DeviceInfo, timing_mode: str) -> int | None:
        """The id of this device's environment, or None where nothing was stored for it yet."""
        row = self.db.execute("select id from environments where key = ?", [_env_key(device, timing_mode)]).fetchone()
        return row[0] if row else None

    def environment(self, device: DeviceInfo, timing_mode: str) -> int:
        found = self.existing_environment(device, timing_mode)
        if found is not None:
            return found
        v = device.versions
        with self.transaction():
            t = self.db["environments"].insert({
                "key": _env_key(device, timing_mode), "device_name": device.name, "device_kind": device.kind,
                "compute_capability": _cc(device),
                "sm_count": device.sm_count, "memory_bytes": device.memory_bytes, "driver": str(v.get("driver", "")),
                "cuda": v.get("cuda", ""), "torch": v.get("torch", ""), "flashinfer": v.get("flashinfer", ""),
                "python": v.get("python", ""), "timing_mode": timing_mode, "created_at": now()})
        return t.last_pk

    # -- measurements ----------------------------------------------------------------
    def measured_pipelines(self, env_id: int, problem: AttentionProblem, retry_failed: bool = False) -> set[str]:
        return kept(self.statuses(env_id, problem), retry_failed)

    def statuses(self, env_id: int, problem: AttentionProblem) -> dict[str, str]:
        """Each stored pipeline's status for this problem."""
        rows = self.db.execute("select pipeline, status from measurements where env_id = ? and problem_key = ?",
                               [env_id, problem.key()])
        return {r[0]: r[1] for r in rows}

    def screened(self, env_id: int) -> list[tuple[AttentionProblem, str]]:
        """Each (problem, pipeline id) an adaptive search screened out in this environment (tuner/search/screen.py)."""
        rows = self.db.query("select * from measurements where env_id = ? and status = 'screened'", [env_id])
        return [(problem_of(r), r["pipeline"]) for r in rows]

    def winner(self, env_id: int, problem: AttentionProblem) -> str | None:
        """The stored winner's pipeline id (None: no pipeline ran accurately)."""
        row = self.db.execute("select pipeline from winners where env_id = ? and problem_key = ?",
                              [env_id, problem.key()]).fetchone()
        return row[0] if row else None

    def record(self, env_id: int, problem: AttentionProblem, results: list[dict], ranking: Ranking | None,
               alone: bool = False) -> None:
        """Store one problem's measurements and its winner atomically (one transaction); `alone`: measured as a
        shape of its own, not a point of a sweep's grid (SweepOptions.alone)."""
        prob = {k: (int(v) if isinstance(v, bool) else v) for k, v in problem.to_dict().items() if k != "seq_lens"}
        base = {"env_id": env_id, "problem_key": problem.key(), **prob}
        laid = {"lengths": json.dumps(problem.seq_lens)} if problem.seq_lens is not None else {}
        stamp = now()
        with self.transaction():
            for r in results:
                self.db["measurements"].insert({**base, **r, **laid, "alone": int(alone), "created_at": stamp},
                                               replace=True)
            if ranking is not None:
                w, ru = ranking.winner, ranking.runner_up
                self.db["winners"].insert({
                    **base, **w.pipeline.to_row(), "median_us": w.median_us, "spread_us": w.spread_us,
                    "relerr": w.relerr, "runner_up": ru.pipeline.id if ru else None,
                    "runner_up_us": ru.median_us if ru else None,
                    "margin": (ru.median_us / w.median_us) if ru else None, "tie": int(ranking.tie),
                    "candidates": sum(r["status"] != "screened" for r in results), "created_at": stamp}, replace=True)

    def record_trials(self, env_id: int, problem: AttentionProblem, base: str, trials: list[dict]) -> None:
        stamp = now()
        with self.transaction():
            for t in trials:
                self.db["tactic_trials"].insert({"env_id": env_id, "problem_key": problem.key(), "base": base,
                                                 **t, "created_at": stamp}, replace=True)

    def tuned(self, env_id: int, problem: AttentionProblem, base: str) -> bool:
        """Whether a tactic search already ran for this problem and base pipeline (a sweep resumes)."""
        return self.db.execute("select 1 from tactic_trials where env_id = ? and problem_key = ? and base = ? limit 1",
                               [env_id, problem.key(), base]).fetchone() is not None

    def counts(self) -> dict:
        q = lambda sql: self.db.execute(sql).fetchone()[0]  # noqa: E731
        return {"measurements": q("select count(*) from measurements"), "winners": q("select count(*) from winners")}


def result_row(pipe: Pipeline, status: str, *, median_us=None, min_us=None, max_us=None, spread_us=None,
               reps=0, relerr=None, max_relerr=None, error=None) -> dict:
    return {**pipe.to_row(), "status": status, "median_us": median_us, "min_us": min_us, "max_us": max_us,
            "spread_us": spread_us, "reps": reps, "relerr": relerr, "max_relerr": max_relerr, "error": error}


def is_shipped(path: Path) -> bool:
    """True for the repository's committed heuristics.db (tests must never write it)."""
    return path.resolve() == (Path(__file__).resolve().parent.parent / "heuristics.db")


def timings(store: Store, env_id: int, problem: AttentionProblem):
    """The ok timings of one problem in one environment, as the ranking takes them."""
    from dispatcher.table import Timing
    rows = store.db.execute("select * from measurements where env_id = ? and problem_key = ? and status = 'ok'",
                            [env_id, problem.key()])
    cols = [d[0] for d in rows.description]
    out = []
    for r in rows.fetchall():
        r = dict(zip(cols, r))
        out.append(Timing(Pipeline.from_row(r), r["median_us"], r["spread_us"] or 0.0, r["relerr"]))
    return out
