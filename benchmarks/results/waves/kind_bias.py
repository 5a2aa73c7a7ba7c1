"""Measured / prior (the shipped db's uniform cells, without the partial-wave price) per KV dtype, kernel and
plan at 1-1.9 waves of work, on the four H200 mixed sets; "choice" = seeds 1 and 4, "report" = seeds 2 and 3.
usage (repository root, after score.sh): python benchmarks/results/waves/kind_bias.py > \
    benchmarks/results/waves/kind_bias.txt"""
import math
import sqlite3
import statistics

import dispatcher.predictor as P
from dispatcher.dispatch import Dispatcher
from dispatcher.predictor_config import PredictorConfig
from dispatcher.problem import AttentionProblem
from tuner.analysis.evaluate import load_table

full, dev = load_table("heuristics.db", "NVIDIA H200")
prior = Dispatcher(full, dev, predictor=PredictorConfig(fp8_partial_waves=1.0)).model._uniform
out: dict = {}
for s in ("mixed1", "mixed4", "mixed2", "mixed3"):
    c = sqlite3.connect(f"/tmp/waves/{s}.db")
    for key, qo, kvh, kd, od, b, mean, top in c.execute(
            "select problem_key, num_qo_heads, num_kv_heads, kv_dtype, out_dtype, batch_size, kv_len, max_kv_len "
            "from measurements where max_kv_len > kv_len group by problem_key"):
        if not 1 <= b * kvh / dev.sm_count < 1.9:
            continue
        t = dict(c.execute("select pipeline, median_us from measurements where problem_key = ? and status = 'ok'",
                           (key,)).fetchall())
        p = AttentionProblem(phase="decode", num_qo_heads=qo, num_kv_heads=kvh, batch_size=b, kv_len=mean,
                             max_kv_len=top, kv_dtype=kd, out_dtype=od, page_size=16).cell()
        for x in prior.ragged_prior(p):
            if x.pipeline.id in t:
                k = (kd, x.pipeline.kernel, "fixed split" if P.fixed_split(x.pipeline) else "default plan",
                     "choice" if s in ("mixed1", "mixed4") else "report")
                out.setdefault(k, []).append(t[x.pipeline.id] / x.median_us)
for k, v in sorted(out.items()):
    v = sorted(v)
    print(f"{k[0]:4s} KV {k[1]:11s} {k[2]:12s} {k[3]:6s}: {len(v):3d} times, measured / prior gm "
          f"{math.exp(statistics.fmean(math.log(x) for x in v)):.2f} (p10 {v[len(v) // 10]:.2f}, "
          f"p90 {v[9 * len(v) // 10]:.2f})")
