#!/usr/bin/env bash
# FP8's fixed-split price (`fp8_fixed_chunks`: from unsplit_waves, a fixed split costs one wave of its chunks at
# least) applied to BF16-KV decode too, on a worktree of 62dd6b1 with experiment.patch; CPU replay:
#   bash benchmarks/results/tried-bf16-fixed-chunks/run.sh > benchmarks/results/tried-bf16-fixed-chunks/run.txt
set -euo pipefail
R=$PWD/benchmarks/results; D=$R/tried-bf16-fixed-chunks; W=$(mktemp -d); trap 'git worktree remove --force $W/tree; rm -rf $W' EXIT
git worktree add -q --detach $W/tree 62dd6b1 && git -C $W/tree apply $D/experiment.patch
cp heuristics.db $W/tree/heuristics.db
u() { xz -dc $R/$1.db.xz > $W/$2.db; }
u h200-2026-12-06/mixed1 m1; u h200-2026-12-06/mixed2 m2; u h200-2026-12-06/mixed3 m3; u prefill-tiles/mixed4 m4
echo '{}' > $W/off.json; echo '{"bf16_fixed_chunks": 1}' > $W/on.json
cd $W/tree
for s in m1 m2 m3 m4; do for v in off on; do
  PYTHONPATH=$PWD $OLDPWD/.venv/bin/python -m tuner evaluate --db heuristics.db --device "NVIDIA H200" --offgrid $W/$s.db \
    --predictor-config $W/$v.json --json > $W/$s-$v.json &
done; done; wait
$OLDPWD/.venv/bin/python - $W <<'PY'
import json, sys
w = sys.argv[1]
print("H200 mixed seeds 1-4, the shipped table: all batches' regret gm; BF16-KV configurations gm / max")
for s in ("m1", "m2", "m3", "m4"):
    for v in ("off", "on"):
        r = json.load(open(f"{w}/{s}-{v}.json"))
        cells = [f"{k.split()[1]} {k.split()[4]} {c['learned']['regret_geomean']:.4f}/{c['learned']['regret_max']:.2f}"
                 for k, c in r["configs"].items() if "kv=bf16" in k and k.endswith("mixed")]
        print(f"seed {s[1]} bf16_fixed_chunks {v:3s}: all {r['overall']['learned']['regret_geomean']:.4f}; {'; '.join(cells)}")
        worst = [b for k, c in r["configs"].items() if "kv=bf16" in k and k.endswith("mixed")
                 for b in c["learned"]["worst"]]
        for bad in sorted(worst, key=lambda b: -b["regret"])[:2]:
            print(f"    worst: {bad['shape']}: {bad['regret']:.2f}, chose {bad['chose']}, best {bad['best']}")
PY
