import json, math, sys
from collections import defaultdict
rows = json.load(open("mixdump.json"))
def wb(r, edges): return sum(r["waves"] >= e for e in edges)
def sb(r, edges): return sum(r["skew"] >= e for e in edges)
def key(r, W, S, dt):
    return (r["kind"], r["cfg"].split("/")[1] if dt else "", wb(r, W), sb(r, S))
def fit(train, W, S, dt, shrink):
    acc = defaultdict(list)
    for r in rows:
        if r["set"] in train and r["ok"] and r["pred"]:
            acc[key(r, W, S, dt)].append(math.log(r["meas"] / r["pred"]))
    return {k: sum(v) / (len(v) + shrink) for k, v in acc.items()}
def sim(f, sets, W, S, dt):
    by = defaultdict(list)
    for r in rows:
        if r["set"] in sets and r["ok"] and r["pred"]: by[(r["set"], r["key"])].append(r)
    res = defaultdict(list)
    for (s, k), rs in by.items():
        best = min(x["meas"] for x in rs)
        ch = min(rs, key=lambda x: x["pred"] * math.exp(f.get(key(x, W, S, dt), 0.0)))
        res[s].append(math.log(ch["meas"] / best))
    return " ".join(f"{s[:7]} {math.exp(sum(v)/len(v)):.4f}/{math.exp(max(v)):.2f}" for s, v in sorted(res.items()))
S_ALL = ["mixed1.db", "mixed2.db", "mixed3.db", "replay.db"]
print("none      ", sim({}, S_ALL, [], [], False))
for W in ([1.9], [1, 1.9], [1, 1.9, 4], [1, 1.9, 6]):
    for Sk in ([], [3], [2, 4, 8]):
        for dt in (False, True):
            for shrink in (0, 5):
                f = fit(["mixed1.db"], W, Sk, dt, shrink)
                print(W, Sk, dt, shrink, sim(f, S_ALL, W, Sk, dt))
