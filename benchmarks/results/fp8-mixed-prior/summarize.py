"""Summaries of `tuner evaluate --json` outputs. usage:
  summarize.py holdout NAME JSON   the held-out mixed cells' regret (pooled gm, max) and all held-out shapes'
  summarize.py set NAME JSON       pooled regret and each FP8-KV mixed configuration's regret gm/max"""
import json
import math
import sys

kind, name, path = sys.argv[1:4]
r = json.load(open(path))
cfgs = {k: v["learned"] for k, v in r["configs"].items() if v["learned"]["n"]}
pooled = r["overall"]["learned"]["regret_geomean"]
if kind == "holdout":
    mixed = [v for k, v in cfgs.items() if k.endswith("mixed")]
    n = sum(v["n"] for v in mixed)
    gm = math.exp(sum(v["n"] * math.log(v["regret_geomean"]) for v in mixed) / n)
    print(f"{name:34s} mixed cells held out: {n}, regret {gm:.4f} (max {max(v['regret_max'] for v in mixed):.2f});"
          f" all held-out shapes {pooled:.4f}")
else:
    fp8 = [f"{k.split(' pg')[0][7:]} {k.split()[-2]} {v['regret_geomean']:.3f}/{v['regret_max']:.2f}"
           for k, v in cfgs.items() if "kv=fp8" in k and k.endswith("mixed")]
    print(f"{name:34s} all {pooled:.4f} | " + "; ".join(fp8))
