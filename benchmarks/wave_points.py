"""Decode batches at 1.5 waves of work (batch x KV heads = 1.5 x the SMs, rounded to the decision
lattice's batch), FP8 KV, the MIXED grid's KV lengths and skews: the regime between FlashInfer's one
wave and its unsplit_waves where no grid point falls (batch 64 and 128 of 2 KV heads are 0.97 and 1.94
waves on 132 SMs) and where the random mixed sets' worst FP8 choices are (benchmarks/results/waves/).
Laid out as the sweep lays out a batch (--layout one-long, tuner/lengths.py's canonical), by
`spread` (the same statistics, lengths evenly spaced down from the longest) or by `tiered` (the spread
batch's statistics and kv_balance, laid out as tuner/lengths.py's `balanced` lays out a given balance:
some requests at the longest, the rest alike), as JSON lines for `tuner sweep --problems`. Spread against
tiered tells whether the three statistics rank the kernels where two do not (one-long against spread).

    python benchmarks/wave_points.py --layout one-long --out benchmarks/results/waves/one-long.jsonl
"""
from __future__ import annotations

import argparse

from offgrid import configurations  # the off-grid set's configurations (benchmarks/offgrid.py)

from dispatcher.cells import longest_request
from dispatcher.problem import AttentionProblem
from tuner.grid import MIXED
from tuner.lengths import LAYOUTS, balanced
from tuner.problem_files import write_problems
from tuner.sizes import kv_bytes


def points(layout: str, sm_count: int = 132, waves: float = 1.5, model: str = "llama4-scout",
           memory_gib: float = 141.0) -> list[AttentionProblem]:
    fields, cap = configurations(model, memory_gib)
    out = []
    for base in fields:
        if base["kv_dtype"] != "fp8":
            continue
        b = round(waves * sm_count / base["num_kv_heads"])
        for skew in MIXED.decode_skew:
            if skew == 1 and layout != "one-long":
                continue                  # a uniform batch has one layout
            for kv in MIXED.decode_kv:
                top = kv * skew
                if kv < 512 or top > min(max(MIXED.decode_kv), longest_request(b, kv, 1)):
                    continue
                p = AttentionProblem(phase="decode", batch_size=b, kv_len=kv, max_kv_len=top, **base)
                if kv_bytes(p) > cap:
                    continue
                out.append(p if skew == 1 else laid_out(p, layout, base))
    return out


def laid_out(p: AttentionProblem, layout: str, fields: dict) -> AttentionProblem:
    """p with its requests' lengths laid out by `layout` (tiered: at the spread layout's kv_balance)."""
    if layout == "tiered":
        spread = AttentionProblem.from_seq_lens(seq_lens=LAYOUTS["spread"](p), phase="decode", **fields)
        lens = balanced(spread)
    else:
        lens = LAYOUTS[layout](p)
    return AttentionProblem.from_seq_lens(seq_lens=lens, phase="decode", **fields)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--layout", choices=sorted({*LAYOUTS, "tiered"}), default="one-long")
    ap.add_argument("--sm-count", type=int, default=132, help="the GPU's SMs (132: H100, H200)")
    ap.add_argument("--waves", type=float, default=1.5, help="batch x KV heads over the SMs (1.5: between "
                    "one wave and FlashInfer's unsplit waves)")
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    probs = points(a.layout, a.sm_count, a.waves)
    write_problems(a.out, probs)
    print(f"{len(probs)} batches ({a.layout}) -> {a.out}")


if __name__ == "__main__":
    main()
