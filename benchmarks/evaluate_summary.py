"""Markdown table from `tuner evaluate --json` outputs (several seeds) of one database.
usage: python benchmarks/evaluate_summary.py seed0.json seed1.json ..."""
import json
import sys

runs = [json.load(open(p)) for p in sys.argv[1:]]
orc = runs[0]["oracle_vs_rules"]
print("| configuration | best vs vllm-2026 (gm / max) | best vs vllm-2025 (gm / max) | learned regret gm per seed | "
      "learned regret max | learned vs vllm-2026 gm | slower than a rule |")
print("|---|---|---|---|---|---|---|")
for cfg in sorted(orc):
    o = orc[cfg]
    ls = [r["configs"].get(cfg, {}).get("learned") for r in runs]
    ls = [x for x in ls if x and x["n"]]
    gm = " / ".join(f"{x['regret_geomean']:.3f}" for x in ls)
    mx = max((x["regret_max"] for x in ls), default=float("nan"))
    vs = " / ".join(f"{x['speedup_vs_vllm-2026']:.3f}" for x in ls)
    slower = sum(x["slower_than_vllm-2026"] + x["slower_than_vllm-2025"] for x in ls)
    print(f"| {cfg} | {o['vllm-2026']['geomean']:.3f}x / {o['vllm-2026']['max']:.2f}x | "
          f"{o['vllm-2025']['geomean']:.3f}x / {o['vllm-2025']['max']:.2f}x | {gm} | {mx:.3f} | {vs} | {slower} |")
