"""Uniform decode shapes between the grid's KV lengths at one wave of work or less, as JSON lines for
`tuner sweep --problems` (stored as measured alone: they correct the grid's model near them).

There XQA's time steps between the grid's powers of two: at batch x KV heads <= the SMs (132 on an H100 or H200)
and KV 257-384, the model reads XQA 8-12% too fast against FA2-TC on both GPUs' off-grid seeds, and 4-5% too slow
at KV 513-768 (benchmarks/results/decode-tiles/bias.txt). Per configuration (TP1 and TP4 of a model preset, page
16, the four kv/out dtype pairs): batches 1-48 within one wave x KV lengths off the grid's powers of two.

    python benchmarks/decode_tiles.py --out benchmarks/results/decode-tiles/decode-tiles.jsonl
    # past one wave, where BF16 XQA's second resident CTA costs more than the model's step at short KV
    python benchmarks/decode_tiles.py --waves 1.15,1.4,1.7 --kv-lens 272,384,576,704,1400,2800 \
        --out benchmarks/results/decode-tiles/decode-band.jsonl
    tuner sweep --problems benchmarks/results/decode-tiles/decode-tiles.jsonl --device cuda --db heuristics.db
"""
from __future__ import annotations

import argparse

from dispatcher.problem import AttentionProblem
from tuner.problem_files import write_problems
from tuner.tiles import DECODE_KV, decode_sizes

try:
    from offgrid import configurations, numbers
except ImportError:                       # imported as benchmarks.decode_tiles
    from benchmarks.offgrid import configurations, numbers

SMS = 132                                 # H100 and H200


def shapes(model: str = "llama4-scout", sms: int = SMS, waves: tuple[float, ...] = (),
           kv_lens: tuple[int, ...] = DECODE_KV) -> list[AttentionProblem]:
    """tuner.tiles' decode batches within one wave, or with `waves` the batches that make those waves."""
    fields, _ = configurations(model, memory_gib=141.0)
    return [AttentionProblem(phase="decode", **base, batch_size=b, kv_len=kv)
            for base in fields for b, kv in decode_sizes(base["num_kv_heads"], sms, waves, kv_lens)]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="llama4-scout")
    ap.add_argument("--sms", type=int, default=SMS, help="the GPU's SM count: batches up to one wave of CTAs")
    ap.add_argument("--waves", type=numbers(float), default=(),
                    help="instead of the batches within one wave: those making these waves, comma-separated")
    ap.add_argument("--kv-lens", type=numbers(int), default=DECODE_KV, help="KV lengths, comma-separated")
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    probs = shapes(a.model, a.sms, a.waves, a.kv_lens)
    write_problems(a.out, probs)
    print(f"{len(probs)} decode shapes -> {a.out}")


if __name__ == "__main__":
    main()
