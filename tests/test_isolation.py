"""Fault isolation: a runner that aborts the process, one that hangs and one that raises; the sweep
completes and records each failure with its reason."""
import json
import re
import sqlite3
import subprocess
import sys

import pytest

from tests.conftest import ROOT, cpu_test_kernel, small

FAULTY = cpu_test_kernel("faulty", "tests.faulty_runner", "misbehaves on purpose",
                         'tactics.cpu.mode = ["ok", "abort", "hang", "raise"]')


@pytest.mark.slow
def test_crash_hang_and_exception_fail_one_pipeline_each(tmp_path):
    reg = tmp_path / "faulty.toml"
    reg.write_text(FAULTY)
    probs = tmp_path / "p.jsonl"
    probs.write_text("".join(json.dumps(small(batch_size=b).to_dict()) + "\n" for b in (1, 4)))
    db = tmp_path / "h.db"
    env = {"SWITCHYARD_KERNELS": str(reg), "SWITCHYARD_RUNNERS": "faulty=tests.faulty_runner:RUNNER",
           "PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"}
    r = subprocess.run([sys.executable, "-m", "tuner", "sweep", "--problems", str(probs), "--device", "cpu",
                        "--db", str(db), "--candidate-timeout", "10"],   # a fresh worker imports torch: slow on 2 cores
                       cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    c = sqlite3.connect(db)
    rows = c.execute("select pipeline, status, error from measurements").fetchall()
    errors = {}
    for pid, status, error in rows:
        errors.setdefault(pid, set()).add((status, error))
    assert errors["faulty[mode=ok]"] == {("ok", None)}
    assert errors["faulty[mode=raise]"] == {("failed", "RuntimeError: injected failure")}
    assert {e for _, e in errors["faulty[mode=abort]"]} == {"crashed the worker (killed by SIGABRT) during check"}
    assert {e for _, e in errors["faulty[mode=hang]"]} == {"timed out (no progress for 10 s) during check"}
    # the healthy pipelines of both problems were measured, and both problems have a winner
    assert {s for pid, s, _ in rows if pid.startswith("torch-sdpa")} == {"ok"}
    assert c.execute("select count(*) from winners").fetchone()[0] == 2
    # a failed pipeline is not retried on resume unless asked
    again = subprocess.run([sys.executable, "-m", "tuner", "sweep", "--problems", str(probs), "--device", "cpu",
                            "--db", str(db)], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert "0 pipelines measured" in again.stdout


LEAKY = cpu_test_kernel("leaky", "tests.leaky_runner", "leaves its worker unable to make another problem's inputs")


def leaky_sweep(tmp_path, mode: str, *more: str):
    """A CPU sweep of three problems with the leaky kernel (tests/leaky_runner.py) in LEAKY_MODE `mode`."""
    reg = tmp_path / "leaky.toml"
    reg.write_text(LEAKY)
    probs = tmp_path / "p.jsonl"
    probs.write_text("".join(json.dumps(small(batch_size=b).to_dict()) + "\n" for b in (1, 2, 4)))
    db = tmp_path / "h.db"
    env = {"SWITCHYARD_KERNELS": str(reg), "SWITCHYARD_RUNNERS": "leaky=tests.leaky_runner:RUNNER",
           "PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "LEAKY_MODE": mode}
    r = subprocess.run([sys.executable, "-m", "tuner", "sweep", "--problems", str(probs), "--device", "cpu",
                        "--db", str(db), *more], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    return r, db


@pytest.mark.parametrize("mode", ["inputs", "memory"])
def test_a_problem_failing_outside_its_pipelines_gets_one_fresh_worker_before_it_is_lost(tmp_path, mode):
    # a worker that cannot make a later problem's inputs, or finds no memory free for it (after earlier problems,
    # say), would mark every pipeline of that problem failed or "does not fit" though it fits a fresh worker
    r, db = leaky_sweep(tmp_path, mode)
    c = sqlite3.connect(db)
    rows = c.execute("select batch_size, pipeline, status, error from measurements").fetchall()
    assert {b for b, *_ in rows} == {1, 2, 4}
    assert [row for row in rows if row[2] != "ok"] == []
    assert c.execute("select count(*) from winners").fetchone()[0] == 3
    assert "measured again in a fresh worker 2 times" in r.stdout, r.stdout     # said, not hidden


@pytest.mark.slow
def test_a_several_device_sweep_says_how_often_a_fresh_worker_measured_again(tmp_path):
    r, db = leaky_sweep(tmp_path, "memory", "--devices", "cpu,cpu")
    assert re.search(r"measured again in a fresh worker \d+ times?", r.stdout), r.stdout
    assert sqlite3.connect(db).execute("select count(*) from measurements where status != 'ok'").fetchone()[0] == 0


def test_a_problem_too_large_for_an_empty_worker_is_not_retried(tmp_path):
    # a problem too large for this machine's whole memory ends "does not fit" without a fresh worker
    probs = tmp_path / "p.jsonl"
    probs.write_text("".join(json.dumps(small(batch_size=b, kv_len=kv).to_dict()) + "\n"
                             for b, kv in ((1, 64), (4096, 1 << 20))))
    db = tmp_path / "h.db"
    r = subprocess.run([sys.executable, "-m", "tuner", "sweep", "--problems", str(probs), "--device", "cpu",
                        "--db", str(db)], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    rows = sqlite3.connect(db).execute("select batch_size, status, error from measurements").fetchall()
    assert {s for b, s, _ in rows if b == 1} == {"ok"}
    big = [(s, e) for b, s, e in rows if b == 4096]
    assert big and all(s == "unsupported" and e.startswith("does not fit") for s, e in big)
    assert "fresh worker" not in r.stdout       # too large for an empty worker too: no worker started for it


def test_the_worker_share_counts_the_warm_up_parts_once(monkeypatch, cpu):
    # "worker" is what the worker's stages leave of the wall time; the warm-up stage's parts
    # ("prepare.*") are inside "prepare", so subtracting them again shrank it (or made it negative)
    import time
    from collections import Counter

    from tuner.isolation import IsolatedMeasurer

    def measured(self, problem, pipes, opts, clock):
        time.sleep(0.1)
        clock.update({"prepare": 0.06, "prepare.warmup": 0.04, "prepare.capture": 0.02})
        return []
    monkeypatch.setattr(IsolatedMeasurer, "_measure", measured)
    clock = Counter()
    IsolatedMeasurer(cpu, "wall", 8).measure(small(), [], None, clock)
    assert clock["prepare"] == 0.06 and clock["prepare.warmup"] == 0.04
    assert 0.035 <= clock["worker"] <= 0.09, clock
