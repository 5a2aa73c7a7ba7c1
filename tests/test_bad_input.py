"""Bad databases and bad flags: one readable line (exit 2) or a read-only mode, never a traceback."""
import os
import sqlite3
import stat

from dispatcher import load
from tests.conftest import small
from tests.test_cli import tuner

DECIDE = ["decide", "--phase", "decode", "--num-qo-heads", "8", "--num-kv-heads", "2", "--head-dim", "64",
          "--batch-size", "4", "--kv-len", "256", "--json"]


def one_line_error(r, fragment):
    assert r.returncode == 2, r.stderr
    lines = [x for x in r.stderr.strip().splitlines() if x.strip()]
    assert len(lines) == 1 and "Traceback" not in r.stderr, r.stderr
    assert fragment in lines[0], lines[0]


def test_a_missing_database_is_an_error_and_db_none_answers_by_rule(tmp_path):
    # a mistyped --db used to answer from the rule with rc 0, as if nothing were wrong
    for cmd in (DECIDE, ["show"], ["report"], ["evaluate"], ["export", "--out", str(tmp_path / "x.jsonl")]):
        one_line_error(tuner(*cmd, "--db", str(tmp_path / "none.db")), "none.db: no such database")
    r = tuner(*DECIDE, "--db", "none", "--device", "cpu")
    assert r.returncode == 0 and '"source": "rule"' in r.stdout
    assert "no database (--db none, rule_only): rule vllm-0.33 picks" in r.stdout   # not "no measurement of ..."


def test_garbage_other_program_newer_schema(tmp_path):
    junk = tmp_path / "junk.db"
    junk.write_bytes(os.urandom(4096))
    one_line_error(tuner(*DECIDE, "--db", str(junk)), "junk.db")
    other = tmp_path / "other.db"
    sqlite3.connect(other).execute("create table songs (t text)")
    one_line_error(tuner(*DECIDE, "--db", str(other)), "is not a Switchyard database")
    one_line_error(tuner("sweep", "--quick", "--db", str(other)), "SQLite file of another program")
    newer = tmp_path / "newer.db"
    from tuner.store import Store
    Store(newer).close()
    c = sqlite3.connect(newer)
    c.execute("update meta set value = '7' where key = 'schema_version'")
    c.commit()
    one_line_error(tuner(*DECIDE, "--db", str(newer)), "schema version 7, newer than this Switchyard knows")
    one_line_error(tuner("show", "--db", str(tmp_path)), "is a directory")




def test_read_only_directory_reads_and_refuses_writes(swept_db, tmp_path):
    ro = tmp_path / "ro"
    ro.mkdir()
    db = ro / "heuristics.db"
    src = sqlite3.connect(swept_db[0])
    dst = sqlite3.connect(db)
    src.backup(dst)                                    # a clean copy (no -wal beside it)
    dst.close()
    os.chmod(db, stat.S_IRUSR | stat.S_IRGRP)
    os.chmod(ro, stat.S_IRUSR | stat.S_IXUSR)
    try:
        d = load(db, "cpu")                            # read-only mode
        assert d.choose(small(batch_size=4, kv_len=256)).source == "measured"
        if os.geteuid() != 0:                          # root may write anyway
            one_line_error(tuner("sweep", "--quick", "--db", str(db)), "cannot be written")
    finally:
        os.chmod(ro, stat.S_IRWXU)


def test_a_database_in_a_missing_directory_is_named_as_such(tmp_path):
    # it was reported as read-only
    one_line_error(tuner("sweep", "--quick", "--db", str(tmp_path / "nodir" / "x.db")),
                   f"its directory {tmp_path / 'nodir'} does not exist")
    assert not (tmp_path / "nodir").exists()


def test_bad_flags_are_one_line(tmp_path):
    one_line_error(tuner("decide", "--batch-size", "lots"), "Invalid value for '--batch-size'")
    one_line_error(tuner("sweep", "--no-such-flag"), "No such option: --no-such-flag")
    one_line_error(tuner("evaluate", "--holdout", "2", "--db", str(tmp_path / "x.db")), "--holdout 2.0 is out of range")
    one_line_error(tuner("sweep", "--tp", "3", "--db", str(tmp_path / "x.db"), "--device", "cpu"),
                   "tp 3 does not divide")


def test_a_file_error_names_the_path_and_the_fix(swept_db, tmp_path):
    """Not a bare "[Errno 21] Is a directory": the path, what is wrong and what to do."""
    folder = tmp_path / "out"
    folder.mkdir()
    r = tuner("export", "--db", str(swept_db[0]), "--out", str(folder))
    assert r.returncode == 2 and f"error: {folder}: it is a folder; name a file" in r.stderr
    r = tuner("export", "--db", str(swept_db[0]), "--out", str(tmp_path / "no" / "x.jsonl"))
    assert r.returncode == 2 and "x.jsonl: no such file or folder; check the path" in r.stderr


def test_a_reader_that_stops_early_gets_no_error(swept_db):
    """`tuner show --json | head`: the pipe closing is not an error to print."""
    import subprocess
    import sys
    r, w = os.pipe()
    os.close(r)
    with os.fdopen(w, "w") as closed:
        p = subprocess.run([sys.executable, "-m", "tuner", "show", "--db", str(swept_db[0]), "--json"], stdout=closed,
                           stderr=subprocess.PIPE, text=True)
    assert p.returncode == 1 and p.stderr == ""


def test_file_errors_read_as_what_to_do():
    import errno

    from tuner.cli.app import os_advice
    assert os_advice(OSError(errno.EACCES, "Permission denied", "/srv/h.db")) == \
        "/srv/h.db: not permitted for this user; name a path you can use"
    assert os_advice(OSError(errno.ENOTDIR, "Not a directory", "/tmp/f/x")) == \
        "/tmp/f/x: a part of the path is a file, not a folder"
    assert os_advice(OSError(errno.ENOENT, "No such file", "/a", None, "/b/c")).startswith("/a -> /b/c: no such file")
    assert os_advice(OSError(errno.EIO, "Input/output error", "/x")) == "/x: Input/output error"
