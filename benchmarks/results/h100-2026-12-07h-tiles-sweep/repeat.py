"""The tile rows of a `tuner sweep --tiles` run against the same shapes measured by `--problems` on another H100:
how they are stored, and the repeat's winner regret (run 1's winner timed in run 2, gm over shapes)."""
import math
import sqlite3
import sys

KEY = "phase, num_qo_heads, num_kv_heads, page_size, batch_size, kv_len, max_kv_len, q_len, kv_dtype, out_dtype"


def times(path, where=""):
    c = sqlite3.connect(path)
    out = {}
    for *k, pipe, us, alone in c.execute(f"select {KEY}, pipeline, median_us, alone from measurements "
                                         f"where status = 'ok' {where}"):
        out.setdefault(tuple(k), {})[pipe] = (us, alone)
    return out


sweep, problems = times(sys.argv[1]), {**times(sys.argv[2]), **times(sys.argv[3])}
shared = [k for k in sweep if k in problems]
print(f"{len(sweep)} problems in the --tiles sweep; {len(shared)} of them also in the --problems runs")
print(f"stored alone in the sweep: {sum(a for k in shared for _, a in sweep[k].values())} rows; "
      f"in the --problems runs: {sum(a for k in shared for _, a in problems[k].values())} of "
      f"{sum(len(problems[k]) for k in shared)} rows")
logs = []
for a, b in ((sweep, problems), (problems, sweep)):
    for k in shared:
        common = set(a[k]) & set(b[k])
        win = min(common, key=lambda p: a[k][p][0])
        logs.append(math.log(b[k][win][0] / min(b[k][p][0] for p in common)))
n = len(shared)
print(f"winner regret, each run's winner timed in the other: gm {math.exp(sum(logs) / len(logs)):.4f}, "
      f"max {math.exp(max(logs)):.3f} ({2 * n} readings)")
same = sum(min(sweep[k], key=lambda p: sweep[k][p][0]) == min(problems[k], key=lambda p: problems[k][p][0])
           for k in shared)
print(f"same winner in both runs: {same} of {n}")
