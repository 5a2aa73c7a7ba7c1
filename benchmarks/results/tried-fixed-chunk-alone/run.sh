#!/usr/bin/env bash
# CPU replay of committed H200 and H100 mixed-batch databases (no device): the ragged prior with and without a
# lower bound on a fixed split-KV plan (its longest chunk run alone: fixed-chunk-alone.patch), each GPU's mixed sets
# scored with its own table (H200: the shipped heuristics.db; H100: h100-2026-12-06-grid's), then the vLLM plugin's
# BF16 one-long step (31 x 500 + one 16000, 40/8) as the model prices it.
#   bash benchmarks/results/tried-fixed-chunk-alone/run.sh > benchmarks/results/tried-fixed-chunk-alone/run.txt
set -euo pipefail
cd "$(dirname "$0")/../../.."
BASE=b3c3a53      # the tree the patch applies to, and its shipped heuristics.db
D=benchmarks/results/tried-fixed-chunk-alone; R=benchmarks/results
W=$(mktemp -d); trap 'git worktree remove --force "$W/tree" 2>/dev/null || true; rm -rf "$W"' EXIT
u() { xz -dc $R/$1.db.xz > $W/$2.db; }
for i in 1 2 3; do u h200-2026-12-06/mixed$i h200-m$i; done; u prefill-tiles/mixed4 h200-m4; u h200-2026-12-06/replay h200-replay
u h100-2026-12-05b/mixed5 h100-m5; u h100-mixed6-7/mixed6 h100-m6; u h100-mixed6-7/mixed7 h100-m7
u h100-2026-12-07c-mixed-sweep/mixed8 h100-m8; u h100-2026-12-07c-mixed-sweep/mixed9 h100-m9
u h100-2026-12-07d-mixed-sweep/mixed10 h100-m10; u h100-2026-12-06-grid/h100grid h100-table
git worktree add -q --detach $W/tree $BASE && git -C $W/tree apply "$PWD/$D/fixed-chunk-alone.patch"
git show $BASE:heuristics.db > $W/h200-table.db; echo '{"fixed_chunk_alone": 1}' > $W/on.json
ev() {  # gpu set off|on
  local dev="NVIDIA H200"; [ $1 = h100 ] && dev="NVIDIA H100 80GB HBM3"
  local a=(); [ $3 = on ] && a=(--predictor-config $W/on.json)
  (cd $W/tree && "$OLDPWD/.venv/bin/python" -m tuner evaluate --db $W/$1-table.db --device "$dev" \
     --offgrid $W/$1-$2.db "${a[@]}" --json > $W/e-$1-$2-$3.json)
}
for s in h200-m1 h200-m2 h200-m3 h200-m4 h200-replay h100-m5 h100-m6 h100-m7 h100-m8 h100-m9 h100-m10; do
  g=${s%%-*}; n=${s#*-}; ev $g $n off & a=$!; ev $g $n on & b=$!
  wait $a; wait $b      # set -e: a failed evaluation stops the script here
done
echo "## all batches' regret gm (targets.py brief lines): off = the predictor as shipped, on = with the bound"
for s in h200-m1 h200-m2 h200-m3 h200-m4 h200-replay h100-m5 h100-m6 h100-m7 h100-m8 h100-m9 h100-m10; do
  g=${s%%-*}; n=${s#*-}; echo "$s:"
  .venv/bin/python -c "import json, sys; sys.path.insert(0, 'benchmarks'); from targets import brief
for f, l in zip(sys.argv[1:], ('off', 'on')): print(brief(json.load(open(f)), l))" $W/e-$g-$n-off.json $W/e-$g-$n-on.json
done
echo "## the vLLM plugin's BF16 one-long step on the H200's table: each pipeline's priced time (us), off and on"
(cd $W/tree && PYTHONPATH=. "$OLDPWD/.venv/bin/python" - "$W/h200-table.db" <<'PY'
import sys
from dispatcher import AttentionProblem, load
from dispatcher.predictor import PredictorConfig
p = AttentionProblem.from_seq_lens(phase="decode", num_qo_heads=40, num_kv_heads=8, seq_lens=[500] * 31 + [16000],
                                   kv_dtype="bf16", out_dtype="bf16")
for name, cfg in (("off", PredictorConfig()), ("on", PredictorConfig(fixed_chunk_alone=1))):
    d = load(sys.argv[1], device="NVIDIA H200", predictor=cfg)
    ts = sorted(d.model.ragged_prior(p), key=lambda t: t.median_us)[:4]
    print(f"{name}: chose {d.choose(p).pipeline}; " + ", ".join(f"{t.pipeline.id} {t.median_us:.1f}" for t in ts))
PY
)
