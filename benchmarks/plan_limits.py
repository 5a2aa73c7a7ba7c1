"""Check dispatcher.registry.graph_split_chunks against the fixed split-KV plans measured on a GPU.

Every measurement of a fixed_split_size tactic in the databases was planned in CUDA-graph mode; FlashInfer
either ran it or refused it ("new batch size should not exceed padded batch size"). This counts how
often the rule says which, at the sizes measured (a mixed batch's chunk count is the rule's estimate).

    python benchmarks/plan_limits.py heuristics.db offgrid-seed1.db ... [--sms 132]
"""
from __future__ import annotations

import argparse
import json
import sqlite3

from dispatcher import AttentionProblem
from dispatcher.registry import graph_split_chunks, load_registry

REFUSED = "should not exceed padded batch size"
QUERY = """select phase, num_qo_heads, num_kv_heads, head_dim, page_size, batch_size, q_len, kv_len, max_kv_len,
           kernel, tactic, status, error from measurements where status = 'ok' or error like ?"""


def rows(db: str):
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        yield from con.execute(QUERY, (f"%{REFUSED}%",))
    finally:
        con.close()


def check(dbs: list[str], sms: int) -> dict:
    registry = load_registry()
    out = {"plans": 0, "refused": 0, "told_right": 0, "wrong": []}
    for db in dbs:
        for ph, qh, kvh, hd, page, b, q, kv, top, kernel, tactic, status, _ in rows(db):
            fixed = int(json.loads(tactic or "{}").get("fixed_split_size", 0) or 0)
            per_sm = registry[kernel].graph_split_ctas_per_sm if kernel in registry else 0
            if not fixed or not per_sm:
                continue
            p = AttentionProblem(phase=ph, num_qo_heads=qh, num_kv_heads=kvh, head_dim=hd, page_size=page,
                                 batch_size=b, q_len=q, kv_len=kv, max_kv_len=top)
            need, room = graph_split_chunks(p, fixed, per_sm * sms)
            refused = status != "ok"
            out["plans"] += 1
            out["refused"] += refused
            if (need > room) == refused:
                out["told_right"] += 1
            else:
                out["wrong"].append(f"{db}: {p.describe()}: {need} chunks of {room}, "
                                    f"{'refused' if refused else 'planned'}")
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dbs", nargs="+")
    ap.add_argument("--sms", type=int, default=132, help="the GPU's SM count (the H200's: 132)")
    a = ap.parse_args()
    r = check(a.dbs, a.sms)
    print(f"{r['plans']} fixed split-KV plans measured, {r['refused']} refused by FlashInfer; "
          f"the rule told {r['told_right']} right")
    for w in r["wrong"]:
        print("  wrong:", w)


if __name__ == "__main__":
    main()
