#!/usr/bin/env bash
# Per-kernel resident steps (with_steps.py patches split_weight's step by kernel from $RS): H100 seeds 3-8 with the
# H100 grid (where a step would be picked), H200 seeds 1-4 with the shipped db (where it would be reported).
#   bash benchmarks/results/tried-resident-step-per-kernel/run.sh > benchmarks/results/tried-resident-step-per-kernel/run.txt
# Columns per set: pooled regret, configurations within gm 1.02 and max 1.10, shapes slower than vllm-2026 beyond noise.
set -euo pipefail
R=benchmarks/results; W=$(mktemp -d); trap 'rm -rf $W' EXIT; PY=.venv/bin/python
HERE=$R/tried-resident-step-per-kernel
u() { xz -dc $R/$1.db.xz > $W/$2.db; }
u h100-2026-12-06-grid/h100grid h100grid
u h100-2026-12-05/offgrid3 s3; u h100-2026-12-05/offgrid4 s4; u h100-offgrid5-tiered/offgrid5 s5
u h100-2026-12-07c-mixed-sweep/offgrid6 s6; u h100-2026-12-07e-alone/offgrid7 s7; u h100-2026-12-07e-alone/offgrid8 s8
u h200-2026-12-05/offgrid-seed1 o1; u h200-2026-12-06/offgrid2 o2; u prefill-tiles/offgrid3 o3; u h200-offgrid4-waves/offgrid4 o4
one() {   # label RS-json
  export RS=$2; local pids=()
  for s in s3 s4 s5 s6 s7 s8; do
    PYTHONPATH=. $PY $HERE/with_steps.py evaluate --db $W/h100grid.db --device "NVIDIA H100 80GB HBM3" --offgrid $W/$s.db --json > $W/$s.json & pids+=($!)
  done
  for s in o1 o2 o3 o4; do
    PYTHONPATH=. $PY $HERE/with_steps.py evaluate --db heuristics.db --device "NVIDIA H200" --offgrid $W/$s.db --json > $W/$s.json & pids+=($!)
  done
  for p in "${pids[@]}"; do wait $p; done
  $PY - "$1" $W <<'PY'
import json, sys
label, w = sys.argv[1:]; out = []
for s in ["s3", "s4", "s5", "s6", "s7", "s8", "o1", "o2", "o3", "o4"]:
    r = json.load(open(f"{w}/{s}.json")); o = r["overall"]["learned"]; cf = {k: v["learned"] for k, v in r["configs"].items()}
    ok = sum(v["regret_geomean"] <= 1.02 and v["regret_max"] <= 1.10 for v in cf.values())
    out.append(f"{s} {o['regret_geomean']:.4f} {ok:2d} {sum(v['slower_than_vllm-2026'] for v in cf.values()):2d}")
print(f"{label:18s} | " + " | ".join(out))
PY
}
echo "tree $(git rev-parse --short HEAD), heuristics.db sha256 $(sha256sum heuristics.db | cut -c1-8)"
one "as shipped (0.4)" '{}'
for x in 0.4 0.5 0.6 0.7; do for f in 0.2 0.3 0.4; do one "xqa $x fa2-tc $f" "{\"trtllm-xqa\": $x, \"fa2-tc\": $f}"; done; done
