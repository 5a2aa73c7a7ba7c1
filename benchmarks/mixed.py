"""A seeded set of mixed-length decode batches, each request's KV length given (`seq_lens`), as JSON
lines for `tuner sweep --problems`: the off-grid check of the skew axis (`tuner evaluate --offgrid DB`).

Per configuration (TP1 and TP4 of a model preset, page 16, the four kv/out dtype pairs), `--per`
batches of each of three kinds, batch log-uniform in 8-256:
- one-long: one request at 2k-64k, the others around a short length of 256-4k (+-50%);
- spread: lengths uniform between 5% and 100% of a longest of 2k-64k;
- tail: about 10% of the requests at 16k-40k, the others at 500-3000 (steady-state continuous
  batching, where the longest request barely stands out from the other long ones).
Batches whose one-layer KV cache would not fit beside the model's other layers are redrawn.

    python benchmarks/mixed.py --seed 1 --out benchmarks/results/mixed/mixed-seed1.jsonl
    tuner sweep --problems benchmarks/results/mixed/mixed-seed1.jsonl --device cuda --db mixed-seed1.db
    tuner evaluate --db heuristics.db --device "NVIDIA H200" --offgrid mixed-seed1.db
"""
from __future__ import annotations

import argparse
import random
from collections.abc import Callable

from offgrid import configurations, drawn, log_uniform  # the off-grid set's draws (benchmarks/offgrid.py)

from dispatcher.problem import AttentionProblem
from tuner.problem_files import write_problems


def one_long(rng: random.Random, b: int) -> list[int]:
    short = log_uniform(rng, 256, 4096)
    return [log_uniform(rng, 2048, 65536)] + [max(1, int(short * rng.uniform(0.5, 1.5))) for _ in range(b - 1)]


def spread(rng: random.Random, b: int) -> list[int]:
    top = log_uniform(rng, 2048, 65536)
    return [top] + [max(1, int(top * rng.uniform(0.05, 1.0))) for _ in range(b - 1)]


TAIL_SHORT, TAIL_LONG = (500, 3000), (16384, 40960)      # a tail batch's two kinds of request


def tail(rng: random.Random, b: int) -> list[int]:
    return [rng.randint(*TAIL_LONG) if rng.random() < 0.1 else rng.randint(*TAIL_SHORT) for _ in range(b)]


KINDS = {"one-long": one_long, "spread": spread, "tail": tail}


def batches(seed: int, model: str = "llama4-scout", per: int = 8, memory_gib: float = 141.0) -> list[AttentionProblem]:
    rng = random.Random(seed)

    def batch(base: dict, make: Callable[[random.Random, int], list[int]]) -> AttentionProblem:
        lens = make(rng, log_uniform(rng, 8, 256))
        rng.shuffle(lens)
        return AttentionProblem.from_seq_lens(seq_lens=lens, phase="decode", **base)
    fields, cap = configurations(model, memory_gib)
    return [p for base in fields for make in KINDS.values()
            for p in drawn(lambda: batch(base, make), per, cap)]      # noqa: B023 (called at once)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--model", default="llama4-scout")
    ap.add_argument("--per", type=int, default=8, help="batches of each kind per configuration")
    ap.add_argument("--memory-gib", type=float, default=141.0, help="the GPU's memory, for the KV cap")
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    probs = batches(a.seed, a.model, a.per, a.memory_gib)
    write_problems(a.out, probs)
    skews = sorted(p.skew for p in probs)
    print(f"{len(probs)} batches (seed {a.seed}) -> {a.out}; longest/mean median {skews[len(skews) // 2]:.1f}, "
          f"max {skews[-1]:.1f}")


if __name__ == "__main__":
    main()
