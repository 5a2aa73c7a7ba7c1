"""Hostile input and first use against the real daemon on loopback and the real CLI: every finding
of the hostile-input review has a check here (bounded loops: seconds, not minutes)."""
import json
import shutil
import socket
import sqlite3
import time

import httpx
import pytest

from dispatcher import store
from tests.conftest import in_process, serve, small
from tests.test_bad_input import DECIDE, one_line_error
from tests.test_cli import tuner

TOKEN = "s3cret"


@pytest.fixture
def db(swept_db, tmp_path):
    path = tmp_path / "daemon.db"
    shutil.copy(swept_db[0], path)
    return path


def q(**kw):
    """Query parameters of small(**kw); by default a shape the swept database measured."""
    kw = {"batch_size": 4, "kv_len": 256, **kw}
    return {k: str(v).lower() if isinstance(v, bool) else str(v) for k, v in small(**kw).to_dict().items()}


def rss_kb(pid: int) -> int:
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS")


def gauge(url: str, name: str) -> float:
    for line in httpx.get(f"{url}/metrics").text.splitlines():
        if line.startswith(name + " ") or line.startswith(name + "{"):
            return float(line.rsplit(" ", 1)[1])
    raise AssertionError(f"{name} not in /metrics")


def raw(url: str, data: bytes, wait_s: float = 3.0) -> bytes:
    """Send bytes on a fresh connection; what the server answers within wait_s (b"" if it closed)."""
    host, port = url.rsplit("/", 1)[1].split(":")
    got = b""
    with socket.create_connection((host, int(port)), timeout=wait_s) as s:
        try:
            s.sendall(data)
            while chunk := s.recv(65536):
                got += chunk
                s.settimeout(0.3)               # the rest of an answer comes right after its start
        except (TimeoutError, ConnectionResetError, BrokenPipeError):
            pass
    return got or b"(no answer)"


def test_serve_new_db_starts_an_empty_database_that_sweeps_fill(tmp_path):
    new = tmp_path / "new.db"
    with serve(new, "--new-db", token=TOKEN) as url:
        assert new.exists() and httpx.get(f"{url}/v1/decision", params=q()).json()["source"] == "rule"
        job = httpx.post(f"{url}/v1/sweeps", json={"problems": [small().to_dict()]},
                         headers={"Authorization": f"Bearer {TOKEN}"}).json()
        end, state = time.time() + 120, job
        while state["state"] in ("queued", "running") and time.time() < end:
            time.sleep(0.3)
            state = httpx.get(f"{url}/v1/sweeps/{job['id']}").json()
        assert state["state"] == "done", state
    with sqlite3.connect(new) as c:
        assert c.execute("select count(*) from winners").fetchone()[0] == 1
    # no token, but misses are tuned: they fill it (this was refused as "nothing else would ever fill" it)
    tuned = tmp_path / "misses.db"
    with serve(tuned, "--new-db", "--tune-misses-without-token", "--idle-s", "0.2", "--refresh-s", "0.2") as url:
        assert httpx.get(f"{url}/healthz").json() == {"status": "ok", "db": "misses.db"}
        end, source = time.time() + 120, "rule"
        while source != "measured" and time.time() < end:
            source = httpx.get(f"{url}/v1/decision", params=q()).json()["source"]
            time.sleep(0.5)
        assert source == "measured"


def test_serve_without_db_uses_the_default_path_and_switchyard_db(db, tmp_path):
    # the README's `tuner serve` crashed at start-up without --db
    home = tmp_path / "home"
    home.mkdir()
    shutil.copy(db, home / "heuristics.db")
    with serve(None, cwd=home) as url:
        assert httpx.get(f"{url}/healthz").json() == {"status": "ok", "db": "heuristics.db"}   # no host path
        assert httpx.get(f"{url}/v1/decision", params=q()).json()["source"] == "measured"
    with serve(None, cwd=tmp_path, env_extra={"SWITCHYARD_DB": str(db)}) as url:
        assert httpx.get(f"{url}/v1/decision", params=q()).json()["source"] == "measured"


def test_serve_refuses_bad_databases_and_settings_in_one_line(db, tmp_path):
    garbage = tmp_path / "garbage.db"
    garbage.write_bytes(b"\x00junk" * 1000)
    truncated = tmp_path / "truncated.db"
    truncated.write_bytes(db.read_bytes()[:3000])
    empty = tmp_path / "empty.db"
    empty.write_bytes(b"")
    for bad, fragment in ((garbage, "garbage.db"), (truncated, "truncated.db"), (empty, "not a Switchyard database"),
                          (tmp_path, "is a directory"), (tmp_path / "typo.db", "no such database")):
        one_line_error(tuner("serve", "--db", str(bad)), fragment)
    one_line_error(tuner("serve", "--db", str(db), "--tune-misses"), "needs writes enabled")
    token = tmp_path / "token"
    token.write_text(TOKEN)
    # a token used to make a mistyped --db a new, empty database, served as if nothing were wrong
    one_line_error(tuner("serve", "--db", str(tmp_path / "typo.db"), "--token-file", str(token)), "pass --new-db")
    one_line_error(tuner("serve", "--db", str(tmp_path / "typo.db"), "--new-db"),
                   "--new-db needs something to fill the new database: writes enabled")
    assert not (tmp_path / "typo.db").exists()
    one_line_error(tuner("serve", "--db", str(db), "--log-level", "loud"), "--log-level 'loud' is not one of")
    with socket.create_server(("127.0.0.1", 0)) as taken:        # uvicorn's own error was a log line, exit 1
        port = taken.getsockname()[1]
        one_line_error(tuner("serve", "--db", str(db), "--port", str(port)), f"cannot listen on 127.0.0.1:{port}")
        fresh = tmp_path / "fresh.db"                  # --new-db made it, then uvicorn failed: an empty db stayed
        one_line_error(tuner("serve", "--db", str(fresh), "--new-db", "--token-file", str(token), "--port", str(port)),
                       "cannot listen")
        assert not fresh.exists()
    empty = tuner("decide", "--db", str(db), "--input", "-", input="")
    assert empty.returncode == 0 and "--input - held no problems: nothing decided" in empty.stderr


def test_miss_tuning_measures_only_what_a_sweep_may(db):
    # without a token, --tune-misses let three GETs of a problem POST /v1/sweeps refuses make the daemon sweep it
    huge = q(num_qo_heads=16, num_kv_heads=4, head_dim=128, batch_size=4, kv_len=131072)
    fits = q(num_qo_heads=16, num_kv_heads=4, head_dim=32, batch_size=3, kv_len=128)
    with serve(db, "--tune-misses-without-token", "--idle-s", "0.3", "--refresh-s", "0.2") as url:
        for _ in range(3):
            assert httpx.get(f"{url}/v1/decision", params=huge).status_code == 200
        assert httpx.get(f"{url}/v1/decision", params=fits).json()["source"] == "rule"
        measured = "select count(*) from measurements where num_qo_heads = 16 and kv_len = ?"
        end = time.time() + 90
        while time.time() < end and not sqlite3.connect(db).execute(measured, [128]).fetchone()[0]:
            time.sleep(0.3)                                   # the tuner runs: the miss that fits gets measured
        conn = sqlite3.connect(db)
        assert conn.execute(measured, [128]).fetchone()[0] > 0
        assert conn.execute(measured, [131072]).fetchone()[0] == 0          # the one no sweep may take: never
        assert conn.execute("select count(*) from misses where kv_len = 131072").fetchone()[0] == 1   # still counted


def test_misses_are_capped_on_disk_rarest_first(db):
    d = {small(batch_size=b + 1, kv_len=64): ("learned", 1 + (b % 3)) for b in range(300)}
    old = store.MISSES_KEPT
    store.MISSES_KEPT = 200
    try:
        store.add_misses(db, "CPU test", "wall", d)
    finally:
        store.MISSES_KEPT = old
    conn = sqlite3.connect(db)
    n, least = conn.execute("select count(*), min(count) from misses").fetchone()
    assert n == 200 and least >= 2          # 100 of count 1 were the rarest: they went


def test_no_cache_keyed_by_request_text_and_no_dispatcher_per_spelling(db):
    procs = []
    with serve(db, procs=procs) as url, httpx.Client(base_url=url) as c:
        base = q(batch_size=3, kv_len=200)
        first = c.get("/v1/decision", params=base).json()
        for zeros in range(1, 200):                            # one problem, 200 spellings
            r = c.get("/v1/decision", params={**base, "batch_size": "0" * zeros + "3"})
            assert r.status_code == 200 and r.json()["pipeline"] == first["pipeline"]
        assert gauge(url, "switchyard_cached_decisions") <= 4
        for spelling in ("cpu", "CPU", "Cpu", "cPU", " cpu", "cpu "):
            assert c.get("/v1/decision", params={**base, "device": spelling}).status_code == 200
        assert gauge(url, "switchyard_dispatchers") == 1        # one device, one dispatcher and reload thread
        before = rss_kb(procs[0].pid)
        long = {**base, "kv_dtype": "bf16" + " " * 12000}       # within h11's header limit, over ours
        for _ in range(300):
            assert c.get("/v1/decision", params=long).status_code == 414
        assert rss_kb(procs[0].pid) - before < 8 * 1024
        r = c.get("/v1/decision", params={**base, "window_left": str(2**63)})
        assert r.status_code == 422 and r.json()["detail"][0]["loc"] == ["query", "window_left"]
        assert c.get("/v1/misses").status_code == 200           # the miss flush no longer overflows SQLite


def test_bodies_are_bounded_and_writes_refused_before_their_body(db):
    with serve(db, token=TOKEN) as url:
        big = (b"POST /v1/decisions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
               b"Content-Length: 104857600\r\n\r\n{\"problems\": [")
        assert raw(url, big).startswith(b"HTTP/1.1 413")        # refused by its length, not read
        chunked = (b"POST /v1/decisions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                   b"Transfer-Encoding: chunked\r\n\r\n110000\r\n" + b"[" * 0x110000)
        assert raw(url, chunked).startswith(b"HTTP/1.1 413")    # no declared length: read only to the limit
        write = (b"POST /v1/sweeps HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                 b"Content-Length: 52428800\r\n\r\n")
        answer = raw(url, write)
        assert answer.startswith(b"HTTP/1.1 401") and b"bearer token" in answer   # before the 50 MB body
        ok = httpx.post(f"{url}/v1/decisions", json={"problems": [small().to_dict()] * 1000})
        assert ok.status_code == 200 and ok.json()["count"] == 1000


def test_slow_and_surplus_connections_are_closed(db):
    with serve(db, "--request-timeout-s", "1", "--max-connections", "8") as url:
        host, port = url.rsplit("/", 1)[1].split(":")
        idle = [socket.create_connection((host, int(port)), timeout=5) for _ in range(6)]
        trickle = socket.create_connection((host, int(port)), timeout=5)
        trickle.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")  # headers never finished
        surplus = [socket.create_connection((host, int(port)), timeout=5) for _ in range(4)]
        assert any(s.recv(1) == b"" for s in surplus)           # over the cap: closed at once
        time.sleep(2.5)
        assert all(s.recv(1) == b"" for s in idle + [trickle])  # nothing (or half a request) in 1 s: closed
        for s in idle + surplus + [trickle]:
            s.close()
        assert httpx.get(f"{url}/healthz").status_code == 200


def test_sweep_options_are_validated_and_queue_states_exact(db):
    auth = {"Authorization": f"bearer  {TOKEN}"}              # the scheme is case-insensitive
    with serve(db, token=TOKEN + " ") as url, httpx.Client(base_url=url, headers=auth) as c:   # env token stripped
        for body, fragment in (({"model": "llama4-scout", "tp": [0]}, "tp 0"),
                               ({"model": "llama4-scout", "tp": [3]}, "tp 3 does not divide"),
                               ({"model": "llama4-scout", "phases": []}, "phase is empty"),
                               ({"model": "llama4-scout", "page_sizes": [17]}, "page size 17"),
                               ({"model": "llama4-scout", "kv_dtypes": ["int4"]}, "kv dtype 'int4'"),
                               ({"problems": []}, "'problems' is empty"),
                               ({"problems": [{**small().to_dict(), "window_left": 2**63}]}, "window_left")):
            r = c.post("/v1/sweeps", json=body)
            assert r.status_code == 422 and fragment in json.dumps(r.json()["detail"]), (body, r.text)
        one = {"model": "llama-3.1-8b", "phases": ["decode"]}
        ids = [c.post("/v1/sweeps", json=one).json()["id"] for _ in range(5)]
        assert c.post("/v1/sweeps", json={"model": "llama-3.1-8b"}).status_code == 429   # one running, 4 queued
        queued = [i for i in ids if c.get(f"/v1/sweeps/{i}").json()["state"] == "queued"]
        assert c.delete(f"/v1/sweeps/{queued[-1]}").json()["state"] == "cancelled"
        assert c.post("/v1/sweeps", json={"model": "llama-3.1-8b", "phases": ["decode"]}).status_code == 202
        for i in ids:
            c.delete(f"/v1/sweeps/{i}")


def test_a_job_cancelled_as_it_finished_reads_done(db, monkeypatch):
    import tuner.library
    from api.jobs import JobManager
    from dispatcher.device import describe
    real = tuner.library.run_problems
    jobs = JobManager(db, describe("cpu"), idle_s=0.1)

    def then_cancel(*a, **k):
        report = real(*a, **k)
        for j in jobs.jobs.values():
            j.cancel.set()                  # the cancel arrives just after the last problem
        return report
    monkeypatch.setattr(tuner.library, "run_problems", then_cancel)
    job = jobs.submit("problems", [small(head_dim=32, batch_size=2)])
    end = time.time() + 60
    while job.finished_at is None and time.time() < end:
        time.sleep(0.1)
    jobs.stop()
    assert job.state == "done" and job.done == 1


def test_a_database_gone_bad_answers_503_and_healthz_says_so(db):
    with in_process(db) as c:
        assert c.get("/v1/decision", params=q()).status_code == 200
        db.write_bytes(b"not a database" * 500)
        for path in ("/v1/environments", "/v1/coverage", "/v1/misses", "/metrics"):
            r = c.get(path)
            assert r.status_code == 503 and "database cannot be read" in r.json()["detail"], (path, r.text)
            assert str(db.parent) not in r.text                           # no host paths
        h = c.get("/healthz")
        assert h.status_code == 503 and h.json()["status"] == "degraded"
        assert c.get("/v1/decision", params=q()).status_code == 200       # decisions go on from memory


@pytest.mark.parametrize("text,fragment", [
    ("1\n", "a problem is an object of fields"), ("null\n", "not NoneType"),
    ("Infinity\n", "not float"),
    (json.dumps({**small().to_dict(), "batch_size": float("inf")}) + "\n", "batch_size inf is not an integer"),
    ("[" * 60_000 + "\n", "nested too deeply"), ("[" * 100_000 + "\n", "longer than 65536 "
                                                                       "bytes"), ("\xff\xfe\n", "not JSON"),
])
def test_decide_input_lines_are_one_line_errors(swept_db, text, fragment):
    one_line_error(tuner("decide", "--db", str(swept_db[0]), "--input", "-", input=text), fragment)


def test_decide_input_from_an_endless_file_stops_at_the_first_line(swept_db):
    one_line_error(tuner("decide", "--db", str(swept_db[0]), "--input", "/dev/zero"), "longer than 65536 bytes")


def test_first_use_defaults_and_messages(swept_db, monkeypatch):
    db = str(swept_db[0])
    # head_dim and page_size default alike for flags, JSON lines and REST (128, 16)
    line = json.dumps({"phase": "decode", "num_qo_heads": 8, "num_kv_heads": 2, "batch_size": 4, "kv_len": 256})
    r = tuner("decide", "--db", db, "--input", "-", input=line + "\n")
    flags = tuner("decide", "--db", db, "--phase", "decode", "--num-qo-heads", "8", "--num-kv-heads", "2",
                  "--batch-size", "4", "--kv-len", "256", "--json")
    assert r.returncode == 0 and json.loads(r.stdout) == json.loads(flags.stdout)
    bare = tuner()
    assert bare.returncode == 0 and "Usage" in bare.stdout and "error" not in bare.stderr
    one_line_error(tuner("sweep", "--page-sizes", "17", "--db", "/tmp/none.db", "--device", "cpu"),
                   "page size 17 is not supported; use 16, 32, 64, 128")
    typed = tuner("decide", "--db", "none", "--device", "NVIDIA H200", "--phase", "decode", "--num-qo-heads", "40",
                  "--num-kv-heads", "8", "--batch-size", "12", "--kv-len", "1900", "--kv-dtype", "fp16")
    one_line_error(typed, "batch 12 x kv 1900")                         # as typed, not the 16 x 2048 bucket
    monkeypatch.setenv("SWITCHYARD_MAX_RELERR", "-1")
    one_line_error(tuner(*DECIDE, "--db", db), "SWITCHYARD_MAX_RELERR '-1' is not a usable relative-error budget")


def test_rest_takes_the_same_defaults(server):
    base = {k: v for k, v in q(head_dim=128, page_size=16).items() if k not in ("head_dim", "page_size")}
    a = httpx.get(f"{server}/v1/decision", params=base).json()
    b = httpx.get(f"{server}/v1/decision", params=q(head_dim=128, page_size=16)).json()
    assert a == b
    assert httpx.get(f"{server}/v1/kernels", params={"phase": "decode", "num_qo_heads": 8,
                                                    "num_kv_heads": 2}).status_code == 200

