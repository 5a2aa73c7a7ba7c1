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

try:
    from offgrid import configurations, numbers
except ImportError:                       # imported as benchmarks.decode_tiles
    from benchmarks.offgrid import configurations, numbers

BATCHES = (1, 3, 6, 12, 24, 48)
KV_LENS = (272, 320, 384, 448, 576, 704)
SMS = 132                                 # H100 and H200


def shapes(model: str = "llama4-scout", sms: int = SMS, waves: tuple[float, ...] = (),
           kv_lens: tuple[int, ...] = KV_LENS) -> list[AttentionProblem]:
    """BATCHES within one wave, or with `waves` the batches that make those waves (batch x KV heads / SMs)."""
    fields, _ = configurations(model, memory_gib=141.0)
    def batches(kv_heads: int) -> list[int]:
        if waves:       # each batch once, at least 1 (two close wave counts may round to one batch)
            return list(dict.fromkeys(max(1, round(w * sms / kv_heads)) for w in waves))
        return [b for b in BATCHES if b * kv_heads <= sms]
    return [AttentionProblem(phase="decode", **base, batch_size=b, kv_len=kv)
            for base in fields for b in batches(base["num_kv_heads"]) for kv in kv_lens]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="llama4-scout")
    ap.add_argument("--sms", type=int, default=SMS, help="the GPU's SM count: batches up to one wave of CTAs")
    ap.add_argument("--waves", type=numbers(float), default=(),
                    help="instead of the batches within one wave: those making these waves, comma-separated")
    ap.add_argument("--kv-lens", type=numbers(int), default=KV_LENS, help="KV lengths, comma-separated")
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    probs = shapes(a.model, a.sms, a.waves, a.kv_lens)
    write_problems(a.out, probs)
    print(f"{len(probs)} decode shapes -> {a.out}")


if __name__ == "__main__":
    main()
