"""How well the ragged prior's pieces fit measured mixed batches, per pipeline and band of waves
(batch x KV heads over the SM count). usage: prior_fit.py KV_DTYPE DB... (mixed batches of these
databases, BF16 output; the model is the shipped heuristics.db's uniform cells)."""
import collections
import math
import sys

from dispatcher import dispatch
from dispatcher.measurements import read_rows
from dispatcher.table import measured_problems

kv_dtype, dbs = sys.argv[1], sys.argv[2:]
model = dispatch.load("heuristics.db", "NVIDIA H200").model
uniform = model._uniform or model
sms = model.sm_count


def at(p, stepped=True, **sizes):
    return {t.pipeline.id: t.median_us for t in uniform.at(p.with_sizes(**sizes), stepped)}


def band(waves):
    return "<1" if waves < 1 else "1-1.9" if waves < 1.9 else "1.9-4" if waves < 4 else "4-8" if waves < 8 else "8+"


fits = collections.defaultdict(list)
for db in dbs:
    for p, timings in measured_problems(read_rows(db, dispatch.device_of(db, "NVIDIA H200"), "graph")).items():
        if p.skew == 1 or p.kv_dtype != kv_dtype or p.phase != "decode" or p.out_dtype != "bf16":
            continue
        prior = {t.pipeline.id: t.median_us for t in uniform.ragged_prior(p)}
        mean = at(p, False, max_kv_len=p.kv_len)
        wave = min(p.batch_size, max(1, sms // p.num_kv_heads))
        one_wave = at(p, batch_size=wave, kv_len=p.max_kv_len, max_kv_len=p.max_kv_len)
        for pid, t in timings.items():
            if ("xqa" in pid or "fa2-tc" in pid) and pid in prior and pid in mean and pid in one_wave:
                us = t.median_us
                fits[(pid, band(p.batch_size * p.num_kv_heads / sms))].append(
                    (us / prior[pid], us / max(mean[pid], one_wave[pid]), us / (mean[pid] + one_wave[pid])))


def gm(xs):
    return math.exp(sum(map(math.log, xs)) / len(xs))


print(f"{kv_dtype} KV, measured / estimate, gm [min, max]: the prior as shipped; the slower of the batch at the "
      "mean and one wave at the longest; their sum")
for (pid, b), rows in sorted(fits.items()):
    cols = ["%.2f [%.2f, %.2f]" % (gm(c), min(c), max(c)) for c in zip(*rows)]
    print(f"{pid:32s} {b:6s} n={len(rows):3d}  prior {cols[0]:20s} slower {cols[1]:20s} sum {cols[2]}")
