"""One line from a `tuner evaluate --offgrid MIXED_DB --json` output on stdin: the pooled regret over all
batches and each FP8-KV mixed configuration's regret gm/max. usage: summarize.py NAME SET"""
import json
import sys

r = json.load(sys.stdin)
cells = []
for k, v in r["configs"].items():
    s = v["learned"]
    if "kv=fp8" in k and k.endswith("mixed") and s["n"]:
        cells.append(f"{k.split(' pg')[0][7:]} {k.split()[-2]} {s['regret_geomean']:.3f}/{s['regret_max']:.2f}")
print(sys.argv[1].ljust(30), sys.argv[2], "all %.4f |" % r["overall"]["learned"]["regret_geomean"], "; ".join(cells))
