"""FA2-TC's CUDA-graph decode plan simulated (FlashInfer scheduler.cuh PrefillSplitQOKVIndptr): the busiest
SM's KV pages for a mixed batch against the uniform batch at its mean; compared with measured/m."""
import json, math, sqlite3, sys
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
    chunk = lo
    ctas = []
    for p in pages:
        n = -(-p // chunk)
        ctas += [min(chunk, p - i * chunk) for i in range(n)]
    ctas = ctas * kvh          # per KV head
    # blockIdx order onto SMs, two resident per SM: SM s runs CTAs s, s+SMS, s+2*SMS...
    load = [0.0] * SMS
    for i, w in enumerate(ctas):
        load[i % SMS] += w
    return max(load), len(ctas)
rows = json.load(open("mixdump.json"))
lens = {}
for s in ("mixed1", "mixed2", "mixed3", "replay"):
    c = sqlite3.connect(f"/tmp/ev/{s}.db")
    for b, kv, mx, kvh, L in c.execute("select batch_size, kv_len, max_kv_len, num_kv_heads, lengths from measurements where lengths is not null"):
        lens[(s + ".db", b, kv, mx, kvh)] = json.loads(L)
by = defaultdict(list)
for r in rows:
    if r["pid"] not in ("fa2-tc[fixed_split_size=0]", "fa2-tc[fixed_split_size=0]+out-quant") or not r["ok"]: continue
    L = lens.get((r["set"], r["b"], r["mean"], r["mx"], r["kvh"]))
    if not L: continue
    wm, nm = plan(L, r["kvh"]); wu, nu = plan([r["mean"]] * r["b"], r["kvh"])
    kd = r["cfg"].split("/")[1]
    wb = "<1" if r["waves"] < 1 else "1-1.9" if r["waves"] < 1.9 else ">=1.9"
    by[(r["set"][:6], kd, wb)].append((r["meas"] / r["m"], wm / wu))
for k in sorted(by):
    v = by[k]
    lm = [math.log(a) for a, b in v]; lp = [math.log(b) for a, b in v]
    res = [a - b for a, b in zip(lm, lp)]
    g = lambda xs: math.exp(sum(xs) / len(xs))
    rms = lambda xs: (sum(x * x for x in xs) / len(xs)) ** .5
    print(k, len(v), f"meas/m gm {g(lm):.2f} rms {rms(lm):.2f} | plan ratio gm {g(lp):.2f} | meas/(m*plan) gm {g(res):.2f} rms {rms(res):.2f}")
