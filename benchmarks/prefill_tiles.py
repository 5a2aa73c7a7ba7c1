"""Prefill shapes off the grid's multiples of 128 query rows, as JSON lines for `tuner sweep --problems`.

FA3, FMHAv2 and cuDNN run a query in 128-row tiles: a length just past a multiple of 128 pays for a
nearly empty tile, which the grid's query lengths (all multiples of 128) cannot show
(benchmarks/results/tried-2026-12-05/, "Prefill query-tile padding"). Per configuration (TP1 and TP4 of
a model preset, page 16, the four kv/out dtype pairs): batch 1-16 x query lengths below, just past and
between the first multiples of 128, without and after a cached prefix of 3x the query (kv = 4 x q, as
the grid's prefix factor 4).

    python benchmarks/prefill_tiles.py --out benchmarks/results/prefill-tiles/prefill-tiles.jsonl
    # the batches between the grid's rows (1, 2, 4, 8, 16), where FA3's waves of tiles step (prefill-waves/)
    python benchmarks/prefill_tiles.py --batches 3,5,6,7,10,12,14 --q-lens 100,129,192,257,385 \
        --out benchmarks/results/prefill-rows/prefill-rows.jsonl
    tuner sweep --problems benchmarks/results/prefill-tiles/prefill-tiles.jsonl --device cuda --db tiles.db
"""
from __future__ import annotations

import argparse

from dispatcher.problem import AttentionProblem
from tuner.problem_files import write_problems
from tuner.tiles import PREFILL_BATCHES, PREFILL_Q, prefill_sizes

try:
    from offgrid import configurations, numbers
except ImportError:                       # imported as benchmarks.prefill_tiles (tests)
    from benchmarks.offgrid import configurations, numbers


def shapes(model: str = "llama4-scout", batches: tuple[int, ...] = PREFILL_BATCHES,
           q_lens: tuple[int, ...] = PREFILL_Q) -> list[AttentionProblem]:
    fields, _ = configurations(model, memory_gib=141.0)
    return [AttentionProblem(phase="prefill", **base, batch_size=b, q_len=q, kv_len=kv)
            for base in fields for b, q, kv in prefill_sizes(batches, q_lens)]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="llama4-scout")
    ap.add_argument("--batches", type=numbers(int), default=PREFILL_BATCHES, help="batch sizes, comma-separated")
    ap.add_argument("--q-lens", type=numbers(int), default=PREFILL_Q, help="new tokens per request, comma-separated")
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    probs = shapes(a.model, a.batches, a.q_lens)
    write_problems(a.out, probs)
    print(f"{len(probs)} prefill shapes -> {a.out}")


if __name__ == "__main__":
    main()
