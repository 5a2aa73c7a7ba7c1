"""Every decision a database gives, as one digest: for a change that must not change decisions.

Takes each measured problem of the database (a grid point) and one seeded problem between it and the
point below (sizes scaled by 0.55-1.0), asks `tuner decide --input` for all of them, and prints the
number of decisions and the sha256 of the output. Run it before and after a change; equal digests
mean byte-identical decisions, reasons and expected times. Usage:

    python benchmarks/decision_snapshot.py [--db heuristics.db] [--device "NVIDIA H200"] [--keep FILE]
"""
from __future__ import annotations

import argparse
import hashlib
import json
import random
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
COLUMNS = "phase,num_qo_heads,num_kv_heads,head_dim,page_size,batch_size,kv_len,q_len,q_dtype,kv_dtype,out_dtype"


def problems(db: str, seed: int = 7) -> list[dict]:
    conn = sqlite3.connect(db)
    conn.row_factory = sqlite3.Row
    rows = [dict(r) for r in conn.execute(f"select distinct {COLUMNS} from winners order by {COLUMNS}")]
    rng, out = random.Random(seed), []
    for d in rows:
        between = dict(d, batch_size=max(1, int(d["batch_size"] * rng.uniform(0.55, 1.0))))
        if d["phase"] == "prefill":
            between["q_len"] = max(1, int(d["q_len"] * rng.uniform(0.55, 1.0)))
            between["kv_len"] = max(between["q_len"], int(d["kv_len"] * rng.uniform(0.55, 1.0)))
        else:
            between["kv_len"] = max(1, int(d["kv_len"] * rng.uniform(0.55, 1.0)))
        out += [d, between]
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--db", default=str(ROOT / "heuristics.db"))
    ap.add_argument("--device", default="NVIDIA H200")
    ap.add_argument("--keep", help="also write the decisions (JSON lines) here")
    a = ap.parse_args()
    with tempfile.NamedTemporaryFile("w", suffix=".jsonl", delete=False) as f:
        f.write("".join(json.dumps(p) + "\n" for p in problems(a.db)))
    r = subprocess.run([sys.executable, "-m", "tuner", "decide", "--db", a.db, "--device", a.device, "--input", f.name],
                       cwd=ROOT, capture_output=True, text=True, check=True)
    if a.keep:
        Path(a.keep).write_text(r.stdout)
    print(f"{len(r.stdout.splitlines())} decisions, sha256 {hashlib.sha256(r.stdout.encode()).hexdigest()}")


if __name__ == "__main__":
    main()
