#!/usr/bin/env bash
# CPU replay of committed measurements (no device), the shipped settings against the settings before
# (`before.json`):
#   bash benchmarks/results/fp8-mixed-prior/run.sh > benchmarks/results/fp8-mixed-prior/run.txt
set -euo pipefail
D=benchmarks/results/fp8-mixed-prior; R=benchmarks/results
W=$(mktemp -d); trap 'rm -rf $W' EXIT
T=".venv/bin/tuner"; PY=".venv/bin/python"; H100="NVIDIA H100 80GB HBM3"
unpack() { xz -dc $R/$1.db.xz > $W/$2.db; }
unpack h200-2026-12-06/mixed1 mixed1; unpack h200-2026-12-06/mixed2 mixed2; unpack h200-2026-12-06/mixed3 mixed3
unpack prefill-tiles/mixed4 mixed4; unpack h200-2026-12-06/replay replay; unpack h100-2026-12-06-grid/h100grid h100grid
unpack h100-2026-12-05/mixed5 h100-mixed5; unpack h100-mixed6-7/mixed6 h100-mixed6; unpack h100-mixed6-7/mixed7 h100-mixed7
unpack h200-2026-12-05/offgrid-seed1 offgrid1; unpack h200-2026-12-06/offgrid2 offgrid2
for cfg in before shipped; do
  [ $cfg = before ] && pc="--predictor-config $D/before.json" || pc=""
  for s in 0 1 2; do $T evaluate --db heuristics.db --device "NVIDIA H200" --seed $s $pc --json > $W/hold$s-$cfg.json & done
  for n in mixed1 mixed2 mixed3 mixed4 replay offgrid1 offgrid2; do
    $T evaluate --db heuristics.db --device "NVIDIA H200" --offgrid $W/$n.db $pc --json > $W/$n-$cfg.json &
  done
  for n in h100-mixed5 h100-mixed6 h100-mixed7; do
    $T evaluate --db $W/h100grid.db --device "$H100" --offgrid $W/$n.db $pc --json > $W/$n-$cfg.json &
  done
  wait
done
echo "## Choice sets: the shipped db's mixed cells held out (tuner evaluate --seed N), mixed seed 1"
for s in 0 1 2; do for cfg in before shipped; do $PY $D/summarize.py holdout "seed $s, $cfg" $W/hold$s-$cfg.json; done; done
for cfg in before shipped; do $PY $D/summarize.py set "mixed seed 1, $cfg" $W/mixed1-$cfg.json; done
echo; echo "## Report sets (FP8-KV mixed configurations: regret gm/max)"
for n in mixed2 mixed3 mixed4 replay h100-mixed5 h100-mixed6 h100-mixed7; do
  for cfg in before shipped; do $PY $D/summarize.py set "$n, $cfg" $W/$n-$cfg.json; done
done
echo; echo "## Issue 25's targets (benchmarks/targets.py)"
for n in mixed1 mixed2 mixed3 mixed4 replay h100-mixed5 h100-mixed6 h100-mixed7; do
  for cfg in before shipped; do cp $W/$n-$cfg.json $W/$n-$cfg-.json; $PY benchmarks/targets.py $W/$n-$cfg-.json; done
done | sed "s|$W/||"
echo; echo "## Uniform batches: off-grid seeds 1-2 unchanged"
for n in offgrid1 offgrid2; do for cfg in before shipped; do
  $PY benchmarks/targets.py $W/$n-$cfg.json | sed "s|^|$cfg |"; done; done
echo; echo "## mixed_residual_std (the shipped settings otherwise): held-out mixed cells and the H200's mixed seeds"
for std in 0 0.25 0.5; do
  echo "{\"mixed_residual_std\": $std}" > $W/std.json
  for s in 0 1 2; do
    $T evaluate --db heuristics.db --device "NVIDIA H200" --seed $s --predictor-config $W/std.json --json > $W/hold$s-std.json &
  done
  for n in mixed1 mixed2 mixed3 mixed4; do
    $T evaluate --db heuristics.db --device "NVIDIA H200" --offgrid $W/$n.db --predictor-config $W/std.json \
      --json > $W/$n-std.json &
  done
  wait
  for s in 0 1 2; do $PY $D/summarize.py holdout "seed $s, std $std" $W/hold$s-std.json; done
  for n in mixed1 mixed2 mixed3 mixed4; do $PY $D/summarize.py set "$n, std $std" $W/$n-std.json; done
done
echo; echo "## tests/gpu/vllm_forward.py's one-long step (31 x 500 + 16000, 40/8), what the plugin's per-step dispatcher picks"
$PY - $D/before.json <<'PY'
import sys
from dispatcher.dispatch import load
from dispatcher.integrations.vllm.answers import STEP_KNOBS, vllm_registry
from dispatcher.predictor_config import PredictorConfig
from dispatcher.problem import AttentionProblem
for name, cfg in (("before", PredictorConfig.from_file(sys.argv[1])), ("shipped", None)):
    d = load("heuristics.db", "NVIDIA H200", registry=vllm_registry(STEP_KNOBS), predictor=cfg)
    for kv, out in (("fp8", "fp8"), ("fp8", "bf16"), ("bf16", "bf16")):
        p = AttentionProblem.from_seq_lens(seq_lens=[500] * 31 + [16000], phase="decode", num_qo_heads=40,
                                           num_kv_heads=8, head_dim=128, page_size=16, kv_dtype=kv, out_dtype=out)
        split = min(t.median_us for t in d.model.predict(p) if "fixed_split_size=1024" in t.pipeline.id)
        print(f"{name:8s} kv={kv} out={out}: {d.choose(p).pipeline} (the fixed split predicted at {split:.0f} us)")
PY
