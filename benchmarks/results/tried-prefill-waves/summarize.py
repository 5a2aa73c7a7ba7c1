"""One line from `tuner evaluate --offgrid DB --json` on stdin: pooled regret and worst shape, then per prefill
configuration regret gm / max / speedup over vllm-2026. usage: summarize.py NAME SET"""
import json
import sys

r = json.load(sys.stdin)
cfgs = {k: v["learned"] for k, v in r["configs"].items() if v["learned"]["n"]}
pre = " ".join(f"{v['regret_geomean']:.3f}/{v['regret_max']:.2f}/{v['speedup_vs_vllm-2026']:.3f}"
               for k, v in cfgs.items() if k.startswith("prefill"))
print(f"{sys.argv[1]:10s} {sys.argv[2]:22s} all {r['overall']['learned']['regret_geomean']:.4f} "
      f"max {max(v['regret_max'] for v in cfgs.values()):.3f} | prefill {pre}")
