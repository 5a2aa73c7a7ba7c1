"""One pipeline family's measured time over another's across a configuration's batch x KV grid: where
the ranking jumps (between batch sizes) and where it drifts (along the KV length). Usage:
    python benchmarks/ratio_surface.py "decode 40/8 pg32 kv=fp8 out=fp8" trtllm-xqa fa2-tc [--db DB] [--q-len 1]"""
from __future__ import annotations

import argparse

from tuner.analysis.evaluate import config_of, load_table


def surface(db: str, config: str, a: str, b: str, q_len: int) -> dict[tuple[int, int], float]:
    """(batch, kv_len) -> fastest measured pipeline whose id starts with `a` over the fastest with `b`."""
    full, _ = load_table(db, "NVIDIA H200")
    cells = {}
    for bucket, timings in full.by_cell.items():
        if config_of(bucket) != config or bucket.q_len != q_len:
            continue
        ta = [t.median_us for pid, t in timings.items() if pid.startswith(a)]
        tb = [t.median_us for pid, t in timings.items() if pid.startswith(b)]
        if ta and tb:
            cells[(bucket.batch_size, bucket.kv_len)] = min(ta) / min(tb)
    return cells


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("config")
    ap.add_argument("a")
    ap.add_argument("b")
    ap.add_argument("--db", default="heuristics.db")
    ap.add_argument("--q-len", type=int, default=1)
    args = ap.parse_args()
    cells = surface(args.db, args.config, args.a, args.b, args.q_len)
    batches, kvs = sorted({k[0] for k in cells}), sorted({k[1] for k in cells})
    print(f"{args.config}: {args.a} / {args.b}, measured median time ratio")
    print("batch \\ kv " + " ".join(f"{k:>6}" for k in kvs))
    for bb in batches:
        print(f"{bb:>10} " + " ".join(f"{cells[(bb, k)]:6.3f}" if (bb, k) in cells else "     ." for k in kvs))


if __name__ == "__main__":
    main()
