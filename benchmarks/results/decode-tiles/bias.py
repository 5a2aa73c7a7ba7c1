"""Where the model misreads XQA against FA2-TC between the grid's KV lengths: uniform BF16-KV decode at one wave
or less (batch x KV heads <= 132), measured / predicted of XQA over the same of FA2-TC (fixed split 1024), by KV
length, on off-grid seeds the table never measured. Usage (repository root):
    python benchmarks/results/decode-tiles/bias.py DB DEVICE OFFGRID.db...
"""
import math
import sys
from collections import defaultdict

from dispatcher import dispatch
from dispatcher.dispatch import default_timing_mode, read_rows
from dispatcher.table import measured_problems

XQA, TC = "trtllm-xqa[enable_pdl=false]", "fa2-tc[fixed_split_size=1024]"
EDGES = (4096, 2048, 1024, 768, 512, 384, 320, 256, 192, 128, 0)

d = dispatch.load(sys.argv[1], sys.argv[2])
errors = defaultdict(list)
for path in sys.argv[3:]:
    for p, ts in measured_problems(read_rows(path, d.device, default_timing_mode(d.device))).items():
        if p.phase != "decode" or p.skew > 1 or p.kv_dtype != "bf16" or p.batch_size * p.num_kv_heads > 132:
            continue
        suffix = "+out-quant" if p.out_dtype == "fp8" else ""
        pred = {t.pipeline.id: t.median_us for t in d.model.predict(p)}
        x, f = XQA + suffix, TC + suffix
        if {x, f} <= ts.keys() and {x, f} <= pred.keys():
            errors[next(lo for lo in EDGES if p.kv_len > lo)].append(
                math.log(ts[x].median_us / pred[x]) - math.log(ts[f].median_us / pred[f]))
print(f"{sys.argv[2]}: XQA's measured/predicted over FA2-TC's, BF16-KV decode at one wave or less")
for lo in sorted(errors):
    e = errors[lo]
    print(f"  KV > {lo:5d}: {len(e):3d} shapes, gm {math.exp(sum(e) / len(e)):.3f}, "
          f"range {math.exp(min(e)):.3f}-{math.exp(max(e)):.3f}")
