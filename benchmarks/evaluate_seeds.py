"""The learned dispatcher's held-out regret over many seeds of `tuner evaluate` (20% held out each),
summed up: configuration-seeds over the targets (gm > 1.02, max > 1.10, slower than a rule beyond
noise) and the pooled regret geometric mean. A model change is compared on more seeds than the
three the README tables show. Settings come from a PredictorConfig file and/or --set NAME=VALUE.
Usage:
    python benchmarks/evaluate_seeds.py [--db heuristics.db] [--seeds 20] [--predictor-config FILE]
        [--set batch_step=3 --set twin_weight=0.5 ...] [--between] [--show]"""
from __future__ import annotations

import argparse
import dataclasses
import math

from dispatcher.predictor import PredictorConfig
from tuner.analysis.evaluate import evaluate, evaluate_between


def tally(runs: list[dict], show: bool = False) -> dict:
    gm_over = max_over = slower = 0
    logs, n, cs = 0.0, 0, 0
    for seed, configs in runs:
        for name, c in configs.items():
            lr = c["learned"]
            if show:
                _show(seed, name, lr)
            gm_over += lr["regret_geomean"] > 1.02
            max_over += lr["regret_max"] > 1.10
            slower += bool(lr["slower_than_vllm-2026"] or lr["slower_than_vllm-2025"])
            logs += lr["n"] * math.log(lr["regret_geomean"])
            n += lr["n"]
            cs += 1
    return {"config_seeds": cs, "gm_over_1.02": gm_over, "max_over_1.10": max_over, "slower_than_a_rule": slower,
            "pooled_regret_gm": round(math.exp(logs / n), 5)}


def summary(db: str, seeds: int, config: PredictorConfig, show: bool = False) -> dict:
    runs = [(seed, evaluate(db, "NVIDIA H200", seed=seed, methods=("learned",), config=config)["configs"])
            for seed in range(seeds)]
    return {"seeds": seeds, **tally(runs, show)}


def between(db: str, config: PredictorConfig, show: bool = False) -> dict:
    """The between-grid-points check (fit on every other size): one run, no seeds."""
    res = evaluate_between(db, "NVIDIA H200", methods=("learned", "rounded"), config=config)
    rounded = {c: {"learned": v["rounded"]} for c, v in res["configs"].items()}
    return {"between": tally([(0, res["configs"])], show), "rounded": tally([(0, rounded)])}


def _show(seed: int, name: str, lr: dict) -> None:
    """One line per configuration-seed over a target: where the misses are and by how much."""
    slow = {r: (lr[f"slower_than_{r}"], lr[f"worst_vs_{r}"]) for r in ("vllm-2026", "vllm-2025")}
    if lr["regret_geomean"] > 1.02 or lr["regret_max"] > 1.10 or any(k for k, _ in slow.values()):
        worst = lr["worst"][0] if lr["worst"] else {}
        print(f"seed {seed} {name}: gm {lr['regret_geomean']:.3f} max {lr['regret_max']:.3f}"
              + "".join(f"; {k} slower than {r} (worst {w:.3f}x)" for r, (k, w) in slow.items() if k)
              + (f"; worst shape {worst['shape']} chose {worst['chose']} best {worst['best']}" if worst else ""))


def settings(path: str | None, pairs: list[str]) -> PredictorConfig:
    config = PredictorConfig.from_file(path) if path else PredictorConfig()
    given = {}
    for pair in pairs:
        name, _, value = pair.partition("=")
        given[name] = float(value)
    return PredictorConfig.from_dict({**dataclasses.asdict(config), **given})


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--db", default="heuristics.db")
    ap.add_argument("--seeds", type=int, default=20)
    ap.add_argument("--predictor-config", default=None)
    ap.add_argument("--set", action="append", default=[], help="NAME=VALUE: one PredictorConfig setting")
    ap.add_argument("--between", action="store_true", help="also the between-grid-points check")
    ap.add_argument("--show", action="store_true", help="list each configuration-seed over a target")
    a = ap.parse_args()
    cfg = settings(a.predictor_config, a.set)
    out = {"db": a.db, **{k: v for k, v in dataclasses.asdict(cfg).items() if v != getattr(PredictorConfig(), k)},
           **summary(a.db, a.seeds, cfg, a.show)}
    if a.between:
        out.update(between(a.db, cfg, a.show))
    print(out)
