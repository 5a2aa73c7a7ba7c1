import sqlite3

import pytest

from dispatcher import StoreError, load
from dispatcher.schema import SCHEMA_VERSION
from tuner.store import Store


def test_new_store_has_schema_version_and_wal(db_path, cpu):
    s = Store(db_path)
    env = s.environment(cpu, "wall")
    assert s.environment(cpu, "wall") == env            # same environment, same id
    assert s.environment(cpu, "graph") != env           # the timing mode is part of the key
    s.close()
    c = sqlite3.connect(db_path)
    assert c.execute("pragma journal_mode").fetchone()[0] == "wal"
    assert c.execute("select value from meta where key='schema_version'").fetchone()[0] == str(SCHEMA_VERSION)


def test_newer_schema_is_refused_with_a_clear_message(db_path):
    Store(db_path).close()
    c = sqlite3.connect(db_path)
    c.execute("update meta set value = '99' where key = 'schema_version'")
    c.commit()
    c.close()
    with pytest.raises(StoreError, match=f"schema version 99, newer than this Switchyard knows \\({SCHEMA_VERSION}\\)"):
        Store(db_path)
    with pytest.raises(StoreError, match="upgrade Switchyard"):
        load(db_path, "cpu")


def test_other_programs_sqlite_and_garbage_are_refused(tmp_path):
    other = tmp_path / "other.db"
    c = sqlite3.connect(other)
    c.execute("create table songs (title text)")
    c.commit()
    with pytest.raises(StoreError, match="SQLite file of another program"):
        Store(other)
    junk = tmp_path / "junk.db"
    junk.write_bytes(b"\x00garbage" * 100)
    with pytest.raises(StoreError, match="junk.db"):
        Store(junk)
    with pytest.raises(StoreError, match="junk.db"):
        load(junk, "cpu")


def test_a_missing_database_is_an_error_unless_missing_ok(tmp_path):
    from tests.conftest import small
    with pytest.raises(StoreError, match=r"heuristcs.db: no such database; .* missing_ok=True"):
        load(tmp_path / "heuristcs.db", "cpu")         # a typo used to decide by rule alone, quietly
    dec = load(tmp_path / "heuristcs.db", "cpu", missing_ok=True).choose(small())
    assert dec.source == "rule" and "vllm-0.33" in dec.reason
    from dispatcher.device import describe
    from dispatcher.dispatch import Dispatcher
    from dispatcher.table import Table
    built = Dispatcher(Table(), describe("cpu")).choose(small()).reason     # handed a table: not "--db none"
    assert "no measurement of this shape family" in built and "--db none" not in built
