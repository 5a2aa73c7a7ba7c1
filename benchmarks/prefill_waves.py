"""Prefill batches between the grid's batch rows at few query tiles, as JSON lines for `tuner sweep --problems`.

FA3 and cuDNN run one CTA per request, query head and 128 query rows; at a few tiles a batch size the
grid never measured (3, 5-7, 9-15) may fill the same whole waves over the SMs as the row below it or
one more, which reading it between the measured rows in log batch cannot see
(benchmarks/results/tried-prefill-waves/). This set is where that matters: per configuration (TP1 and
TP4 of a model preset, page 16, the four kv/out dtype pairs) seeded batches off the powers of two x
query lengths 100-600, without and after a cached prefix of up to 3x the query.

    python benchmarks/prefill_waves.py --seed 1 --out benchmarks/results/prefill-waves/prefill-waves-seed1.jsonl
    tuner sweep --problems benchmarks/results/prefill-waves/prefill-waves-seed1.jsonl --device cuda --db pw.db
"""
from __future__ import annotations

import argparse
import random

from dispatcher.problem import AttentionProblem
from tuner.problem_files import write_problems

try:
    from offgrid import configurations, log_uniform
except ImportError:                       # imported as benchmarks.prefill_waves (tests)
    from benchmarks.offgrid import configurations, log_uniform

BATCHES = (3, 5, 6, 7, 9, 10, 11, 12, 13, 14, 15)     # between the grid's prefill rows 2, 4, 8 and 16


def shapes(seed: int, model: str = "llama4-scout", per_config: int = 24) -> list[AttentionProblem]:
    rng = random.Random(seed)
    fields, _ = configurations(model, memory_gib=141.0)
    out = []
    for base in fields:
        for _ in range(per_config):
            q = log_uniform(rng, 100, 600)
            prefix = 0 if rng.random() < 0.5 else log_uniform(rng, q // 2, 3 * q)
            out.append(AttentionProblem(phase="prefill", **base, batch_size=rng.choice(BATCHES), q_len=q,
                                        kv_len=q + prefix))
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--model", default="llama4-scout")
    ap.add_argument("--per-config", type=int, default=24, help="shapes per configuration")
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    probs = shapes(a.seed, a.model, a.per_config)
    write_problems(a.out, probs)
    print(f"{len(probs)} prefill shapes (seed {a.seed}) -> {a.out}")


if __name__ == "__main__":
    main()
