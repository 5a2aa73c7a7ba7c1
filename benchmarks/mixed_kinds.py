"""The learned decisions' regret on measured mixed-length batches, by the kind of batch
(benchmarks/mixed.py: one-long, spread, tail, told apart by the stored per-request lengths) and KV dtype:
where the batch's mean and longest request leave the ranking open.

    python benchmarks/mixed_kinds.py mixed-seed1.db ... [--db heuristics.db] [--device "NVIDIA H200"]
"""
from __future__ import annotations

import argparse
import json
import math
from collections import defaultdict

from mixed import TAIL_LONG, TAIL_SHORT  # how benchmarks/mixed.py draws a tail batch

from dispatcher.measurements import read_rows
from dispatcher.resolve import default_timing_mode
from dispatcher.table import measured_problems
from tuner.analysis.evaluate import load_table, overall, score


def kind(lengths: list[int]) -> str:
    """one-long: one request at half the longest or more; tail: every request of mixed.tail's short or
    long range; spread: the rest."""
    top = max(lengths)
    if sum(1 for n in lengths if n >= top / 2) == 1:
        return "one-long"
    ranges = (TAIL_SHORT, TAIL_LONG)
    return "tail" if all(any(lo <= n <= hi for lo, hi in ranges) for n in lengths) else "spread"


def by_kind(db: str, device) -> dict[tuple[str, str], dict]:
    """The set's mixed batches (problem -> measured timings), grouped by (kind, KV dtype)."""
    rows = read_rows(db, device, default_timing_mode(device))
    lengths = {(r["num_qo_heads"], r["kv_dtype"], r["out_dtype"], r["batch_size"], r["kv_len"], r["max_kv_len"]):
               json.loads(r["lengths"]) for r in rows if r["lengths"]}
    out: dict[tuple[str, str], dict] = defaultdict(dict)
    for p, timings in measured_problems(rows).items():
        lens = lengths.get((p.num_qo_heads, p.kv_dtype, p.out_dtype, p.batch_size, p.kv_len, p.max_kv_len))
        if p.skew > 1 and lens is not None:
            out[(kind(lens), p.kv_dtype)][p] = timings
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("sets", nargs="+")
    ap.add_argument("--db", default="heuristics.db")
    ap.add_argument("--device", default="NVIDIA H200")
    args = ap.parse_args()
    table, device = load_table(args.db, args.device)
    print("| set | kind | KV | batches | regret gm | max | share of the set's log regret |")
    print("|---|---|---|---|---|---|---|")
    for db in args.sets:
        # tuner evaluate's own scoring (tuner.analysis.evaluate.score), pooled per group
        got = {g: overall(score(table, held, device, ("learned",)))["learned"]
               for g, held in by_kind(db, device).items()}
        logs = {g: r["n"] * math.log(r["regret_geomean"]) for g, r in got.items()}
        total = sum(logs.values()) or 1.0
        for (k, kv), r in sorted(got.items()):
            print(f"| {db.rsplit('/', 1)[-1]} | {k} | {kv} | {r['n']} | {r['regret_geomean']:.4f} | "
                  f"{r['regret_max']:.3f} | {logs[(k, kv)] / total:.2f} |")


if __name__ == "__main__":
    main()
