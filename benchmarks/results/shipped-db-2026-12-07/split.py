"""Held-out pooled regret of the learned choice, uniform cells and mixed-length cells apart, and each
seed's three worst shapes: `python split.py seed0.json seed1.json ...` (tuner evaluate --json)."""
import json
import math
import sys

for path in sys.argv[1:]:
    res = json.load(open(path))
    parts = {"uniform": [0, 0.0, 0.0], "mixed": [0, 0.0, 0.0]}
    for cfg, ms in res["configs"].items():
        v = ms.get("learned")
        if v and v["n"]:
            p = parts["mixed" if cfg.endswith(" mixed") else "uniform"]
            p[0], p[1], p[2] = p[0] + v["n"], p[1] + v["n"] * math.log(v["regret_geomean"]), max(p[2], v["regret_max"])
    print(path, "  ".join(f"{k}: gm {math.exp(s / n):.4f} over {n}, max {m:.3f}" for k, (n, s, m) in parts.items()))
    worst = sorted(((x["regret"], cfg, x["shape"], x["chose"], x["best"]) for cfg, ms in res["configs"].items()
                    for x in ms.get("learned", {}).get("worst", [])), reverse=True)[:3]
    for w in worst:
        print(f"   {w[0]:.3f} {w[1]}: {w[2]}: chose {w[3]}, best {w[4]}")
