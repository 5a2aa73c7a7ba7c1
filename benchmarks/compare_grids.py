"""Two sweeps' databases against each other: per-pipeline medians (geometric mean of the ratio, by
the median's size), how often the winner is the same, and the rows timed in one round only whose
time is over 1.5x the best there but within 1.15x in the other database (a drop locked in by one slow
round). Usage: python benchmarks/compare_grids.py A.db B.db"""
from __future__ import annotations

import math
import sqlite3
import sys


def load(path: str):
    rows = sqlite3.connect(path).execute(
        "select problem_key, pipeline, median_us, min_us, max_us from measurements where status = 'ok'")
    times = {(k, p): (m, lo, hi) for k, p, m, lo, hi in rows}
    best: dict[str, float] = {}
    for (k, _), (m, _, _) in times.items():
        best[k] = min(best.get(k, math.inf), m)
    return times, best


def compare(a_path: str, b_path: str) -> list[str]:
    (a, a_best), (b, b_best) = load(a_path), load(b_path)
    bands: dict[str, list[float]] = {"< 20 us": [], "20-100 us": [], "> 100 us": []}
    for key in a.keys() & b.keys():
        m = b[key][0]
        band = "< 20 us" if m < 20 else "20-100 us" if m < 100 else "> 100 us"
        bands[band].append(math.log(a[key][0] / m))
    out = [f"{band}: {len(v)} pipelines, median ratio gm {math.exp(sum(v) / len(v)):.4f}"
           for band, v in bands.items() if v]
    win_a, win_b = winners(a), winners(b)
    both = win_a.keys() & win_b.keys()
    same = sum(win_a[k][0] == win_b[k][0] for k in both)
    gm = math.exp(sum(math.log(win_a[k][1] / win_b[k][1]) for k in both) / len(both))
    out.append(f"same winner in {same} of {len(both)} problems; winner's time gm {gm:.4f}")
    locked = [key for key, (m, lo, hi) in a.items() if lo == hi and m > 1.5 * a_best[key[0]]
              and key in b and b[key][1] != b[key][2] and b[key][0] < 1.15 * b_best[key[0]]]
    out.append(f"rows of A from one round, over 1.5x the best, within 1.15x in B: {len(locked)}")
    out += [f"  {k} {p}" for k, p in sorted(locked)[:10]]
    return out


def winners(times) -> dict[str, tuple[str, float]]:
    w: dict[str, tuple[str, float]] = {}
    for (k, p), (m, _, _) in times.items():
        if k not in w or m < w[k][1]:
            w[k] = (p, m)
    return w


if __name__ == "__main__":
    print("\n".join(compare(sys.argv[1], sys.argv[2])))
