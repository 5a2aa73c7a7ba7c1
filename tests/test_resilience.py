"""Crash and resume, and readers beside a writer, with real processes."""
import re
import signal
import sqlite3
import subprocess
import sys
import time

import pytest

from tests.conftest import ROOT

# in the sweep's own process (--no-isolate): what is tested is the store's writes, which the parent
# makes either way, and a worker per run would double each run's start-up
SWEEP = [sys.executable, "-m", "tuner", "sweep", "--model", "llama-3.1-8b", "--quick", "--phases", "decode",
         "--kv-dtypes", "bf16", "--out-dtypes", "bf16,fp8", "--device", "cpu", "--no-isolate"]
N_PROBLEMS = 12


def keys(db):
    try:
        c = sqlite3.connect(db)
        return sorted(c.execute("select problem_key, pipeline, status from measurements").fetchall())
    except sqlite3.OperationalError:        # killed before the store was created
        return []


def winners(db):
    try:
        return sqlite3.connect(db).execute("select count(*) from winners").fetchone()[0]
    except sqlite3.OperationalError:
        return 0


def run(db, **kw):
    return subprocess.run([*SWEEP, "--db", str(db)], cwd=ROOT, capture_output=True, text=True, timeout=600, **kw)


def kill_after(db, done: int, extra_s: float) -> None:
    p = subprocess.Popen([*SWEEP, "--db", str(db)], cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    end = time.time() + 300
    while winners(db) < done and p.poll() is None and time.time() < end:
        time.sleep(0.02)
    time.sleep(extra_s)                       # 0: right after a commit; > 0: mid-problem
    p.send_signal(signal.SIGKILL)
    p.wait()


@pytest.mark.slow
def test_sigkill_at_any_point_loses_and_duplicates_nothing(tmp_path):
    ref = tmp_path / "ref.db"
    assert run(ref).returncode == 0
    expected = [(k, p) for k, p, _ in keys(ref)]
    assert len(expected) == 2 * N_PROBLEMS
    db = tmp_path / "killed.db"
    seen = []
    for done, extra in ((0, 1.0), (1, 0.0), (3, 0.05), (6, 0.3), (9, 0.0)):
        kill_after(db, done, extra)
        now = keys(db)
        # never a half-written problem: each stored problem has all its pipelines and its winner
        by_problem = {}
        for k, p, _ in now:
            by_problem.setdefault(k, set()).add(p)
        assert all(len(v) == 2 for v in by_problem.values())
        assert winners(db) == len(by_problem)
        seen.append(len(by_problem))
    assert seen == sorted(seen) and seen[-1] < N_PROBLEMS    # progress kept, never lost
    r = run(db)
    assert r.returncode == 0 and re.search(rf"\b{seen[-1]} problems? already measured", r.stdout)
    assert [(k, p) for k, p, _ in keys(db)] == expected      # same set as the uninterrupted run, no duplicates


READER = r"""
import os, sys, time
from dispatcher import load
db, done, until = sys.argv[1], sys.argv[2], time.time() + 120
sizes, errors = [], 0
while not os.path.exists(done) and time.time() < until:
    try:
        d = load(db, "cpu")
        t = d.table
        for b, timings in t.by_cell.items():
            assert len(timings) == 2, f"partial problem {b.key()}: {list(timings)}"
            d.choose(b)
        sizes.append(len(t))
    except Exception as e:
        errors += 1
        print("ERR", type(e).__name__, e, file=sys.stderr)
print(len(sizes), min(sizes, default=-1), max(sizes, default=-1), errors)
"""


@pytest.mark.slow
def test_readers_see_whole_tables_while_a_sweep_writes(tmp_path):
    db = tmp_path / "shared.db"
    from tuner.store import Store
    Store(db).close()
    done = tmp_path / "writer-done"
    readers = [subprocess.Popen([sys.executable, "-c", READER, str(db), str(done)], cwd=ROOT, text=True,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE) for _ in range(3)]
    half = [a if a != "bf16,fp8" else "bf16" for a in SWEEP]      # six problems: enough to watch the table grow
    writer = subprocess.Popen([*half, "--db", str(db)], cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    writer.wait(timeout=600)
    done.touch()                               # the readers read while the writer wrote, then stop
    outs = [r.communicate(timeout=120) for r in readers]
    assert writer.returncode == 0, writer.stderr.read()
    for out, err in outs:
        loads, lo, hi, errors = map(int, out.split())
        assert errors == 0 and "locked" not in err, err
        assert loads > 10 and hi > lo          # each reader saw the table grow, whole each time


@pytest.mark.slow
def test_a_snapshot_taken_while_a_sweep_writes_keeps_its_finished_rows(tmp_path):
    # benchmarks/snapshot_db.py copies a device step's database into $OUT every 30 s (benchmarks/h200_sets.sh): a
    # call the device cuts short still returns what it measured. The sweep here is killed as the device kills it.
    db, out = tmp_path / "live.db", tmp_path / "out.db"
    sweep = subprocess.Popen([*SWEEP, "--db", str(db)], cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    snap = subprocess.Popen([sys.executable, "benchmarks/snapshot_db.py", str(db), str(out), "--every", "0.2"],
                            cwd=ROOT, stdout=subprocess.DEVNULL)
    try:
        end = time.time() + 300
        while winners(db) < 3 and sweep.poll() is None and time.time() < end:
            time.sleep(0.02)
        finished = keys(db)
        assert finished, "the sweep stored nothing before it was cut"
        time.sleep(1.0)                       # several snapshot rounds after those rows
    finally:
        sweep.send_signal(signal.SIGKILL)
        sweep.wait()
        snap.send_signal(signal.SIGKILL)
        snap.wait()
    copy = sqlite3.connect(out)
    assert copy.execute("pragma integrity_check").fetchone()[0] == "ok"
    assert set(finished) <= set(keys(out)), "rows the sweep had finished are missing from the snapshot"
