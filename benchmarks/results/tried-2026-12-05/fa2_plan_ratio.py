"""Decisions on the mixed sets if FA2-TC's default plan is predicted as m x the simulated plan's busiest-SM
ratio (canonical one-long layout: all the dispatcher knows), per variant."""
import json, math, sys
from collections import defaultdict

SMS, PAGE = 132, 16
def plan(lens, kvh):
    pages = [max(1, -(-l // PAGE)) for l in lens]
    limit = (2 * SMS) // kvh
    lo, hi = max(128 // PAGE, 1), max(pages)
    while lo < hi:
        mid = (lo + hi) // 2
        if sum(-(-p // mid) for p in pages) > limit: lo = mid + 1
        else: hi = mid
    ctas = []
    for p in pages:
        ctas += [min(lo, p - i * lo) for i in range(-(-p // lo))]
    ctas = ctas * kvh
    load = [0.0] * SMS
    for i, w in enumerate(ctas):
        load[i % SMS] += w
    return max(load)
def one_long(b, mean, top):
    if b == 1: return [top]
    base, extra = divmod(b * mean - top, b - 1)
    return [top] + [base + 1] * extra + [base] * (b - 1 - extra)
rows = json.load(open("mixdump.json"))
ratio = {}
def pr(r):
    k = (r["b"], r["mean"], r["mx"], r["kvh"])
    if k not in ratio:
        ratio[k] = plan(one_long(r["b"], r["mean"], r["mx"]), r["kvh"]) / plan([r["mean"]] * r["b"], r["kvh"])
    return ratio[k]
def variant(dtypes, wmin, wmax, combine):
    def f(r):
        if r["pid"].startswith("fa2-tc[fixed_split_size=0]") and r["cfg"].split("/")[1] in dtypes and wmin <= r["waves"] < wmax:
            return combine(r["pred"], r["m"] * pr(r))
        return r["pred"]
    return f
def sim(rule, sets):
    by = defaultdict(list)
    for r in rows:
        if r["set"] in sets and r["ok"] and r["pred"]: by[(r["set"], r["key"])].append(r)
    res = defaultdict(list)
    for (s, k), rs in by.items():
        best = min(x["meas"] for x in rs)
        ch = min(rs, key=rule)
        res[s].append(math.log(ch["meas"] / best))
    return " ".join(f"{s[:7]} {math.exp(sum(v)/len(v)):.4f}/{math.exp(max(v)):.2f}" for s, v in sorted(res.items()))
S = ["mixed1.db", "mixed2.db", "mixed3.db", "replay.db"]
print("current", sim(lambda r: r["pred"], S))
for dt in (("fp8",), ("fp8", "bf16")):
    for wmin, wmax in ((0, 99), (1, 99), (1, 1.9), (0, 1.9), (1.9, 99)):
        for cname, comb in (("replace", lambda a, b: b), ("slower", max)):
            print(dt, wmin, wmax, cname, sim(variant(dt, wmin, wmax, comb), S))
print("--- with the measured lengths (not known to the dispatcher)")
import sqlite3
L = {}
for s in ("mixed1", "mixed2", "mixed3", "replay"):
    c = sqlite3.connect(f"/tmp/ev/{s}.db")
    for b, kv, mx, kvh, Ls in c.execute("select batch_size, kv_len, max_kv_len, num_kv_heads, lengths from measurements where lengths is not null"):
        L[(s + ".db", b, kv, mx, kvh)] = json.loads(Ls)
def pr(r):
    k = (r["set"], r["b"], r["mean"], r["mx"], r["kvh"])
    if k not in ratio:
        ratio[k] = plan(L.get(k) or one_long(r["b"], r["mean"], r["mx"]), r["kvh"]) / plan([r["mean"]] * r["b"], r["kvh"])
    return ratio[k]
for dt in (("fp8",), ("fp8", "bf16")):
    for wmin, wmax in ((0, 99), (1, 1.9), (1.9, 99)):
        print(dt, wmin, wmax, sim(variant(dt, wmin, wmax, lambda a, b: b), S))
