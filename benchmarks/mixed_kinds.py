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

from dispatcher.dispatch import Dispatcher, default_timing_mode, read_rows
from dispatcher.policy import max_relerr
from dispatcher.registry import load_registry
from dispatcher.table import measured_problems
from tuner.analysis.evaluate import load_table


def kind(lengths: list[int]) -> str:
    """one-long: one request at half the longest or more; tail: every request short (<= 3000) or long
    (16k-40k), as mixed.tail draws them; spread: the rest."""
    top = max(lengths)
    if sum(1 for n in lengths if n >= top / 2) == 1:
        return "one-long"
    return "tail" if all(n <= 3000 or 16384 <= n <= 40960 for n in lengths) else "spread"


def regrets(db: str, dispatcher: Dispatcher) -> dict[tuple[str, str], list[float]]:
    device = dispatcher.device
    rows = read_rows(db, device, default_timing_mode(device))
    lengths = {(r["num_qo_heads"], r["kv_dtype"], r["out_dtype"], r["batch_size"], r["kv_len"], r["max_kv_len"]):
               json.loads(r["lengths"]) for r in rows if r["lengths"]}
    out: dict[tuple[str, str], list[float]] = defaultdict(list)
    for p, timings in measured_problems(rows).items():
        lens = lengths.get((p.num_qo_heads, p.kv_dtype, p.out_dtype, p.batch_size, p.kv_len, p.max_kv_len))
        if p.skew <= 1 or lens is None:
            continue
        budget = max_relerr(p.kv_dtype, p.out_dtype)
        ok = {pid: t for pid, t in timings.items() if t.relerr is None or t.relerr <= budget}
        chosen = ok.get(dispatcher.choose(p).pipeline)
        if chosen is not None:
            out[(kind(lens), p.kv_dtype)].append(chosen.median_us / min(t.median_us for t in ok.values()))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("sets", nargs="+")
    ap.add_argument("--db", default="heuristics.db")
    ap.add_argument("--device", default="NVIDIA H200")
    args = ap.parse_args()
    table, device = load_table(args.db, args.device)
    dispatcher = Dispatcher(table, device, load_registry(), learned=True)
    print("| set | kind | KV | batches | regret gm | max | share of the set's log regret |")
    print("|---|---|---|---|---|---|---|")
    for db in args.sets:
        got = regrets(db, dispatcher)
        total = sum(math.log(r) for rs in got.values() for r in rs) or 1.0
        for (k, kv), rs in sorted(got.items()):
            logs = sum(math.log(r) for r in rs)
            print(f"| {db.rsplit('/', 1)[-1]} | {k} | {kv} | {len(rs)} | {math.exp(logs / len(rs)):.4f} | "
                  f"{max(rs):.3f} | {logs / total:.2f} |")


if __name__ == "__main__":
    main()
