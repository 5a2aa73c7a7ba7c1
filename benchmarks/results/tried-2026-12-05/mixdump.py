"""Per mixed batch and pipeline: measured time and the uniform-batch terms the prior reads."""
import sys, json
from dispatcher.dispatch import default_timing_mode, read_rows
from dispatcher.table import measured_problems
from dispatcher.predictor import Predictor
from dispatcher.predictor import fixed_split
from dispatcher.policy import max_relerr
from tuner.analysis.evaluate import load_table
full, dev = load_table("heuristics.db", "NVIDIA H200")
m = Predictor().fit(full, dev)
out = []
for f in sys.argv[1:]:
    held = measured_problems(read_rows(f, dev, default_timing_mode(dev)))
    for b in held:
        if b.skew <= 1: continue
        def at(**kw):
            return {t.pipeline.id: t.median_us for t in m.at(b.with_sizes(**kw))}
        sms = 132; wave = min(b.batch_size, sms // b.num_kv_heads)
        mean = {t.pipeline.id: t.median_us for t in m.at(b.with_sizes(max_kv_len=b.kv_len), False)}
        ow = at(batch_size=wave, kv_len=b.max_kv_len, max_kv_len=b.max_kv_len)
        alone = at(batch_size=1, kv_len=b.max_kv_len)
        top = at(kv_len=b.max_kv_len, max_kv_len=b.max_kv_len)
        pred = {t.pipeline.id: t.median_us for t in m.predict(b)}
        for pid, t in held[b].items():
            if pid not in mean: continue
            kind = "fixed" if fixed_split(t.pipeline) else m.ragged.get(t.pipeline.kernel, "total")
            out.append(dict(set=f.split('/')[-1], cfg=f"{b.num_kv_heads}/{b.kv_dtype}/{b.out_dtype}", b=b.batch_size, kvh=b.num_kv_heads,
                            mean=b.kv_len, mx=b.max_kv_len, waves=b.batch_size*b.num_kv_heads/sms, skew=b.skew,
                            
                            pid=pid, kind=kind, meas=t.median_us, ok=t.relerr is None or t.relerr <= max_relerr(b.kv_dtype, b.out_dtype), key=str(b.key()),
                            m=mean[pid], w=ow.get(pid), a=alone.get(pid), top=top.get(pid), pred=pred.get(pid)))
json.dump(out, open("mixdump.json", "w"))
print(len(out))
