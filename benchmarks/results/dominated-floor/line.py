"""One line per `tuner evaluate --offgrid DB --json` output: all shapes' regret gm and max, the
configurations within the issue's targets (off-grid: gm 1.02 / max 1.10 over every configuration;
mixed: gm 1.03 / max 1.15 over the FP8-KV mixed ones), shapes slower than vllm-2026 beyond noise.
usage: line.py LABEL JSON"""
import json
import sys

label, path = sys.argv[1:3]
r = json.load(open(path))
cfgs = {k: v["learned"] for k, v in r["configs"].items() if v["learned"]["n"]}
mixed = any(k.endswith("mixed") for k in cfgs)
if mixed:
    cfgs = {k: v for k, v in cfgs.items() if "kv=fp8" in k and k.endswith("mixed")}
gm, mx = (1.03, 1.15) if mixed else (1.02, 1.10)
ok = sum(v["regret_geomean"] <= gm and v["regret_max"] <= mx for v in cfgs.values())
slower = sum(v["slower_than_vllm-2026"] for v in cfgs.values())
o = r["overall"]["learned"]
print(f"{label:44s} all {o['regret_geomean']:.4f} max {o['regret_max']:5.2f} | within {ok:2d}/{len(cfgs):2d} | "
      f"slower than vllm-2026 {slower}/{sum(v['n'] for v in cfgs.values())}{' (FP8-KV mixed)' if mixed else ''}")
