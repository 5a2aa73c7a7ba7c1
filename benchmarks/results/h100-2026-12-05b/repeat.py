"""Mixed seed 5 measured twice on H100s (2026-12-05, call 1-2 of ../h100-2026-12-05/, and this folder's
call): per-pipeline time ratio, and the first run's winner timed in the second (the noise floor of a
mixed-batch decision between two machines), FP8 KV and BF16 KV apart.
usage (repository root): python benchmarks/results/h100-2026-12-05b/repeat.py"""
import lzma
import math
import sqlite3
import statistics
import tempfile

HERE = 'benchmarks/results/h100-2026-12-05b'
q = "select problem_key, kv_dtype, pipeline, median_us from measurements where status = 'ok'"


def load(xz: str) -> dict:
    with tempfile.NamedTemporaryFile(suffix='.db') as f:
        f.write(lzma.open(xz).read())
        f.flush()
        out: dict = {}
        for key, kv, pid, us in sqlite3.connect(f.name).execute(q):
            out.setdefault((kv, key), {})[pid] = us
        return out


old, new = load(HERE + '/../h100-2026-12-05/mixed5.db.xz'), load(HERE + '/mixed5.db.xz')
print(f"batches measured: first run {len(old)}, second {len(new)}, both {len(old.keys() & new.keys())}")
for kv in ('fp8', 'bf16'):
    common = [k for k in old if k in new and k[0] == kv]
    ratios = sorted(math.log(new[k][p] / old[k][p]) for k in common for p in new[k] if p in old[k])
    regrets = []
    for k in common:
        shared = {p for p in new[k] if p in old[k]}
        won = min(shared, key=lambda p: old[k][p])
        regrets.append(new[k][won] / min(new[k][p] for p in shared))
    print(f"{kv} KV: {len(common)} batches, {len(ratios)} pipeline times; second / first gm "
          f"{math.exp(statistics.fmean(ratios)):.3f} (p10 {math.exp(ratios[len(ratios) // 10]):.3f}, p90 "
          f"{math.exp(ratios[9 * len(ratios) // 10]):.3f}); first run's winner timed in the second: regret gm "
          f"{math.exp(statistics.fmean(math.log(r) for r in regrets)):.4f}, max {max(regrets):.3f}, "
          f"{sum(r > 1.02 for r in regrets)} over 1.02, {sum(r > 1.15 for r in regrets)} over 1.15")
    for k in common:
        shared = {p for p in new[k] if p in old[k]}
        won = min(shared, key=lambda p: old[k][p])
        best = min(shared, key=lambda p: new[k][p])
        if new[k][won] / new[k][best] > 1.02:
            b, _, mean, top = k[1].split('|')[-4:]
            print(f"  batch {b} x mean {mean}, longest {top} ({k[1].split('|')[2]} KV heads, out "
                  f"{k[1].split('|')[7]}): first run's winner {won} {old[k][won]:.1f} -> {new[k][won]:.1f} us; "
                  f"second's {best} {old[k][best]:.1f} -> {new[k][best]:.1f} us")
