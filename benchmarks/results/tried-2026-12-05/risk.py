import json, math, itertools
from collections import defaultdict
rows = json.load(open("mixdump.json"))
S = ["mixed1.db", "mixed2.db", "mixed3.db", "replay.db"]
by = defaultdict(list)
for r in rows:
    if r["ok"] and r["pred"]: by[(r["set"], r["key"])].append(r)
def sim(rule):
    res = defaultdict(list); cfg = defaultdict(list)
    for (s, k), rs in by.items():
        best = min(x["meas"] for x in rs)
        ch = min(rs, key=rule)
        res[s].append(math.log(ch["meas"] / best))
        if "fp8" in rs[0]["cfg"].split("/")[1]: cfg[(s, rs[0]["cfg"])].append(ch["meas"]/best)
    out = {}
    for s, v in res.items():
        cs = [c for c in cfg if c[0] == s]
        ok_gm = sum(math.exp(sum(map(math.log, cfg[c]))/len(cfg[c])) <= 1.03 for c in cs)
        ok_max = sum(max(cfg[c]) <= 1.15 for c in cs)
        out[s] = (math.exp(sum(v)/len(v)), math.exp(max(v)), ok_gm, ok_max, len(cs))
    return out
def fmt(o): return "  ".join(f"{s[:7]} {g:.4f}/{m:.2f} {a}/{b}/{n}" for s, (g, m, a, b, n) in sorted(o.items()))
print("current ", fmt(sim(lambda r: r["pred"])))
res = []
for pl, pt, pf in itertools.product([0.9, 0.95, 1.0, 1.05, 1.1, 1.2], repeat=3):
    for wmin in (0, 1, 1.9):
        def rule(r, pl=pl, pt=pt, pf=pf, wmin=wmin):
            if r["skew"] <= 1 or r["waves"] < wmin: return r["pred"]
            return r["pred"] * {"longest": pl, "total": pt, "fixed": pf}[r["kind"]]
        o = sim(rule); res.append((o["mixed1.db"][0], (pl, pt, pf, wmin), o))
res.sort(key=lambda x: x[0])
for g, p, o in res[:12]: print(p, fmt(o))
