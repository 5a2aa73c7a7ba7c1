"""On the four random mixed sets measured on the H200 (FP8 KV), per regime of waves of work (batch x KV
heads over 132 SMs):
1. how far the shipped model's prior for a mixed batch (from uniform batches: ragged_prior) is from the
   measured time, for FA2-TC's default plan and XQA (measured / prior, gm and p10-p90);
2. whether a third statistic of the lengths predicts FA2-TC's default plan against XQA better than the
   batch size, mean and longest request do: least squares of log(FA2-TC / XQA) on log waves, log skew,
   log mean and the KV heads, with the lengths' coefficient of variation or the share of requests over
   half the longest added (rms of the residual; how often its sign names the faster one).
usage (repository root): python benchmarks/results/waves/length_stats.py > benchmarks/results/waves/length_stats.txt"""
import json
import lzma
import math
import sqlite3
import statistics
from pathlib import Path

import numpy as np

from dispatcher.dispatch import Dispatcher
from dispatcher.problem import AttentionProblem
from tuner.analysis.evaluate import load_table

R = Path("benchmarks/results")
SETS = {"mixed1": R / "h200-2026-12-06/mixed1.db.xz", "mixed2": R / "h200-2026-12-06/mixed2.db.xz",
        "mixed3": R / "h200-2026-12-06/mixed3.db.xz", "mixed4": R / "prefill-tiles/mixed4.db.xz"}
REGIMES = ((0, 1), (1, 1.9), (1.9, 3), (3, 99))
W = Path("/tmp/waves")


def unxz(name: str, src: Path) -> Path:
    W.mkdir(exist_ok=True)
    out = W / f"{name}.db"
    if not out.exists():
        out.write_bytes(lzma.open(src).read())
    return out


def gm(v):
    return math.exp(statistics.fmean(math.log(x) for x in v))


full, dev = load_table("heuristics.db", "NVIDIA H200")
prior_model = Dispatcher(full, dev).model._uniform     # the uniform cells' model: what ragged_prior reads
bias, X, y = {}, [], []
for name, src in SETS.items():
    c = sqlite3.connect(unxz(name, src))
    for key, qo, kvh, od, b, mean, top, lens in c.execute(
            "select problem_key, num_qo_heads, num_kv_heads, out_dtype, batch_size, kv_len, max_kv_len, max(lengths) "
            "from measurements where max_kv_len > kv_len and kv_dtype = 'fp8' group by problem_key"):
        t = dict(c.execute("select pipeline, median_us from measurements where problem_key = ? and status = 'ok'",
                           (key,)).fetchall())
        p = AttentionProblem(phase="decode", num_qo_heads=qo, num_kv_heads=kvh, batch_size=b, kv_len=mean,
                             max_kv_len=top, kv_dtype="fp8", out_dtype=od, page_size=16).cell()
        prior = {x.pipeline.id: x.median_us for x in prior_model.ragged_prior(p)}
        waves = b * kvh / dev.sm_count
        regime = next(r for r in REGIMES if r[0] <= waves < r[1])
        for pid, us in t.items():
            kind = ("FA2-TC default plan" if pid.startswith("fa2-tc[fixed_split_size=0]") else
                    "XQA" if pid.startswith("trtllm-xqa[enable_pdl=false]") else None)
            if kind and pid in prior:
                bias.setdefault((kind, regime), []).append(us / prior[pid])
        fa2 = min((v for k, v in t.items() if k.startswith("fa2-tc[fixed_split_size=0]")), default=None)
        xqa = min((v for k, v in t.items() if k.startswith("trtllm-xqa")), default=None)
        if fa2 and xqa:
            L = np.array(json.loads(lens), float)
            X.append([1, math.log(waves), math.log(top / mean), math.log(mean), kvh == 8, L.std() / L.mean(),
                      float((L > 0.5 * L.max()).mean())])
            y.append(math.log(fa2 / xqa))

print("1. measured / prior (ragged_prior of the shipped heuristics.db's uniform cells), FP8 KV, mixed sets 1-4")
for (kind, (lo, hi)), v in sorted(bias.items()):
    v = sorted(v)
    print(f"  {kind:20s} waves {lo}-{hi}: {len(v):3d} pipeline times, gm {gm(v):.2f} "
          f"(p10 {v[len(v) // 10]:.2f}, p90 {v[9 * len(v) // 10]:.2f})")
print("2. log(FA2-TC default plan / fastest XQA) by least squares, FP8 KV, mixed sets 1-4")
Xa, ya = np.array(X, float), np.array(y)
for lo, hi in REGIMES[:2] + ((1.9, 99), (0, 99)):
    m = (Xa[:, 1] >= (math.log(lo) if lo else -99)) & (Xa[:, 1] < math.log(hi))
    for cols, name in (([0, 1, 2, 3, 4], "batch, mean, longest"), ([0, 1, 2, 3, 4, 5], "+ CV of the lengths"),
                       ([0, 1, 2, 3, 4, 6], "+ share over half the longest"), ([0, 1, 2, 3, 4, 5, 6], "+ both")):
        A = Xa[m][:, cols]
        coef = np.linalg.lstsq(A, ya[m], rcond=None)[0]
        r = ya[m] - A @ coef
        print(f"  waves {lo}-{hi}, {int(m.sum()):3d} batches, {name:30s}: rms {math.sqrt(float(np.mean(r ** 2))):.3f} "
              f"(sd of the log ratio {float(ya[m].std()):.3f}); faster one named in "
              f"{float(np.mean(np.sign(A @ coef) == np.sign(ya[m]))):.0%}")
