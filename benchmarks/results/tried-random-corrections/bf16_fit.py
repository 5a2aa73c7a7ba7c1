"""How far the ragged prior is from measured mixed batches, per wave band and pipeline: gm (and range) of
measured / prior over a set's mixed batches of one KV dtype (XQA without PDL, FA2-TC's two plans).
usage (repository root): python bf16_fit.py TABLE.db DEVICE KV_DTYPE SET.db ..."""
import math
import sqlite3
import statistics
import sys
from collections import defaultdict

from dispatcher.dispatch import load
from dispatcher.problem import AttentionProblem

table_db, device, kv_dtype = sys.argv[1:4]
model = load(table_db, device).model
uniform = model._uniform or model          # the prior reads uniform cells only (predictor.FittedModel)
for set_db in sys.argv[4:]:
    rows = sqlite3.connect(set_db).execute(
        "select num_qo_heads, num_kv_heads, page_size, batch_size, kv_len, max_kv_len, out_dtype, pipeline, "
        "median_us from measurements where status = 'ok' and phase = 'decode' and kv_dtype = ? "
        "and max_kv_len > kv_len", (kv_dtype,)).fetchall()
    batches: dict[tuple, dict[str, float]] = defaultdict(dict)
    for *shape, pid, us in rows:
        batches[tuple(shape)][pid] = us
    logs = defaultdict(list)
    for (qo, kvh, page, b, kv, top, out), measured in batches.items():
        p = AttentionProblem(phase="decode", batch_size=b, q_len=1, kv_len=kv, max_kv_len=top, num_qo_heads=qo,
                             num_kv_heads=kvh, head_dim=128, page_size=page, kv_dtype=kv_dtype, out_dtype=out)
        waves = b * kvh / model.sm_count
        band = "<1" if waves < 1 else "1-1.9" if waves < 1.9 else "1.9-4" if waves < 4 else "4+"
        prior = {t.pipeline.id: t.median_us for t in uniform.ragged_prior(p)}
        for pid, us in measured.items():
            if pid in prior and ("xqa" in pid or "fa2-tc" in pid) and "pdl=true" not in pid:
                logs[(band, pid.replace("+out-quant", ""))].append(math.log(us / prior[pid]))
    print(f"{set_db.rsplit('/', 1)[-1]}: {kv_dtype} KV, measured / prior")
    for (band, pid), v in sorted(logs.items()):
        print(f"  {band:6s} {pid:32s} n {len(v):3d}  gm {math.exp(statistics.fmean(v)):.2f}"
              f"  ({math.exp(min(v)):.2f}-{math.exp(max(v)):.2f})")
