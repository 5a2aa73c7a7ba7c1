"""Each pipeline's measured time at one mixed batch beside what the shipped table predicts for it: with the
measured mixed batches' corrections (as shipped) and without them (the prior alone, mixed_residual_k 0).
usage: python tail_batch.py MIXED.db BATCH,MEAN_KV[,KV_HEADS] ...   (an H200 mixed set, decompressed)"""
import sys

import tuner.analysis.evaluate as ev
from dispatcher.predictor_config import PredictorConfig

table, dev = ev.load_table("heuristics.db", "NVIDIA H200")
registry = ev.load_registry()
shipped = ev.Dispatcher(table, dev, registry, learned=True)
prior = ev.Dispatcher(table, dev, registry, learned=True, predictor=PredictorConfig(mixed_residual_k=0))
measured = ev.measured_problems(ev.read_rows(sys.argv[1], dev, ev.default_timing_mode(dev)))
for spec in sys.argv[2:]:
    want = tuple(map(int, spec.split(",")))
    for p in sorted(measured, key=lambda p: p.key()):
        if (p.batch_size, p.kv_len, p.num_kv_heads)[:len(want)] != want:
            continue
        print(p.describe(), f"(waves {p.batch_size * p.num_kv_heads / dev.sm_count:.2f})")
        corrected = {t.pipeline.id: t.median_us for t in shipped.model.predict(p)}
        alone = {t.pipeline.id: t.median_us for t in prior.model.predict(p)}
        print(f"    {'pipeline':45s} {'measured':>9s} {'shipped':>9s} {'prior':>9s}   (us)")
        for pid, t in sorted(measured[p].items(), key=lambda kv: kv[1].median_us)[:4]:
            print(f"    {pid:45s} {t.median_us:9.1f} {corrected.get(pid, float('nan')):9.1f} "
                  f"{alone.get(pid, float('nan')):9.1f}")
