"""A seeded set of serving-like shapes off the sweep's grid, as JSON lines for `tuner sweep --problems`:
the check of what users get between grid points (`tuner evaluate --offgrid DB`).

Per configuration (TP1 and TP4 of a model preset, page 16, the four kv/out dtype pairs): decode at
batch 1-384 x KV 256-100k and prefill at batch 1-16 x 100-6000 new tokens, half of them after a
cached prefix of up to 4x; every size log-uniform, integer, not rounded to any lattice. Shapes whose
one-layer KV cache would not fit beside the model's other layers on `--memory-gib` are redrawn.

    python benchmarks/offgrid.py --seed 1 --out benchmarks/results/offgrid/offgrid-seed1.jsonl
    tuner sweep --problems benchmarks/results/offgrid/offgrid-seed1.jsonl --device cuda --db offgrid-seed1.db
    tuner evaluate --db heuristics.db --device "NVIDIA H200" --offgrid offgrid-seed1.db
"""
from __future__ import annotations

import argparse
import math
import random
from collections.abc import Callable

from dispatcher.problem import AttentionProblem
from tuner.models import preset
from tuner.problem_files import write_problems
from tuner.sizes import kv_bytes


def log_uniform(rng: random.Random, lo: int, hi: int) -> int:
    return int(round(math.exp(rng.uniform(math.log(lo), math.log(hi)))))


def configurations(model: str, memory_gib: float) -> tuple[list[dict], float]:
    """Each configuration's problem fields (TP1 and TP4 of the preset, page 16, the four kv/out dtype
    pairs), and the one-layer KV cache that fits beside the model's other layers on `memory_gib`."""
    m = preset(model)
    fields = [dict(num_qo_heads=m.heads(tp)[0], num_kv_heads=m.heads(tp)[1], head_dim=m.head_dim, page_size=16,
                   kv_dtype=kv_dtype, out_dtype=out_dtype, window_left=m.window_left, has_sinks=m.has_sinks)
              for tp in m.default_tps for kv_dtype in ("bf16", "fp8") for out_dtype in ("bf16", "fp8")]
    return fields, 0.75 * memory_gib * 2**30 / m.num_layers


def numbers(kind: type) -> Callable[[str], tuple]:
    """An argparse type: comma-separated positive finite `kind`s, each once, in order (the tile-set writers)."""
    name = "integers" if kind is int else "numbers"

    def parse(text: str) -> tuple:
        try:
            values = tuple(dict.fromkeys(kind(v) for v in text.split(",")))
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected comma-separated {name}, got {text!r}") from None
        if not all(0 < v < math.inf for v in values):
            raise argparse.ArgumentTypeError(f"expected positive finite {name}, got {text!r}")
        return values
    return parse


def drawn(make: Callable[[], AttentionProblem], n: int, cap: float) -> list[AttentionProblem]:
    """n problems from `make`, redrawing those whose KV cache is over `cap`."""
    out: list[AttentionProblem] = []
    while len(out) < n:
        p = make()
        if kv_bytes(p) <= cap:
            out.append(p)
    return out


def shapes(seed: int, model: str = "llama4-scout", decode: int = 50, prefill: int = 25,
           memory_gib: float = 141.0) -> list[AttentionProblem]:
    rng = random.Random(seed)

    def decode_shape(base: dict) -> AttentionProblem:
        return AttentionProblem(phase="decode", **base, batch_size=log_uniform(rng, 1, 384),
                                kv_len=log_uniform(rng, 256, 100_000))

    def prefill_shape(base: dict) -> AttentionProblem:
        q = log_uniform(rng, 100, 6000)
        prefix = 0 if rng.random() < 0.5 else log_uniform(rng, q, 4 * q)
        return AttentionProblem(phase="prefill", **base, batch_size=log_uniform(rng, 1, 16), q_len=q, kv_len=q + prefix)
    fields, cap = configurations(model, memory_gib)
    out = []
    for base in fields:
        out += drawn(lambda: decode_shape(base), decode, cap)      # noqa: B023 (called at once)
        out += drawn(lambda: prefill_shape(base), prefill, cap)    # noqa: B023
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--model", default="llama4-scout")
    ap.add_argument("--decode", type=int, default=50, help="decode shapes per configuration")
    ap.add_argument("--prefill", type=int, default=25, help="prefill shapes per configuration")
    ap.add_argument("--memory-gib", type=float, default=141.0, help="the GPU's memory, for the KV cap")
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    probs = shapes(a.seed, a.model, a.decode, a.prefill, a.memory_gib)
    write_problems(a.out, probs)
    print(f"{len(probs)} shapes (seed {a.seed}) -> {a.out}")


if __name__ == "__main__":
    main()
