import contextlib
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from dispatcher import AttentionProblem
from dispatcher.device import describe

ROOT = Path(__file__).resolve().parent.parent
SHIPPED = ROOT / "heuristics.db"


def cpu_test_kernel(kernel_id: str, runner: str, notes: str, tactics: str = "") -> str:
    """A registry entry (as in dispatcher/kernels.toml) for a CPU decode runner in tests/ (`runner`: its module)."""
    return f"""
[[kernel]]
id = "{kernel_id}"
family = "reference"
library = "tests"
entry_point = "{runner}"
phases = ["decode"]
device_kinds = ["cpu"]
combos = ["bf16/bf16/bf16"]
notes = "{notes}"
{tactics}
"""


def small(**kw) -> AttentionProblem:
    """A problem small enough to measure in well under a second on the CPU."""
    base = dict(phase="decode", num_qo_heads=8, num_kv_heads=2, head_dim=64, page_size=16, batch_size=2, kv_len=128)
    return AttentionProblem(**{**base, **kw})


@pytest.fixture
def db_path(tmp_path) -> Path:
    return tmp_path / "heuristics.db"


@pytest.fixture(scope="session")
def cpu():
    return describe("cpu")


@pytest.fixture(scope="session")
def swept_db(tmp_path_factory, cpu):
    """A real CPU sweep of a few tiny problems, shared by the tests that read it."""
    from tuner.store import Store
    from tuner.sweep import run_sweep
    from tuner.timing import TimingConfig
    from tuner.timing.wall import WallTimer
    path = tmp_path_factory.mktemp("swept") / "heuristics.db"
    probs = [small(batch_size=b, kv_len=kv) for b in (1, 4) for kv in (64, 256)]
    probs += [small(kv_dtype="fp8", out_dtype="fp8", batch_size=2, kv_len=128)]
    probs += [small(phase="prefill", q_len=64, kv_len=128, batch_size=1)]
    store = Store(path)
    # every candidate timed in every round: the CPU's wall clock is noisy beside other test workers,
    # and a candidate dropped after one quiet round could otherwise outrank survivors of a busy one
    report = run_sweep(probs, cpu, store, WallTimer(TimingConfig(rounds=3, round_s=0.002, keep_rounds=3)))
    store.close()
    return path, report


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="session")
def server(swept_db, tmp_path_factory):
    """The real `tuner serve` on a free loopback port, over a copy of the swept database (one for the
    session: the tests that use it only read; its miss counts stay out of the shared database)."""
    import shutil
    served = tmp_path_factory.mktemp("served") / "heuristics.db"
    shutil.copy(swept_db[0], served)
    with serve(served) as url:
        yield url


@contextlib.contextmanager
def serve(path, *args, token=None, cwd=ROOT, env_extra=None, procs=None):
    """`tuner serve` on a free port (`path` None: no --db flag); yields its URL. `procs`, a list, gets the
    process. Another test worker may take the port between our pick and the bind: then a new port."""
    mine = ("SWITCHYARD_TOKEN", "SWITCHYARD_TOKEN_FILE", "SWITCHYARD_DB")
    env = {k: v for k, v in os.environ.items() if k not in mine}
    env["PYTHONPATH"] = str(ROOT)
    env.update(env_extra or {})
    if token:
        env["SWITCHYARD_TOKEN"] = token
    db_flag = ["--db", str(path)] if path is not None else []
    for attempt in range(3):
        port = free_port()
        proc = subprocess.Popen([sys.executable, "-m", "tuner", "serve", "--port", str(port), *db_flag,
                                 "--log-level", "warning", *args],
                                cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env)
        url = f"http://127.0.0.1:{port}"
        if _started(proc, url):
            break
        text = proc.stdout.read().decode()
        if "address already in use" not in text.lower() or attempt == 2:
            raise RuntimeError(text)
    if procs is not None:
        procs.append(proc)
    try:
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()


def _started(proc, url) -> bool:
    """Whether the server answers /healthz within 60 s; False when it exited first."""
    deadline = time.time() + 60
    while time.time() < deadline:
        try:
            if httpx.get(f"{url}/healthz", timeout=1).status_code == 200:
                return True
        except httpx.HTTPError:
            if proc.poll() is not None:
                return False
            time.sleep(0.2)
    proc.kill()
    raise RuntimeError("server did not start in 60 s")


@contextlib.contextmanager
def in_process(db, **kw):
    """The daemon's app in this process (its lifespan, background jobs and reload threads included),
    behind a TestClient: for what needs no real socket. kw: create_app's (token=..., tune_misses=...)."""
    from fastapi.testclient import TestClient

    from api.main import create_app
    with TestClient(create_app(db=db, **kw)) as client:
        yield client


def cpu_sweep_of(tmp_path, *problems: AttentionProblem) -> Path:
    """These problems swept on the CPU by `tuner sweep --problems` into a new database (its path)."""
    from tuner.problem_files import write_problems
    f = tmp_path / "problems.jsonl"
    write_problems(f, problems)
    db = tmp_path / "swept.db"
    r = subprocess.run([sys.executable, "-m", "tuner", "sweep", "--problems", str(f), "--device", "cpu", "--db",
                        str(db)], capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0, r.stderr[-2000:]
    return db


def cli_and_rest(tmp_path, query: dict, field: str, good, bad, post: bool = False) -> dict:
    """One problem field given good and bad through `tuner decide` and GET /v1/decision (and, with `post`,
    POST /v1/decisions), against a copy of the shipped db on the H200: the responses by name."""
    import json
    flags = [x for k, v in query.items() for x in (f"--{k.replace('_', '-')}", str(v))]
    cli = {name: subprocess.run([sys.executable, "-m", "tuner", "decide", *flags, "--device", "NVIDIA H200", "--json",
                                 f"--{field.replace('_', '-')}", str(v)], capture_output=True, text=True, cwd=ROOT)
           for name, v in (("cli_ok", good), ("cli_bad", bad))}
    served = tmp_path / "served.db"
    served.write_bytes(SHIPPED.read_bytes())
    with in_process(db=served) as client:
        out = {"rest_ok": client.get("/v1/decision", params={**query, field: good, "device": "NVIDIA H200"}),
               "rest_bad": client.get("/v1/decision", params={**query, field: bad, "device": "NVIDIA H200"})}
        if post:
            out["posted"] = client.post("/v1/decisions", json={"problems": [{**query, field: good}],
                                                               "device": "NVIDIA H200"})
    out.update({k: (r.returncode, json.loads(r.stdout) if r.returncode == 0 else r.stderr) for k, r in cli.items()})
    return out


@pytest.fixture(autouse=True)
def shipped_db_untouched():
    """No test may write the shipped heuristics.db."""
    before = SHIPPED.stat().st_mtime_ns if SHIPPED.exists() else None
    yield
    after = SHIPPED.stat().st_mtime_ns if SHIPPED.exists() else None
    assert before == after, "a test wrote the shipped heuristics.db"
