"""Summarize `tuner evaluate --json` outputs of the shipped db with prefill_between_keep 0 and 4 (see COMMAND).
usage: holdout_between.py HOLDOUT-K0.json HOLDOUT-K4.json BETWEEN-K0.json BETWEEN-K4.json"""
import json
import sys

for kind, (k0, k4) in (("holdout", sys.argv[1:3]), ("between", sys.argv[3:5])):
    a, b = json.load(open(k0)), json.load(open(k4))
    for key, v in a["overall"].items():
        if isinstance(v, dict) and "regret_geomean" in v:
            w = b["overall"][key]
            print(f"{kind:8s} {key:8s} n={v['n']}  keep 0: gm {v['regret_geomean']:.6f} max {v['regret_max']:.3f}   "
                  f"keep 4: gm {w['regret_geomean']:.6f} max {w['regret_max']:.3f}")
    for k in a["configs"]:
        x, y = a["configs"][k]["learned"], b["configs"][k]["learned"]
        if x != y:
            print(f"{kind:8s} changed: {k}: gm {x['regret_geomean']:.4f} max {x['regret_max']:.3f} -> "
                  f"gm {y['regret_geomean']:.4f} max {y['regret_max']:.3f} (n={x['n']})")
