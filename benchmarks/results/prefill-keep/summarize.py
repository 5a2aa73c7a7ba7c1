"""One line per `tuner evaluate --offgrid ... --json` output: pooled regret gm and max, configurations over
gm 1.02 or max 1.10, configurations slower than vllm-2026 on average, shapes slower than it beyond the noise.
usage: summarize.py LABEL EVAL.json..."""
import json
import sys

for path in sys.argv[2:]:
    r = json.load(open(path))
    cf = {k: v["learned"] for k, v in r["configs"].items() if v["learned"]["n"]}
    o, n = r["overall"]["learned"], sum(v["n"] for v in cf.values())
    over = sum(v["regret_geomean"] > 1.02 or v["regret_max"] > 1.10 for v in cf.values())
    slow = sum(v["speedup_vs_vllm-2026"] < 1 for v in cf.values())
    beyond = sum(v["slower_than_vllm-2026"] for v in cf.values())
    name = path.split("/")[-1].rsplit(".", 1)[0]
    print(f"{sys.argv[1]:6s} {name:12s} gm {o['regret_geomean']:.4f} max {o['regret_max']:.3f} over {over:2d}/{len(cf)} "
          f"slower-on-average {slow} beyond-noise {beyond}/{n}")
