#!/usr/bin/env bash
# Variants tried before the landed rule (run.sh), on the tree before it (planned-chunks.patch on BASE): the chunk
# count estimated from the mean and longest alone (registry._plan_counts without lengths), p1 = FA2-TC's own plan
# priced at its piece with any KV dtype, p3 = 16-bit KV only, the fixed split a wave of its chunks in the whole
# band. CPU replay of the committed mixed sets, each GPU's with its own table, then the vLLM BF16 one-long step.
#   bash benchmarks/results/planned-chunks/variants.sh > benchmarks/results/planned-chunks/variants.txt
set -euo pipefail
cd "$(dirname "$0")/../../.."
BASE=094c553      # the tree the patch applies to, and its shipped heuristics.db
D=benchmarks/results/planned-chunks; R=benchmarks/results
W=$(mktemp -d); trap 'git worktree remove --force "$W/tree" 2>/dev/null || true; rm -rf "$W"' EXIT
u() { xz -dc $R/$1.db.xz > $W/$2.db; }
for i in 1 2 3; do u h200-2026-12-06/mixed$i h200-m$i; done; u prefill-tiles/mixed4 h200-m4; u h200-2026-12-06/replay h200-replay
u h100-2026-12-05b/mixed5 h100-m5; u h100-mixed6-7/mixed6 h100-m6; u h100-mixed6-7/mixed7 h100-m7
u h100-2026-12-07c-mixed-sweep/mixed8 h100-m8; u h100-2026-12-07c-mixed-sweep/mixed9 h100-m9
u h100-2026-12-07d-mixed-sweep/mixed10 h100-m10; u h100-2026-12-06-grid/h100grid h100-table
git worktree add -q --detach $W/tree $BASE && git -C $W/tree apply "$PWD/$D/planned-chunks.patch"
git show $BASE:heuristics.db > $W/h200-table.db
echo '{}' > $W/off.json; echo '{"planned_chunks": 1}' > $W/p1.json; echo '{"planned_chunks": 3}' > $W/p3.json
SETS="h200-m1 h200-m2 h200-m3 h200-m4 h200-replay h100-m5 h100-m6 h100-m7 h100-m8 h100-m9 h100-m10"
ev() {  # gpu set config
  local dev="NVIDIA H200"; [ $1 = h100 ] && dev="NVIDIA H100 80GB HBM3"
  (cd $W/tree && "$OLDPWD/.venv/bin/python" -m tuner evaluate --db $W/$1-table.db --device "$dev" \
     --offgrid $W/$1-$2.db --predictor-config $W/$3.json --json > $W/e-$1-$2-$3.json)
}
for s in $SETS; do
  g=${s%%-*}; n=${s#*-}; ev $g $n off & a=$!; ev $g $n p1 & b=$!; ev $g $n p3 & c=$!
  wait $a; wait $b; wait $c     # set -e: a failed evaluation stops the script here
done
echo "## all batches' regret gm (targets.py brief lines) and the BF16-KV batches' gm: off = as shipped,"
echo "## p1 = planned chunks for FA2-TC's own plan from unsplit_waves, p3 = 16-bit KV only, the fixed split too"
for s in $SETS; do
  g=${s%%-*}; n=${s#*-}; echo "$s:"
  .venv/bin/python -c "import json, math, sys; sys.path.insert(0, 'benchmarks'); from targets import brief
for f, l in zip(sys.argv[1:], ('off', 'p1', 'p3')):
    r = json.load(open(f)); bf = [v['learned'] for k, v in r['configs'].items() if 'kv=bf16' in k and v['learned']['n']]
    n = sum(v['n'] for v in bf); g = math.exp(sum(v['n'] * math.log(v['regret_geomean']) for v in bf) / n) if n else 1
    print(brief(r, l) + f'  BF16-KV gm {g:.4f}')" $W/e-$g-$n-off.json $W/e-$g-$n-p1.json $W/e-$g-$n-p3.json
done
echo "## the vLLM plugin's BF16 one-long step on the H200's table: each pipeline's priced time (us)"
(cd $W/tree && PYTHONPATH=. "$OLDPWD/.venv/bin/python" - "$W/h200-table.db" <<'PY'
import sys
from dispatcher import AttentionProblem, load
from dispatcher.predictor import PredictorConfig
from dispatcher.registry import planned_chunk
p = AttentionProblem.from_seq_lens(phase="decode", num_qo_heads=40, num_kv_heads=8, seq_lens=[500] * 31 + [16000],
                                   kv_dtype="bf16", out_dtype="bf16")
print(f"FlashInfer's own plan cuts the 16000-token request into {16000 // planned_chunk(p, 2 * 132)} chunks on 132 SMs")
for name, cfg in (("off", PredictorConfig()), ("p1", PredictorConfig(planned_chunks=1)),
                  ("p3", PredictorConfig(planned_chunks=3))):
    d = load(sys.argv[1], device="NVIDIA H200", predictor=cfg)
    ts = sorted(d.model.ragged_prior(p), key=lambda t: t.median_us)[:4]
    print(f"{name}: chose {d.choose(p).pipeline}; " + ", ".join(f"{t.pipeline.id} {t.median_us:.1f}" for t in ts))
PY
)
