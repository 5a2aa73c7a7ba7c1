"""One spread batch (99 x 2048, longest 8192, FP8 KV, 10/2 heads, 1.5 waves) as the shipped db predicts it,
with a proto.py mode applied. usage (repository root):
    PYTHONPATH=.:benchmarks/results/tried-kv-balance python benchmarks/results/tried-kv-balance/one_batch.py [MODE]"""
import sys

import proto
from dispatcher import AttentionProblem
from dispatcher.dispatch import Dispatcher
from tuner.analysis.evaluate import load_table
from tuner.lengths import lengths

mode = sys.argv[1] if len(sys.argv) > 1 else "off"
{"off": lambda: None, "kind-regime": proto.kind_regime, "regime": proto.regime}[mode]()
full, dev = load_table("heuristics.db", "NVIDIA H200")
d = Dispatcher(full, dev, learned=True)
TP4 = dict(phase="decode", num_qo_heads=10, num_kv_heads=2, head_dim=128, page_size=16, kv_dtype="fp8")
spread = AttentionProblem.from_seq_lens(seq_lens=lengths(AttentionProblem(**TP4, batch_size=99, kv_len=2048,
                                                                          max_kv_len=8192), "spread"), **TP4)
pred = {t.pipeline.id: round(t.median_us, 1) for t in d.model.predict(spread) if t.pipeline.kernel in ("fa2-tc", "trtllm-xqa")}
print(f"{mode}: chose {d.choose(spread).pipeline}; predicted {pred}")
