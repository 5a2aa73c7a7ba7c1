"""Do a batch's statistics decide the kernels' ranking? Two databases of the same batches (batch size, mean
and longest request alike) in two layouts: per batch, the fastest pipeline of one layout timed in the other
(regret over that layout's fastest, both ways), and FA2-TC's default plan in the second over the first.
One-long against spread share two statistics (batch x mean, longest); spread against tiered
(`benchmarks/wave_points.py --layout tiered`) share kv_balance too, so a small regret there and a large one
for the first pair says the third statistic carries what the layout does.
usage (repository root): python benchmarks/results/waves/same_stats.py A.db[.xz] B.db[.xz] [label]"""
import lzma
import math
import sqlite3
import statistics
import sys
import tempfile
from pathlib import Path

from dispatcher.policy import max_relerr

FA2_DEFAULT = "fa2-tc[fixed_split_size=0]"


def load(path: str) -> dict:
    """(KV heads, out dtype, batch, mean, longest) -> {pipeline: median us}, accurate ok rows only."""
    with tempfile.NamedTemporaryFile(suffix=".db") as f:
        f.write(lzma.open(path).read() if path.endswith(".xz") else Path(path).read_bytes())
        f.flush()
        out: dict = {}
        for kvh, kd, od, b, kv, top, pid, us, err in sqlite3.connect(f.name).execute(
                "select num_kv_heads, kv_dtype, out_dtype, batch_size, kv_len, max_kv_len, pipeline, median_us, "
                "relerr from measurements where status = 'ok' and phase = 'decode' and max_kv_len > kv_len"):
            if err is None or err <= max_relerr(kd, od):
                out.setdefault((kvh, od, b, kv, top), {})[pid] = us
        return out


def gm(v: list[float]) -> float:
    return math.exp(statistics.fmean(math.log(x) for x in v)) if v else float("nan")


def regret(winner_of: dict, timed_in: dict) -> float | None:
    w = min(winner_of, key=winner_of.get)
    return timed_in[w] / min(timed_in.values()) if w in timed_in else None


def main() -> None:
    a_path, b_path = sys.argv[1], sys.argv[2]
    label = sys.argv[3] if len(sys.argv) > 3 else f"{Path(a_path).name} vs {Path(b_path).name}"
    a, b = load(a_path), load(b_path)
    pairs = sorted(set(a) & set(b))
    print(f"== {label}: {len(pairs)} batches in both")
    for kvh in sorted({k[0] for k in pairs}):
        for skew in sorted({round(k[4] / k[3]) for k in pairs if k[0] == kvh}):
            keys = [k for k in pairs if k[0] == kvh and round(k[4] / k[3]) == skew]
            ab = [r for k in keys if (r := regret(a[k], b[k]))]
            ba = [r for k in keys if (r := regret(b[k], a[k]))]
            fa2 = [b[k][FA2_DEFAULT] / a[k][FA2_DEFAULT] for k in keys if FA2_DEFAULT in a[k] and FA2_DEFAULT in b[k]]
            flips = sum(min(a[k], key=a[k].get).split("[")[0] != min(b[k], key=b[k].get).split("[")[0] for k in keys)
            print(f"  {kvh} KV heads, skew {skew:2d}: {len(keys):2d} batches; A's fastest in B regret gm {gm(ab):.3f} "
                  f"max {max(ab, default=float('nan')):.2f}, B's in A gm {gm(ba):.3f} max "
                  f"{max(ba, default=float('nan')):.2f}; fastest kernel differs in {flips}; FA2-TC default B / A "
                  f"gm {gm(fa2):.2f}")
    ab = [r for k in pairs if (r := regret(a[k], b[k]))]
    ba = [r for k in pairs if (r := regret(b[k], a[k]))]
    # a winner that failed (or was inaccurate) in the other layout is left out: the counts say how many scored
    print(f"  all: A's fastest in B regret gm {gm(ab):.4f} over {len(ab)} (max {max(ab):.2f}, over 1.05 in "
          f"{sum(r > 1.05 for r in ab)}), B's in A gm {gm(ba):.4f} over {len(ba)} (max {max(ba):.2f}, over 1.05 in "
          f"{sum(r > 1.05 for r in ba)})")


if __name__ == "__main__":
    main()
