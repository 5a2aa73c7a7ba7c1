"""One line per `tuner evaluate --offgrid --json` file: pooled regret, and decode's by KV dtype.
usage: summarize.py LABEL SET FILE.json"""
import json
import math
import sys

label, name, path = sys.argv[1:]
r = json.load(open(path))
parts = [f"{label:34s} {name:7s} all {r['overall']['learned']['regret_geomean']:.4f}"]
for kv in ("bf16", "fp8"):
    cs = [c["learned"] for k, c in r["configs"].items() if f"kv={kv}" in k and k.startswith("decode")]
    n = sum(c["n"] for c in cs)
    gm = math.exp(sum(c["n"] * math.log(c["regret_geomean"]) for c in cs) / n)
    parts.append(f"decode {kv.upper()} KV {gm:.4f} (max {max(c['regret_max'] for c in cs):.2f}, {n})")
print(" | ".join(parts))
