#!/usr/bin/env bash
# usage (repository root, after score.sh has decompressed the sets to /tmp/waves, the H100 wave points to
# /tmp/waves/h100-{one-long,spread}.db, and with the commit before kv_balance checked out at $BASE, e.g.
# `git worktree add /tmp/base 3c6a5ab`):  BASE=/tmp/base bash benchmarks/results/waves/balance.sh > \
#   benchmarks/results/waves/balance.txt
# fp8_unbalanced and unbalanced_wave_power (dispatcher/predictor_config.py) picked on mixed seeds 1 and 4 (the
# power's candidates: 0, one slope at every wave count, and 1.6, fitted to the wave points' slopes at 1.2, 1.5
# and 1.75 waves, balance_bias.txt: so those are not report sets for it); reported on seeds 2 and 3,
# the replay, mixed seed 5 as two H100s measured it, the 1.5-wave points in both layouts on the H200 and the
# H100, and the off-grid sets (uniform batches: unchanged), beside the code before (fp8_partial_waves 1.4).
set -euo pipefail
w=/tmp/waves; here=$PWD
summary='
import json, sys
r = json.load(sys.stdin); o = r["overall"]["learned"]; c = r["configs"]
fp8 = {k: v["learned"] for k, v in c.items() if "kv=fp8" in k and v["learned"]["n"]}
ok = sum(v["regret_geomean"] <= 1.03 and v["regret_max"] <= 1.15 for v in fp8.values())
slow = sum(v.get("slower_than_vllm-2026", 0) for v in fp8.values())
n = sum(v["n"] for v in fp8.values())
gm, mx = o["regret_geomean"], o["regret_max"]
print(f"{sys.argv[1]:22s} {sys.argv[2]:15s} all {gm:.4f} (max {mx:.2f}); FP8 KV: "
      f"configurations within gm 1.03 and max 1.15 {ok}/{len(fp8)}, slower than vllm-2026 beyond noise {slow}/{n}")'
score() {   # label set setting [--measured-on NAME]: setting "base" runs the code at $BASE
  if [ "$3" = base ]; then
    (cd "$BASE" && .venv/bin/python -m tuner evaluate --db $here/heuristics.db --device "NVIDIA H200" --offgrid $w/$2.db \
      "${@:4}" --json) | python3 -c "$summary" "$1" "$2"
  else
    echo "{$3}" > $w/fu.json
    .venv/bin/tuner evaluate --db heuristics.db --device "NVIDIA H200" --offgrid $w/$2.db --predictor-config $w/fu.json \
      "${@:4}" --json | python3 -c "$summary" "$1" "$2"
  fi
}
H100=(--measured-on "NVIDIA H100 80GB HBM3")
echo "== choice: mixed seeds 1 and 4"
for s in mixed1 mixed4; do score "before (partial 1.4)" $s base; done
for pw in 0 1.6; do
  for f in 1.0 1.5 2.0 2.5 3.0 4.0; do
    for s in mixed1 mixed4; do score "unbalanced $f, power $pw" $s "\"fp8_unbalanced\": $f, \"unbalanced_wave_power\": $pw"; done
  done
done
echo "== report: before, and the values picked (${PICK:=\"fp8_unbalanced\": 2.0, \"unbalanced_wave_power\": 1.6})"
for s in mixed2 mixed3 replay points-one-long points-spread offgrid1 offgrid2 offgrid3 offgrid4; do
  score "before (partial 1.4)" $s base; score "picked" $s "$PICK"
done
for s in h100-mixed5a h100-mixed5b h100-one-long h100-spread; do
  score "before (partial 1.4)" $s base "${H100[@]}"; score "picked" $s "$PICK" "${H100[@]}"
done
# the 1.2- and 1.75-wave points (h100-waves-1.2-1.75/), measured at schema 5: the code before reads a copy
# marked schema 4 (it ignores the kv_balance column)
for s in long12 spread12 long175 spread175; do
  [ -f $w/h100-$s.db ] || xz -dc benchmarks/results/waves/h100-waves-1.2-1.75/$s.db.xz > $w/h100-$s.db
  cp $w/h100-$s.db $w/h100-$s-v4.db
  python3 -c "import sqlite3, sys; c = sqlite3.connect(sys.argv[1]); c.execute(\"update meta set value = '4' where key = 'schema_version'\"); c.commit()" $w/h100-$s-v4.db
  score "before (partial 1.4)" h100-$s-v4 base "${H100[@]}"; score "picked" h100-$s "$PICK" "${H100[@]}"
done
