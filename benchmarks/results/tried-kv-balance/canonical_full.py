"""A kernel's default plan past WAVES waves of work with KV dtype KV: measured / prior (the uniform model's
ragged_prior with fp8_unbalanced 0) per mixed batch, for the shipped db's own mixed cells ("grid": the
canonical layout) and the random mixed sets. usage (repository root, sets in /tmp/waves):
    python canonical_full.py grid,mixed1,mixed4 fa2-tc 1.9 fp8"""
import math, sqlite3, statistics, sys
import dispatcher.predictor as P
from dispatcher.dispatch import Dispatcher
from dispatcher.predictor_config import PredictorConfig
from dispatcher.table import measured_problems
from tuner.analysis.evaluate import load_table
full, dev = load_table("heuristics.db", "NVIDIA H200")
prior = Dispatcher(full, dev, predictor=PredictorConfig(fp8_unbalanced=0.0)).model._uniform
def rows(src):
    if src == "grid":
        items = [(c, full.by_cell[c]) for c in full.by_cell if c.skew > 1]
    else:
        con = sqlite3.connect(f"/tmp/waves/{src}.db"); con.row_factory = sqlite3.Row
        items = list(measured_problems(con.execute("select * from measurements where status = 'ok'")).items())
    for p, t in items:
        if p.phase != "decode" or p.skew == 1: continue
        w = p.batch_size * p.num_kv_heads / dev.sm_count
        for x in prior.ragged_prior(p):
            if x.pipeline.id in t and x.pipeline.kernel == sys.argv[2] and not P.fixed_split(x.pipeline):
                yield p, w, t[x.pipeline.id].median_us / x.median_us
for src in sys.argv[1].split(","):
    for p, w, r in sorted(rows(src), key=lambda x: x[1]):
        if w >= float(sys.argv[3]) and p.kv_dtype == sys.argv[4]:
            can = p.balance_range()[1]
            print(f"{src:8s} {p.num_kv_heads} out={p.out_dtype} B={p.batch_size:3d} mean={p.kv_len:5d} skew={p.skew:5.1f} w={w:5.2f} bal={p.balance:.2f} can={can:.2f} r={r:.2f}")
