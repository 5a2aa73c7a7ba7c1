"""REST load: the daemon in one process (`tuner serve`), this script as the client in another, on
loopback. GET /v1/decision for SECONDS with a keep-alive connection per client thread, then POST
/v1/decisions with 256 problems per request. Bounded in time and count; stops by itself.

    .venv/bin/python benchmarks/bench_rest.py [--seconds 30] [--clients 2]
"""
from __future__ import annotations

import argparse
import http.client
import json
import os
import random
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def problems(n: int, rng: random.Random) -> list[dict]:
    out = []
    for _ in range(n):
        out.append(dict(phase="decode", num_qo_heads=40, num_kv_heads=8, head_dim=128, page_size=16,
                        batch_size=rng.choice([1, 3, 8, 12, 33, 64, 100, 256]),
                        kv_len=rng.choice([200, 1000, 1900, 4096, 9000, 30000]),
                        kv_dtype=rng.choice(["bf16", "fp8"]), out_dtype=rng.choice(["bf16", "fp8"])))
    return out


def client(port: int, paths: list[str], until: float, lat: list, errors: list) -> None:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    i = 0
    while time.perf_counter() < until:
        t = time.perf_counter()
        try:
            conn.request("GET", paths[i % len(paths)])
            r = conn.getresponse()
            r.read()
            if r.status != 200:
                errors.append(r.status)
        except OSError as e:
            errors.append(repr(e))
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        lat.append(time.perf_counter() - t)
        i += 1


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=30)
    ap.add_argument("--clients", type=int, default=2)
    ap.add_argument("--batch-requests", type=int, default=200)
    a = ap.parse_args()
    tmp = Path(tempfile.mkdtemp())
    db = tmp / "heuristics.db"
    shutil.copy(ROOT / "heuristics.db", db)      # the daemon records misses: never in the shipped file
    port = free_port()
    srv = subprocess.Popen([sys.executable, "-m", "tuner", "serve", "--port", str(port), "--db", str(db),
                            "--device", "NVIDIA H200", "--log-level", "warning"], cwd=ROOT,
                           env={**os.environ, "SWITCHYARD_TOKEN": ""})
    try:
        for _ in range(300):
            try:
                http.client.HTTPConnection("127.0.0.1", port, timeout=1).request("GET", "/healthz")
                break
            except OSError:
                time.sleep(0.1)
        rng = random.Random(0)
        paths = ["/v1/decision?" + urllib.parse.urlencode(p) for p in problems(512, rng)]
        lat, errors = [], []
        warm_until = time.perf_counter() + 2
        client(port, paths, warm_until, [], [])
        until = time.perf_counter() + a.seconds
        threads = [threading.Thread(target=client, args=(port, paths, until, lat, errors)) for _ in range(a.clients)]
        t0 = time.perf_counter()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        wall = time.perf_counter() - t0
        lat.sort()
        get = {"requests": len(lat), "seconds": round(wall, 2), "rps": round(len(lat) / wall, 1),
               "p50_ms": round(lat[len(lat) // 2] * 1e3, 3), "p99_ms": round(lat[int(len(lat) * 0.99)] * 1e3, 3),
               "max_ms": round(lat[-1] * 1e3, 3), "errors": len(errors), "clients": a.clients}
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        blat, berr = [], 0
        for _ in range(a.batch_requests):
            payload = json.dumps({"problems": problems(256, rng)})
            t = time.perf_counter()
            conn.request("POST", "/v1/decisions", payload, {"content-type": "application/json"})
            r = conn.getresponse()
            body = r.read()
            blat.append(time.perf_counter() - t)
            if r.status != 200 or json.loads(body)["count"] != 256:
                berr += 1
        blat.sort()
        post = {"requests": a.batch_requests, "problems_per_request": 256,
                "p50_ms": round(statistics.median(blat) * 1e3, 2),
                "p99_ms": round(blat[int(len(blat) * 0.99)] * 1e3, 2),
                "decisions_per_s": round(256 * len(blat) / sum(blat)), "errors": berr}
        print(json.dumps({"get_decision": get, "post_decisions_256": post}, indent=1))
    finally:
        srv.terminate()
        srv.wait(10)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
