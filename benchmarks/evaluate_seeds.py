"""The learned dispatcher's held-out regret over many seeds of `tuner evaluate` (20% held out each),
summed up: configuration-seeds over the targets (gm > 1.02, max > 1.10, slower than a rule beyond
noise) and the pooled regret geometric mean. A model change is compared on more seeds than the
three the README tables show. Usage:
    python benchmarks/evaluate_seeds.py [--db heuristics.db] [--seeds 20] [--twin-weight W] [--decode-batch-step S]
        [--kv-line-from KV] [--show]"""
from __future__ import annotations

import argparse
import math

import dispatcher.table as table
from tuner.analysis.evaluate import evaluate


def summary(db: str, seeds: int, show: bool = False) -> dict:
    gm_over = max_over = slower = 0
    logs, n = 0.0, 0
    for seed in range(seeds):
        configs = evaluate(db, "NVIDIA H200", seed=seed, methods=("learned",))["configs"]
        for name, c in configs.items():
            lr = c["learned"]
            if show:
                _show(seed, name, lr)
            gm_over += lr["regret_geomean"] > 1.02
            max_over += lr["regret_max"] > 1.10
            slower += bool(lr["slower_than_vllm-2026"] or lr["slower_than_vllm-2025"])
            logs += lr["n"] * math.log(lr["regret_geomean"])
            n += lr["n"]
    return {"seeds": seeds, "config_seeds": seeds * len(configs), "gm_over_1.02": gm_over,
            "max_over_1.10": max_over, "slower_than_a_rule": slower, "pooled_regret_gm": round(math.exp(logs / n), 5)}


def _show(seed: int, name: str, lr: dict) -> None:
    """One line per configuration-seed over a target: where the misses are and by how much."""
    slow = {r: (lr[f"slower_than_{r}"], lr[f"worst_vs_{r}"]) for r in ("vllm-2026", "vllm-2025")}
    if lr["regret_geomean"] > 1.02 or lr["regret_max"] > 1.10 or any(k for k, _ in slow.values()):
        worst = lr["worst"][0] if lr["worst"] else {}
        print(f"seed {seed} {name}: gm {lr['regret_geomean']:.3f} max {lr['regret_max']:.3f}"
              + "".join(f"; {k} slower than {r} (worst {w:.3f}x)" for r, (k, w) in slow.items() if k)
              + (f"; worst shape {worst['shape']} chose {worst['chose']} best {worst['best']}" if worst else ""))


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--db", default="heuristics.db")
    ap.add_argument("--seeds", type=int, default=20)
    ap.add_argument("--twin-weight", type=float, default=None, help="override dispatcher.table.TWIN_WEIGHT")
    ap.add_argument("--decode-batch-step", type=float, default=None,
                    help="override dispatcher.table.DECODE_BATCH_STEP (1 = batch and KV steps alike)")
    ap.add_argument("--kv-line-from", type=int, default=None,
                    help="override dispatcher.table.KV_LINE_FROM (above every KV length measured: no line)")
    ap.add_argument("--show", action="store_true", help="list each configuration-seed over a target")
    a = ap.parse_args()
    if a.kv_line_from is not None:
        table.KV_LINE_FROM = a.kv_line_from
    if a.decode_batch_step is not None:
        table.DECODE_BATCH_STEP = a.decode_batch_step
    if a.twin_weight is not None:
        table.TWIN_WEIGHT = a.twin_weight
    print({"db": a.db, "twin_weight": table.TWIN_WEIGHT, "decode_batch_step": table.DECODE_BATCH_STEP,
           "kv_line_from": table.KV_LINE_FROM, **summary(a.db, a.seeds, a.show)})
