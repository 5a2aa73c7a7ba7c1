"""XQA's and FA2-TC's measured / predicted times apart, uniform decode by waves of work (batch x KV heads / 132 SMs)
and KV length, on off-grid seeds the table never measured. Usage (repository root):
    python benchmarks/results/decode-tiles/bias_band.py DB DEVICE OFFGRID.db...
"""
import math
import sys
from collections import defaultdict

from dispatcher import dispatch
from dispatcher.dispatch import default_timing_mode, read_rows
from dispatcher.table import measured_problems

KERNELS = {"XQA": "trtllm-xqa[enable_pdl=false]", "FA2-TC": "fa2-tc[fixed_split_size=1024]"}
BANDS = ((0.0, 1.0, "<= 1 wave"), (1.0, 2.0, "1-2 waves"))
KV = ((1024, "KV <= 1024"), (8192, "KV 1025-8192"), (math.inf, "KV > 8192"))

d = dispatch.load(sys.argv[1], sys.argv[2])
errors = defaultdict(list)
for path in sys.argv[3:]:
    for p, ts in measured_problems(read_rows(path, d.device, default_timing_mode(d.device))).items():
        waves = p.batch_size * p.num_kv_heads / 132
        band = next((name for lo, hi, name in BANDS if lo < waves <= hi), None)
        if p.phase != "decode" or p.skew > 1 or band is None:
            continue
        suffix = "+out-quant" if p.out_dtype == "fp8" else ""
        pred = {t.pipeline.id: t.median_us for t in d.model.predict(p)}
        kv = next(name for top, name in KV if p.kv_len <= top)
        for label, pid in KERNELS.items():
            if pid + suffix in ts and pid + suffix in pred:
                errors[(p.kv_dtype, band, kv, label)].append(math.log(ts[pid + suffix].median_us / pred[pid + suffix]))
print(f"{sys.argv[2]}: measured / predicted, gm (shapes)")
for kv_dtype in ("bf16", "fp8"):
    for _, _, band in BANDS:
        for _, kv in KV:
            cells = [f"{label} {math.exp(sum(e) / len(e)):.3f} ({len(e)})" for label in KERNELS
                     if (e := errors.get((kv_dtype, band, kv, label)))]
            if cells:
                print(f"  {kv_dtype} KV, {band}, {kv:12s}: " + ", ".join(cells))
