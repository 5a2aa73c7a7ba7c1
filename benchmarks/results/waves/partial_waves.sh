#!/usr/bin/env bash
# usage (repository root, after score.sh has decompressed the sets to /tmp/waves):
#   bash benchmarks/results/waves/partial_waves.sh > benchmarks/results/waves/partial_waves.txt
# fp8_partial_waves (dispatcher/predictor_config.py) picked on mixed seeds 1 and 4, reported on seeds 2 and 3,
# the serving replay and mixed seed 5 as two H100s measured it (the shipped H200 db's choices on their times).
set -euo pipefail
w=/tmp/waves; T=".venv/bin/tuner"
score() {   # f set [--measured-on NAME]
  echo "{\"fp8_partial_waves\": $1}" > $w/pw.json
  $T evaluate --db heuristics.db --device "NVIDIA H200" --offgrid $w/$2.db --predictor-config $w/pw.json "${@:3}" \
    --json | python3 -c "
import json, sys
r = json.load(sys.stdin); o = r['overall']['learned']; c = r['configs']
fp8 = {k: v['learned'] for k, v in c.items() if 'kv=fp8' in k}
ok = sum(v['regret_geomean'] <= 1.03 and v['regret_max'] <= 1.15 for v in fp8.values())
slow = sum(v['slower_than_vllm-2026'] for v in fp8.values())
n = sum(v['n'] for v in fp8.values())
print(f\"fp8_partial_waves {sys.argv[1]:4s} {sys.argv[2]:13s} all {o['regret_geomean']:.4f} (max {o['regret_max']:.2f}); \"
      f\"FP8 KV: configurations within gm 1.03 and max 1.15 {ok}/4, slower than vllm-2026 beyond noise {slow}/{n}\")" $1 $2
}
echo "== choice: mixed seeds 1 and 4"
for f in 1.0 1.1 1.2 1.3 1.4 1.5 1.6 1.8; do score $f mixed1; score $f mixed4; done
echo "== report (1.0: before; 1.4: picked)"
for f in 1.0 1.4; do
  for s in mixed2 mixed3 replay; do score $f $s; done
  for s in h100-mixed5a h100-mixed5b; do score $f $s --measured-on "NVIDIA H100 80GB HBM3"; done
done
