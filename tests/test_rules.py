from dispatcher import load_registry
from dispatcher.device import B200, H200
from dispatcher.pipeline import candidates
from dispatcher.rules import rule_pick
from tests.conftest import small

SCOUT = dict(num_qo_heads=40, num_kv_heads=8, head_dim=128)
REG = load_registry()


def pick(rule, p, dev):
    got, notes = rule_pick(rule, p, dev, REG, candidates(REG, p, dev))
    return got.id


def test_vllm_2026_on_h200():
    assert (pick("vllm-2026", small(**SCOUT, kv_dtype="fp8", out_dtype="fp8"), H200)
            == "trtllm-xqa[enable_pdl=true]+out-quant")
    assert pick("vllm-2026", small(**SCOUT), H200) == "fa2-tc[fixed_split_size=0]"
    assert pick("vllm-2026", small(**SCOUT, phase="prefill", q_len=64, kv_len=128, kv_dtype="fp8"),
                H200) == "fa3+q-quant"


def test_vllm_2025_never_uses_trtllm_for_fp8_kv():
    assert pick("vllm-2025", small(**SCOUT, kv_dtype="fp8", out_dtype="fp8"), H200).startswith("fa2-tc")
    assert pick("vllm-2025", small(**SCOUT, kv_dtype="fp8"), B200).startswith("fa2-tc")
    assert pick("vllm-2025", small(**SCOUT, batch_size=128), B200).startswith("trtllm-gen")
    assert pick("vllm-2025", small(**SCOUT, batch_size=512), B200).startswith("fa2-tc")   # > 256 tokens


def test_fused_fp8_out_only_on_sm100():
    assert pick("vllm-2026", small(**SCOUT, kv_dtype="fp8", out_dtype="fp8"), B200) == "trtllm-gen+q-quant+fused-out"


def test_vllm_0_33_runs_xqa_for_every_sm90_decode_and_never_writes_fp8_there():
    # vLLM 0.33 fixes XQA at start-up for BF16 and FP8 KV alike, and quantizes XQA's output separately
    assert pick("vllm-0.33", small(**SCOUT), H200) == "trtllm-xqa[enable_pdl=true]"
    assert (pick("vllm-0.33", small(**SCOUT, kv_dtype="fp8", out_dtype="fp8"), H200)
            == "trtllm-xqa[enable_pdl=true]+out-quant")
    # prefill: FlashInfer's native FA3 on SM90, with an FP8 query for an FP8 cache
    prefill = dict(phase="prefill", q_len=64, kv_len=128)
    assert pick("vllm-0.33", small(**SCOUT, **prefill, kv_dtype="fp8"), H200) == "fa3+q-quant"
    assert pick("vllm-0.33", small(**SCOUT, **prefill), H200) == "fa3"
    # SM100: trtllm-gen for both phases, writing FP8 itself only with a quantized cache
    assert pick("vllm-0.33", small(**SCOUT, kv_dtype="fp8", out_dtype="fp8"), B200) == "trtllm-gen+q-quant+fused-out"
    assert pick("vllm-0.33", small(**SCOUT, out_dtype="fp8"), B200) == "trtllm-gen+out-quant"
