"""The daemon against the real server: auth, bounds, sweep jobs, hot reload, misses."""
import logging
import re
import shutil
import sqlite3
import time

import httpx
import pytest

from dispatcher import load
from dispatcher.live import keep_fresh
from tests.conftest import in_process, serve, small

TOKEN = "s3cret-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


@pytest.fixture
def db(swept_db, tmp_path):
    path = tmp_path / "daemon.db"
    shutil.copy(swept_db[0], path)
    return path


def wait(pred, timeout=90.0, every=0.2):
    end = time.time() + timeout
    while time.time() < end:
        got = pred()
        if got:
            return got
        time.sleep(every)
    raise AssertionError("condition not met in time")


def body(**kw):
    return {"problems": [small(**kw).to_dict()]}


def test_write_endpoints_are_off_without_a_token(db):
    with in_process(db) as c:
        r = c.post("/v1/sweeps", json=body())
        assert r.status_code == 403 and "SWITCHYARD_TOKEN" in r.json()["detail"]
        assert c.get("/v1/decision", params=small().to_dict()).status_code == 200   # reads stay open


def test_token_refused_and_accepted(db):
    with serve(db, token=TOKEN) as url:
        assert httpx.post(f"{url}/v1/sweeps", json=body()).status_code == 401
        assert httpx.post(f"{url}/v1/sweeps", json=body(), headers={"Authorization": "Bearer nope"}).status_code == 401
        r = httpx.post(f"{url}/v1/sweeps", json=body(), headers=AUTH)
        assert r.status_code == 202 and r.json()["state"] in ("queued", "running")


def test_bounds_are_named(db):
    with in_process(db, token=TOKEN) as c:
        many = {"problems": [small().to_dict()] * 1025}
        r = c.post("/v1/decisions", json=many)
        assert r.status_code == 422 and r.json()["detail"][0]["loc"][:2] == ["body", "problems"]
        huge = body(batch_size=4096, kv_len=1 << 20, num_qo_heads=64, num_kv_heads=64, head_dim=256)
        r = c.post("/v1/sweeps", json=huge, headers=AUTH)
        (e,) = r.json()["detail"]              # shaped as every other 422: where, what, which kind
        assert r.status_code == 422 and e["loc"] == ["body", "problems", 0] and e["type"] == "too_big"
        assert "needs ~" in e["msg"] and "a sweep may allocate at most 2.00 GiB per problem" in e["msg"]
        # a preset's oversized point was "problem 21 needs ~2.0 GiB ... at most 2.0 GiB": which, and why over
        r = c.post("/v1/sweeps", json={"model": "llama4-scout", "grid": "full", "phases": ["decode"]}, headers=AUTH)
        (e,) = r.json()["detail"]
        assert r.status_code == 422 and e["loc"] == ["body"] and e["type"] == "too_big", e
        assert re.match(r"the preset's grid holds decode 40/8 heads, .*batch 2 x kv 131072, .* which needs "
                        r"2,147,565,568 bytes; a sweep may allocate at most 2,147,483,648 bytes \(2\.00 GiB\) per "
                        r"problem on CPU .*: narrow the grid \(grid, tp, phases, dtypes or page_sizes\) or sweep on a "
                        r"GPU of 9 GiB or more", e["msg"]), e["msg"]
        # the mixed grid on the CPU: narrowing its options could not help, so the message did not say so
        r = c.post("/v1/sweeps", json={"model": "llama4-scout", "grid": "mixed", "phases": ["decode"],
                                       "kv_dtypes": ["fp8"], "tp": [4]}, headers=AUTH)
        assert "the mixed grid's batches are this large whatever the options: sweep it on a GPU of " \
               in r.json()["detail"][0]["msg"]
        r = c.post("/v1/sweeps", json={"model": "llama4-scout", "problems": []}, headers=AUTH)
        assert r.status_code == 422 and r.json()["detail"][0]["msg"].endswith(": both were given")
        r = c.post("/v1/sweeps", json={"tiles": True}, headers=AUTH)      # it said "not both" for neither
        assert r.status_code == 422 and r.json()["detail"][0]["msg"].endswith(": neither was given")
        for field, value, says in (("model", "llama5", "model 'llama5' is not a preset"),
                                   ("kv_dtypes", ["fp4"], "kv dtype 'fp4' is not supported"),
                                   ("tp", [3], "tp 3 does not divide"), ("page_sizes", [17], "page size 17")):
            r = c.post("/v1/sweeps", json={"model": "llama4-scout", field: value}, headers=AUTH)
            (e,) = r.json()["detail"]           # the option named, not the whole body
            assert r.status_code == 422 and e["loc"] == ["body", field] and says in e["msg"], e
        r = c.post("/v1/sweeps", json={"model": "llama4-scout", "db": "/etc/passwd"}, headers=AUTH)
        assert r.status_code == 422                      # no request can name a path on the host
        codes = [c.post("/v1/sweeps", json={"model": "llama-3.1-8b", "phases": ["decode"]},
                            headers=AUTH).status_code for _ in range(7)]
        assert codes[:5] == [202] * 5 and 429 in codes   # one running + 4 queued, then "queue full"
        r = c.post("/v1/sweeps", json={"model": "llama-3.1-8b"}, headers=AUTH)
        assert r.status_code == 429 and "4 sweeps are already queued" in r.json()["detail"]


def test_sweep_job_lifecycle_and_cancel(db, caplog):
    caplog.set_level(logging.INFO, "switchyard.sweeps")
    with in_process(db, token=TOKEN) as c:
        probs = {"problems": [small(head_dim=32, batch_size=b).to_dict() for b in (1, 2, 4)]}
        job = c.post("/v1/sweeps", json=probs, headers=AUTH).json()
        done = wait(lambda: (j := c.get(f"/v1/sweeps/{job['id']}").json())["state"] == "done" and j)
        assert done["total"] == done["done"] == 3 and done["counts"].get("ok") == 6 and done["progress"] == 1.0
        late = c.delete(f"/v1/sweeps/{job['id']}", headers=AUTH)      # nothing left to cancel: not a silent 200
        assert late.status_code == 409 and "has already ended (done); nothing to cancel" in late.json()["detail"]

        long = c.post("/v1/sweeps", json={"model": "llama4-scout"}, headers=AUTH).json()
        wait(lambda: c.get(f"/v1/sweeps/{long['id']}").json()["done"] >= 2)
        r = c.delete(f"/v1/sweeps/{long['id']}", headers=AUTH)
        assert r.status_code == 200 and r.json()["cancel_requested"]   # still running: it says it will stop
        final = wait(lambda: (j := c.get(f"/v1/sweeps/{long['id']}").json())["state"] == "cancelled" and j)
        assert 2 <= final["done"] < final["total"] and not final["cancel_requested"]
    logged = " | ".join(r.getMessage() for r in caplog.records if r.name == "switchyard.sweeps")
    assert f"sweep {job['id']} (problems) started: 3 problems" in logged, logged
    assert f"sweep {job['id']} done" in logged and f"sweep {long['id']} cancelled" in logged, logged
    c = sqlite3.connect(db)
    scout = c.execute("select count(distinct problem_key) from winners where num_qo_heads = 40").fetchone()[0]
    assert scout == final["done"]                      # what was measured before the cancel is kept


def test_a_sweep_job_measures_a_batch_given_by_its_requests_lengths(db):
    """POST /v1/sweeps with seq_lens: the job measures those lengths and stores them with the batch's
    statistics (mean 100, longest 160, its own balance)."""
    lens = [160, 130, 70, 40]
    problem = {k: v for k, v in small().to_dict().items() if k not in ("batch_size", "kv_len", "max_kv_len",
                                                                      "kv_balance")}
    with in_process(db, token=TOKEN) as c:
        job = c.post("/v1/sweeps", json={"problems": [{**problem, "seq_lens": lens}]}, headers=AUTH).json()
        done = wait(lambda: (j := c.get(f"/v1/sweeps/{job['id']}").json())["state"] == "done" and j)
        assert done["total"] == done["done"] == 1 and done["counts"].get("ok"), done
    rows = sqlite3.connect(db).execute("select distinct batch_size, kv_len, max_kv_len, round(kv_balance, 3), "
                                       "lengths from measurements where lengths is not null").fetchall()
    assert rows == [(4, 100, 160, 0.775, "[160, 130, 70, 40]")], rows
    # a shape of its own, not a grid's point: the model reads it as a correction near it (tests/test_alone.py)
    job_rows = "select distinct alone from measurements where lengths is not null"
    assert sqlite3.connect(db).execute(job_rows).fetchall() == [(1,)]


def test_hot_reload_in_a_serving_process(db):
    serving = load(db, "cpu")
    live = keep_fresh(serving, every_s=0.2)
    p = small(head_dim=16)
    try:
        assert serving.choose(p).source == "rule"
        with serve(db, token=TOKEN) as url:
            job = httpx.post(f"{url}/v1/sweeps", json={"problems": [p.to_dict()]}, headers=AUTH).json()
            wait(lambda: httpx.get(f"{url}/v1/sweeps/{job['id']}").json()["state"] == "done")
            dec = wait(lambda: (d := serving.choose(p)).source == "measured" and d, timeout=10)
        assert dec.expected_us > 0 and live.reloads >= 1
    finally:
        live.stop()


def test_misses_flow_to_the_store_and_get_tuned(db):
    with in_process(db, tune_misses="writers", idle_s=0.5, refresh_s=0.3, token=TOKEN) as c:
        miss = small(head_dim=48, batch_size=3, kv_len=100)
        for _ in range(3):
            assert c.get("/v1/decision", params=miss.to_dict()).json()["source"] == "rule"
        # the daemon measures the miss in the background, then answers from the measurement
        dec = wait(lambda: (d := c.get("/v1/decision", params=miss.to_dict()).json())["source"] == "measured"
                   and d)
        assert dec["expected_us"] > 0
        kinds = [j["kind"] for j in c.get("/v1/sweeps").json()["sweeps"]]
        assert "misses" in kinds
    tuned = sqlite3.connect(db).execute("select distinct alone from measurements where head_dim = 48").fetchall()
    assert tuned == [(1,)]


def test_misses_endpoint_and_in_process_flush(db):
    d = load(db, "cpu")
    live = keep_fresh(d, every_s=60)
    for _ in range(5):
        d.choose(small(head_dim=40))
    live.stop()                                        # flushes at exit
    row = sqlite3.connect(db).execute("select source, count from misses where head_dim = 40").fetchone()
    assert row == ("rule", 5)
    with in_process(db) as c:
        c.get("/v1/decision", params=small(batch_size=64, kv_len=64).to_dict())
        m = c.get("/v1/misses").json()["misses"]
        by = {(x["head_dim"], x["batch_size"]): x for x in m}
        assert by[(40, 2)]["count"] == 5 and by[(64, 64)]["source"] in ("learned", "nearest")
        name = by[(40, 2)]["device_name"]               # the device named in any case and spacing, as decisions take it
        assert len(c.get("/v1/misses", params={"device": name.swapcase()}).json()["misses"]) == len(m)
        assert len(c.get("/v1/misses", params={"device": name.replace(" ", "  ")}).json()["misses"]) == len(m)


def test_metrics_kernels_environments_coverage(db):
    with in_process(db) as c:
        c.get("/v1/decision", params=small(batch_size=4, kv_len=256).to_dict())   # a measured bucket
        text = c.get("/metrics").text
        assert 'switchyard_decisions_total{source="measured"} 1' in text
        assert 'switchyard_request_seconds_bucket{route="/v1/decision",le="0.01"}' in text
        assert "switchyard_measurements_stored" in text
        k = c.get("/v1/kernels", params=dict(phase="decode", num_qo_heads=40, num_kv_heads=8,
                                                        head_dim=128, page_size=16)).json()
        sdpa = next(x for x in k["kernels"] if x["id"] == "torch-sdpa")
        xqa = next(x for x in k["kernels"] if x["id"] == "trtllm-xqa")
        assert sdpa["eligible"] and not xqa["eligible"] and "does not run on cpu" in xqa["reasons"][0]
        assert sdpa["maskless"] == {"cuda": {"backend": ["flash"]}}     # settings that take no attention mask
        assert c.get("/v1/kernels", params=dict(phase="decode")).status_code == 422
        # a mixed batch's sizes are the problem's too: they were ignored, so a bad one passed unnoticed
        mixed = dict(phase="decode", num_qo_heads=40, num_kv_heads=8, batch_size=4, kv_len=1000)
        assert c.get("/v1/kernels", params={**mixed, "max_kv_len": 3000}).status_code == 200
        bad = c.get("/v1/kernels", params={**mixed, "max_kv_len": 9000})
        assert bad.status_code == 422 and bad.json()["detail"][0]["loc"] == ["query", "max_kv_len"]
        envs = c.get("/v1/environments").json()["environments"]
        assert envs and envs[0]["device_name"].startswith("CPU")
        cov = c.get("/v1/coverage").json()
        assert cov["families"] and cov["families"][0]["measured_cells"] >= 1


def test_a_problem_just_over_the_sweep_limit_says_by_how_much():
    """It read "needs ~2.00 GiB; a sweep may allocate at most 2.00 GiB", as if it fitted."""
    from api.admission import too_big
    from dispatcher.device import DeviceInfo
    from tuner.sizes import working_bytes
    p = small(batch_size=64, kv_len=4096)
    gpu = DeviceInfo(name="GPU", kind="cuda", memory_bytes=4 * (working_bytes(p) - 1))
    assert too_big(p, gpu) == (f"needs {working_bytes(p):,} bytes; a sweep may allocate at most "
                               f"{working_bytes(p) - 1:,} bytes ({(working_bytes(p) - 1) / 2**30:.2f} GiB) per "
                               "problem on GPU")
