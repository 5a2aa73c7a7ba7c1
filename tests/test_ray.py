"""tuner sweep --ray on the CPU: a local Ray instance, shards as Ray tasks running the CPU runners,
their measurements merged into the caller's database; a rerun measures nothing new."""
import json
import sqlite3
import subprocess
import sys

import pytest

from tests.conftest import ROOT, small
from tuner.problem_files import write_problems

pytest.importorskip("ray")


def _sweep(db, probs, *extra):
    env = {"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "COLUMNS": "250", "RAY_ADDRESS": "",
           "HOME": str(db.parent)}
    listed = ["--problems", str(probs)] if probs else ["--model", "llama4-scout"]
    return subprocess.run([sys.executable, "-m", "tuner", "sweep", *listed, "--db", str(db),
                           "--tactics", "default", "--no-isolate", "--ray", *extra],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)


@pytest.mark.slow
def test_local_ray_shards_merge_into_the_callers_database(tmp_path):
    probs = tmp_path / "p.jsonl"
    ps = [small(batch_size=b, kv_len=kv) for b in (1, 2, 4) for kv in (64, 256)]
    write_problems(probs, ps)
    db = tmp_path / "h.db"
    r = _sweep(db, probs, "--shards", "3")          # `--ray` with no address: a local instance
    assert r.returncode == 0, r.stderr[-3000:]
    assert "ray: 6 problems in 3 shards over" in r.stderr
    assert "6 problems" in r.stdout and "0 problems already measured" in r.stdout
    c = sqlite3.connect(db)
    assert c.execute("select count(*) from environments").fetchone()[0] == 1
    assert {k for (k,) in c.execute("select problem_key from winners")} == {p.key() for p in ps}
    assert c.execute("select count(*) from measurements where status = 'ok'").fetchone()[0] >= 6
    before = c.execute("select count(*), max(created_at) from measurements").fetchone()
    c.close()
    again = _sweep(db, probs, "--shards", "2")
    assert again.returncode == 0, again.stderr[-3000:]
    assert "0 pipelines measured" in again.stdout and "6 problems already measured" in again.stdout
    c = sqlite3.connect(db)
    assert c.execute("select count(*), max(created_at) from measurements").fetchone() == before


def test_bad_shard_count_is_refused(tmp_path):
    probs = tmp_path / "p.jsonl"
    probs.write_text(json.dumps(small().to_dict()) + "\n")
    r = _sweep(tmp_path / "h.db", probs, "local", "--shards", "0")
    assert r.returncode == 2 and "--shards 0 must be at least 1" in r.stderr


@pytest.mark.slow
def test_tiles_on_cpu_workers_leave_no_database(tmp_path):
    db = tmp_path / "h.db"
    r = _sweep(db, None, "--tiles")
    assert r.returncode != 0 and "has none: sweep a CUDA device, or leave out tiles (--tiles)" in r.stderr
    assert not db.exists()
