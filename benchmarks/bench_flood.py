"""The daemon's memory under a flood: `tuner serve` over a copy of a database, then N distinct
GET /v1/decision problems (each a new decision to make and cache) and M oversized requests (a
valid problem spelled in 12 KB, its batch size padded with zeros; a body declared at 100 MB;
200 KB of headers), from a client in this process.
The server's resident memory (VmRSS) is sampled before, every 1000 requests and after; the bound
it must stay within is stated and checked at the end. Usage:

    python benchmarks/bench_flood.py [--db heuristics.db] [--device "NVIDIA H200"] [--distinct 20000]
        [--oversized 5000] [--bound-mb 200]
"""
from __future__ import annotations

import argparse
import random
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent


def rss_mb(pid: int) -> float:
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def problems(n: int, seed: int = 0):
    """n distinct decode and prefill problems of plausible geometry."""
    rng, seen = random.Random(seed), set()
    while len(seen) < n:
        heads = rng.choice([(40, 8), (10, 2), (32, 8), (64, 8), (16, 4)])
        phase = rng.choice(["decode", "prefill"])
        b = rng.randint(1, 512) if phase == "decode" else rng.randint(1, 16)
        q = 1 if phase == "decode" else rng.randint(16, 4096)
        kv = rng.randint(max(q, 16), 131072 if phase == "decode" else 32768)
        p = (phase, *heads, b, q, kv, rng.choice(["bf16", "fp8"]), rng.choice(["bf16", "fp8"]))
        seen.add(p)
    for phase, hq, hkv, b, q, kv, kvd, out in sorted(seen):
        yield {"phase": phase, "num_qo_heads": hq, "num_kv_heads": hkv, "head_dim": 128, "page_size": 16,
               "batch_size": b, "q_len": q, "kv_len": kv, "kv_dtype": kvd, "out_dtype": out}


PLAIN = {"phase": "decode", "num_qo_heads": 40, "num_kv_heads": 8, "head_dim": 128, "page_size": 16, "kv_len": 4096,
         "device": "NVIDIA H200"}


def oversized(url: str, i: int) -> int:
    """One oversized request of three kinds, in turn; returns the status (0: no answer within a second)."""
    host, port = url.rsplit("/", 1)[1].split(":")
    kind = i % 3
    if kind == 0:          # a valid problem, its batch size padded with zeros: 12 KB, a new spelling each time
        padded = {**PLAIN, "batch_size": "0" * (12000 - i % 4000) + "7"}
        return httpx.get(f"{url}/v1/decision", params=padded).status_code
    req = (b"POST /v1/decisions HTTP/1.1\r\nHost: x\r\nContent-Length: 104857600\r\n\r\n{" if kind == 1 else
           b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Pad: " + b"a" * 200000 + b"\r\n\r\n")
    with socket.create_connection((host, int(port)), timeout=1) as s:
        try:
            s.sendall(req)
            head = s.recv(64)
        except (TimeoutError, ConnectionResetError, BrokenPipeError):
            return 0
    return int(head.split()[1]) if head.startswith(b"HTTP/1.1 ") else 0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--db", default=str(ROOT / "heuristics.db"))
    ap.add_argument("--device", default="NVIDIA H200")
    ap.add_argument("--distinct", type=int, default=20000)
    ap.add_argument("--oversized", type=int, default=5000)
    ap.add_argument("--bound-mb", type=float, default=200.0)
    a = ap.parse_args()
    tmp = Path(tempfile.mkdtemp())
    db = tmp / "flood.db"
    shutil.copy(a.db, db)
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    proc = subprocess.Popen([sys.executable, "-m", "tuner", "serve", "--db", str(db), "--port", str(port),
                             "--log-level", "warning"], cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
    try:
        for _ in range(600):
            try:
                if httpx.get(f"{url}/healthz", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.1)
        start = rss_mb(proc.pid)
        peak, statuses, t0 = start, {}, time.time()
        print(f"server up: RSS {start:.0f} MB (the table of {db.stat().st_size / 2**20:.1f} MB of measurements loaded)")
        with httpx.Client(base_url=url, timeout=30) as c:
            for i, p in enumerate(problems(a.distinct), 1):
                s = c.get("/v1/decision", params={**p, "device": a.device}).status_code
                statuses[s] = statuses.get(s, 0) + 1
                if i % 1000 == 0:
                    peak = max(peak, rss_mb(proc.pid))
                    print(f"{i} distinct problems: RSS {rss_mb(proc.pid):.0f} MB, {i / (time.time() - t0):.0f} req/s",
                          flush=True)
        after_distinct = rss_mb(proc.pid)
        big: dict[int, int] = {}
        for i in range(a.oversized):
            s = oversized(url, i)
            big[s] = big.get(s, 0) + 1
            if (i + 1) % 1000 == 0:
                peak = max(peak, rss_mb(proc.pid))
                print(f"{i + 1} oversized requests: RSS {rss_mb(proc.pid):.0f} MB", flush=True)
        end = rss_mb(proc.pid)
        cached = [ln for ln in httpx.get(f"{url}/metrics").text.splitlines() if ln.startswith(("switchyard_cached",
                                                                                            "switchyard_dispatchers"))]
        print(f"distinct problems: {a.distinct}, statuses {statuses}; oversized: {a.oversized}, statuses {big} "
              "(0: no answer within a second)")
        print(f"RSS MB: start {start:.0f}, after the distinct flood {after_distinct:.0f}, end {end:.0f}, peak "
              f"{peak:.0f}; "
              f"growth {end - start:.0f} MB; {time.time() - t0:.0f} s")
        print("; ".join(cached))
        verdict = "within" if peak - start <= a.bound_mb else "OVER"
        print(f"bound: growth of at most {a.bound_mb:.0f} MB over the start: {verdict} ({peak - start:.0f} MB at peak)")
        if verdict != "within":
            sys.exit(1)
    finally:
        proc.terminate()
        proc.wait(15)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
