"""FA2-TC's and FA3's default plans, measured / prior without the balance price (the shipped db's uniform
cells), per KV dtype, waves of work and kv_balance bin: the 1.5-wave points on the H200 (one-long and spread
layouts) and the four H200 mixed sets (choice seeds 1 and 4, then 2 and 3). Rows from before schema 5 take
their lengths' balance (dispatcher/table.py: stored_balance).
usage (repository root, after score.sh): python benchmarks/results/waves/balance_bias.py > \
    benchmarks/results/waves/balance_bias.txt"""
import math
import sqlite3
import statistics

import dispatcher.predictor as P
from dispatcher.dispatch import Dispatcher
from dispatcher.predictor_config import PredictorConfig
from dispatcher.table import measured_problems
from tuner.analysis.evaluate import load_table

full, dev = load_table("heuristics.db", "NVIDIA H200")
prior = Dispatcher(full, dev, predictor=PredictorConfig(fp8_unbalanced=0.0)).model._uniform
BINS = ((0, .2), (.2, .4), (.4, .6), (.6, .8), (.8, .9), (.9, 1.01))
WAVES = ((0, 1), (1, 1.9), (1.9, 99))


def rows(sets: tuple[str, ...]) -> list[tuple]:
    out = []
    for s in sets:
        con = sqlite3.connect(f"/tmp/waves/{s}.db")
        con.row_factory = sqlite3.Row
        for p, t in measured_problems(con.execute("select * from measurements where status = 'ok'")).items():
            if p.skew == 1 or p.phase != "decode":
                continue
            w = p.batch_size * p.num_kv_heads / dev.sm_count
            for x in prior.ragged_prior(p.cell()):
                if x.pipeline.id in t and x.pipeline.kernel in ("fa2-tc", "fa3") and not P.fixed_split(x.pipeline):
                    out.append((p.kv_dtype, x.pipeline.kernel, w, p.balance, t[x.pipeline.id].median_us / x.median_us))
    return out


def gm(v: list[float]) -> float:
    return math.exp(statistics.fmean(math.log(x) for x in v))


for name, sets in (("H200 1.5-wave points, both layouts", ("points-one-long", "points-spread")),
                   ("mixed seeds 1 and 4", ("mixed1", "mixed4")), ("mixed seeds 2 and 3", ("mixed2", "mixed3"))):
    got = rows(sets)
    print(f"== {name}")
    for kd in ("fp8", "bf16"):
        for k in ("fa2-tc", "fa3"):
            for lo, hi in WAVES:
                cells = []
                for blo, bhi in BINS:
                    v = [r[4] for r in got if r[:2] == (kd, k) and lo <= r[2] < hi and blo <= r[3] < bhi]
                    if v:
                        cells.append(f"{blo:.1f}-{min(bhi, 1):.1f}: {gm(v):.2f} ({len(v)})")
                if cells:
                    print(f"  {kd:4s} KV {k:6s} {lo:g}-{hi:g} waves, by balance: " + ", ".join(cells))


def fa2_default(path: str) -> dict:
    """FA2-TC's default plan's fastest time and the batch, per (KV heads, out dtype, batch, mean, longest)."""
    con = sqlite3.connect(path)
    con.row_factory = sqlite3.Row
    out: dict = {}
    rows = con.execute("select * from measurements where status = 'ok' and pipeline like 'fa2-tc[fixed_split_size=0]%'")
    for p, t in measured_problems(rows).items():
        k = (p.num_kv_heads, p.out_dtype, p.batch_size, p.kv_len, p.max_kv_len)
        us = min(x.median_us for x in t.values())
        if k not in out or us < out[k][0]:
            out[k] = (us, p)
    return out


# the slope of 1 + slope x (1 - kv_balance) that fits FA2-TC's default plan over the uniform batch at the mean
# measured in the same run, per waves of work (unbalanced_wave_power is fitted to these)
print("== FA2-TC default plan / uniform at the mean, same run: the slope a in 1 + a x (1 - kv_balance)")
for name, one, spread in (("H100 1.2 waves", "h100-long12", "h100-spread12"), ("H100 1.5 waves", "h100-one-long",
                          "h100-spread"), ("H100 1.75 waves", "h100-long175", "h100-spread175"),
                          ("H200 1.5 waves", "points-one-long", "points-spread")):
    base = fa2_default(f"/tmp/waves/{one}.db")
    pts = [(1 - p.balance, us / base[(h, od, b, kv, kv)][0])
           for path in (one, spread) for (h, od, b, kv, top), (us, p) in fa2_default(f"/tmp/waves/{path}.db").items()
           if top > kv and (h, od, b, kv, kv) in base]
    err, a = min((sum(math.log(r / (1 + s * x)) ** 2 for x, r in pts), s) for s in [i / 20 for i in range(101)])
    print(f"  {name}: {len(pts)} batches, slope {a:.2f} (rms log error {math.sqrt(err / len(pts)):.3f})")
