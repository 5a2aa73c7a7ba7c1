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
import json
import math
import random
from pathlib import Path

from dispatcher.problem import AttentionProblem
from tuner.models import preset
from tuner.sizes import kv_bytes


def log_uniform(rng: random.Random, lo: int, hi: int) -> int:
    return int(round(math.exp(rng.uniform(math.log(lo), math.log(hi)))))


def shapes(seed: int, model: str = "llama4-scout", decode: int = 50, prefill: int = 25,
           memory_gib: float = 141.0) -> list[AttentionProblem]:
    rng = random.Random(seed)
    m = preset(model)
    cap = 0.75 * memory_gib * 2**30 / m.num_layers
    out = []
    for tp in m.default_tps:
        hq, hkv = m.heads(tp)
        for kv_dtype in ("bf16", "fp8"):
            for out_dtype in ("bf16", "fp8"):
                base = dict(num_qo_heads=hq, num_kv_heads=hkv, head_dim=m.head_dim, page_size=16,
                            kv_dtype=kv_dtype, out_dtype=out_dtype)
                for phase, n in (("decode", decode), ("prefill", prefill)):
                    made = 0
                    while made < n:
                        if phase == "decode":
                            p = AttentionProblem(phase="decode", **base, batch_size=log_uniform(rng, 1, 384),
                                                 kv_len=log_uniform(rng, 256, 100_000))
                        else:
                            q = log_uniform(rng, 100, 6000)
                            prefix = 0 if rng.random() < 0.5 else log_uniform(rng, q, 4 * q)
                            p = AttentionProblem(phase="prefill", **base, batch_size=log_uniform(rng, 1, 16),
                                                 q_len=q, kv_len=q + prefix)
                        if kv_bytes(p) <= cap:
                            out.append(p)
                            made += 1
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
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text("".join(json.dumps(p.to_dict()) + "\n" for p in probs))
    print(f"{len(probs)} shapes (seed {a.seed}) -> {a.out}")


if __name__ == "__main__":
    main()
