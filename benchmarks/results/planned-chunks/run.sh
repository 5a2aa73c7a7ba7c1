#!/usr/bin/env bash
# CPU replay of committed H200 and H100 mixed-batch databases (no device), at this tree: the ragged prior with
# planned_chunks 0 (as before) and 1 (shipped), each GPU's mixed sets scored with its own table (H200: the
# shipped heuristics.db; H100: h100-2026-12-06-grid's), which batches changed their choice, and the vLLM
# plugin's BF16 one-long step (31 x 500 + one 16000, 40/8) as the model prices it.
#   bash benchmarks/results/planned-chunks/run.sh > benchmarks/results/planned-chunks/run.txt
set -euo pipefail
cd "$(dirname "$0")/../../.."
R=benchmarks/results; W=$(mktemp -d); trap 'rm -rf "$W"' EXIT
u() { xz -dc $R/$1.db.xz > $W/$2.db; }
for i in 1 2 3; do u h200-2026-12-06/mixed$i h200-m$i; done; u prefill-tiles/mixed4 h200-m4; u h200-2026-12-06/replay h200-replay
u h100-2026-12-05b/mixed5 h100-m5; u h100-mixed6-7/mixed6 h100-m6; u h100-mixed6-7/mixed7 h100-m7
u h100-2026-12-07c-mixed-sweep/mixed8 h100-m8; u h100-2026-12-07c-mixed-sweep/mixed9 h100-m9
u h100-2026-12-07d-mixed-sweep/mixed10 h100-m10; u h100-2026-12-06-grid/h100grid h100-table
cp heuristics.db $W/h200-table.db
echo '{"planned_chunks": 0}' > $W/off.json; echo '{"planned_chunks": 1}' > $W/on.json
SETS="h200-m1 h200-m2 h200-m3 h200-m4 h200-replay h100-m5 h100-m6 h100-m7 h100-m8 h100-m9 h100-m10"
echo "tree $(git describe --always --dirty)"
ev() {  # gpu set config
  local dev="NVIDIA H200"; [ $1 = h100 ] && dev="NVIDIA H100 80GB HBM3"
  .venv/bin/python -m tuner evaluate --db $W/$1-table.db --device "$dev" --offgrid $W/$1-$2.db \
    --predictor-config $W/$3.json --json > $W/e-$1-$2-$3.json
}
for s in $SETS; do
  g=${s%%-*}; n=${s#*-}; ev $g $n off & a=$!; ev $g $n on & b=$!
  wait $a; wait $b     # set -e: a failed evaluation stops the script here
done
echo "## all batches' regret gm (targets.py brief lines) and the BF16-KV batches' gm: off = planned_chunks 0, on = 1"
for s in $SETS; do
  g=${s%%-*}; n=${s#*-}; echo "$s:"
  .venv/bin/python -c "import json, math, sys; sys.path.insert(0, 'benchmarks'); from targets import brief
for f, l in zip(sys.argv[1:], ('off', 'on')):
    r = json.load(open(f)); bf = [v['learned'] for k, v in r['configs'].items() if 'kv=bf16' in k and v['learned']['n']]
    n = sum(v['n'] for v in bf); g = math.exp(sum(v['n'] * math.log(v['regret_geomean']) for v in bf) / n) if n else 1
    print(brief(r, l) + f'  BF16-KV gm {g:.4f}')" $W/e-$g-$n-off.json $W/e-$g-$n-on.json
done
echo "## batches whose choice changed (measured us of each choice, best measured)"
PYTHONPATH=. .venv/bin/python - "$W" $SETS <<'PY'
import sqlite3, sys
from dispatcher import load
from dispatcher.predictor import PredictorConfig
from dispatcher.table import measured_problems
w, sets = sys.argv[1], sys.argv[2:]
for s in sets:
    g = s.split("-")[0]
    dev = "NVIDIA H200" if g == "h200" else "NVIDIA H100 80GB HBM3"
    off = load(f"{w}/{g}-table.db", dev, predictor=PredictorConfig(planned_chunks=0))
    on = load(f"{w}/{g}-table.db", dev, predictor=PredictorConfig(planned_chunks=1))
    con = sqlite3.connect(f"{w}/{s}.db"); con.row_factory = sqlite3.Row
    rows = con.execute("select m.* from measurements m join environments e on e.id = m.env_id "
                       "where e.device_name = ? and m.status = 'ok'", (dev,)).fetchall()
    for p, times in measured_problems(rows).items():
        a, b = off.choose(p).pipeline, on.choose(p).pipeline
        if a != b and p.skew > 1:
            us = {k: t.median_us for k, t in times.items()}
            print(f"{s}: {p.num_qo_heads}/{p.num_kv_heads} {p.kv_dtype}->{p.out_dtype} batch {p.batch_size} mean "
                  f"{p.kv_len} longest {p.max_kv_len}: {a} {us.get(a, float('nan')):.1f} -> {b} "
                  f"{us.get(b, float('nan')):.1f} (best {min(us.values()):.1f})")
PY
echo "## the vLLM plugin's BF16 one-long step on the H200's table: each pipeline's priced time (us)"
PYTHONPATH=. .venv/bin/python - "$W/h200-table.db" <<'PY'
import sys
from dispatcher import AttentionProblem, load
from dispatcher.predictor import PredictorConfig
from dispatcher.registry import planned_chunk
p = AttentionProblem.from_seq_lens(phase="decode", num_qo_heads=40, num_kv_heads=8, seq_lens=[500] * 31 + [16000],
                                   kv_dtype="bf16", out_dtype="bf16")
print(f"FlashInfer's own plan cuts its 16000-token request into chunks of {planned_chunk(p, 2 * 132)} on 132 SMs")
for name, on in (("off", 0), ("on", 1)):
    d = load(sys.argv[1], device="NVIDIA H200", predictor=PredictorConfig(planned_chunks=on))
    ts = sorted(d.model.ragged_prior(p), key=lambda t: t.median_us)[:4]
    print(f"{name}: chose {d.choose(p).pipeline}; " + ", ".join(f"{t.pipeline.id} {t.median_us:.1f}" for t in ts))
PY
