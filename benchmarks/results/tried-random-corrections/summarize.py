"""Summaries of `tuner evaluate --offgrid DB --json` outputs. usage:
  summarize.py NAME SET JSON              pooled regret, then each mixed configuration's regret gm/max (BF16 KV first)
  summarize.py fp8pair SET BEFORE AFTER   the FP8-KV mixed configurations pooled, regret gm/max before -> after"""
import json
import math
import sys


def fp8(path: str) -> str:
    cfgs = [v["learned"] for k, v in json.load(open(path))["configs"].items()
            if "kv=fp8" in k and k.endswith("mixed") and v["learned"]["n"]]
    n = sum(c["n"] for c in cfgs)
    gm = math.exp(sum(c["n"] * math.log(c["regret_geomean"]) for c in cfgs) / n)
    return f"{gm:.4f}/{max(c['regret_max'] for c in cfgs):.2f}"


if sys.argv[1] == "fp8pair":
    print(f"{sys.argv[2]} {fp8(sys.argv[3])} -> {fp8(sys.argv[4])};", end="")
    sys.exit()
name, set_, path = sys.argv[1:4]
r = json.load(open(path))
cfgs = {k: v["learned"] for k, v in r["configs"].items() if v["learned"]["n"] and k.endswith("mixed")}
cells = [f"{k.split(' pg')[0][7:]} {k.split()[-3][3:]}/{k.split()[-2][4:]} "
         f"{v['regret_geomean']:.3f}/{v['regret_max']:.2f}"
         for k, v in sorted(cfgs.items(), key=lambda kv: "kv=fp8" in kv[0])]
print(f"{name:15s} {set_:7s} all {r['overall']['learned']['regret_geomean']:.4f} | " + "; ".join(cells))
