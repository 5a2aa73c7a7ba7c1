"""Regret over the held-out cells of `tuner evaluate --train DB --json` or of --adaptive's search
(`--adaptive F --json`, key "adaptive"), pooled per phase (n-weighted geometric mean) with the worst.
usage: pooled.py LABEL JSON [KEY]"""
import json
import math
import sys

label, path = sys.argv[1:3]
r = json.load(open(path))
cfgs = r[sys.argv[3]] if len(sys.argv) > 3 else r["configs"]
parts = []
for phase in ("decode", "prefill", ""):
    ys = [(y["n"], y["regret_geomean"], y["regret_max"]) for k, y in cfgs.items() if y["n"] and k.startswith(phase)]
    n = sum(a for a, _, _ in ys)
    gm = math.exp(sum(a * math.log(b) for a, b, _ in ys) / n)
    parts.append(f"{phase or 'all'} {gm:.4f} max {max(c for _, _, c in ys):.2f} ({n})")
print(f"{label:40s} " + "; ".join(parts))
