"""Uniform decode shapes between the grid's KV lengths at one wave of work or less, as JSON lines for
`tuner sweep --problems` (stored as measured alone: they correct the grid's model near them).

There XQA's time steps between the grid's powers of two: at batch x KV heads <= the SMs (132 on an H100 or H200)
and KV 257-384, the model reads XQA 8-12% too fast against FA2-TC on both GPUs' off-grid seeds, and 4-5% too slow
at KV 513-768 (benchmarks/results/decode-tiles/bias.txt). Per configuration (TP1 and TP4 of a model preset, page
16, the four kv/out dtype pairs): batches 1-48 within one wave x KV lengths off the grid's powers of two.

    python benchmarks/decode_tiles.py --out benchmarks/results/decode-tiles/decode-tiles.jsonl
    tuner sweep --problems benchmarks/results/decode-tiles/decode-tiles.jsonl --device cuda --db heuristics.db
"""
from __future__ import annotations

import argparse

from dispatcher.problem import AttentionProblem
from tuner.problem_files import write_problems

try:
    from offgrid import configurations
except ImportError:                       # imported as benchmarks.decode_tiles
    from benchmarks.offgrid import configurations

BATCHES = (1, 3, 6, 12, 24, 48)
KV_LENS = (272, 320, 384, 448, 576, 704)
SMS = 132                                 # H100 and H200


def shapes(model: str = "llama4-scout", sms: int = SMS) -> list[AttentionProblem]:
    fields, _ = configurations(model, memory_gib=141.0)
    return [AttentionProblem(phase="decode", **base, batch_size=b, kv_len=kv)
            for base in fields for b in BATCHES if b * base["num_kv_heads"] <= sms for kv in KV_LENS]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="llama4-scout")
    ap.add_argument("--sms", type=int, default=SMS, help="the GPU's SM count: batches up to one wave of CTAs")
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    probs = shapes(a.model, a.sms)
    write_problems(a.out, probs)
    print(f"{len(probs)} decode shapes -> {a.out}")


if __name__ == "__main__":
    main()
