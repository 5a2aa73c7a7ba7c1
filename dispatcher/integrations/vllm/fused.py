"""Fused FP8 output: FlashInferImpl.fused_output_quant_supported(quant_key), which vLLM's attention+quant
fusion pass asks once per layer.

vLLM's answer stands on every GPU. On the SM100 family trtllm-gen writes FP8/FP4 itself (vLLM's True).
On SM90, XQA could write FP8 itself (FlashInfer 0.7.2: trtllm_batch_decode_with_kv_cache(backend="xqa",
out_dtype=float8_e4m3fn, o_scale=s, bmm2_scale=v_scale/s)), measured ~1.07x faster than XQA and a
separate quant; but vLLM 0.33's forward asserts trtllm-gen decode and TRT-LLM prefill whenever
output_scale is set, so True there needs a patched FlashInferImpl.forward, which this plugin does not
have yet: the answer stays False and reasons() says why.
"""
from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from .answers import current

SM90_WHY = ("False: XQA could write FP8 itself (FlashInfer 0.7.2), but vLLM 0.33's forward asserts trtllm-gen "
            "when output_scale is set, and Switchyard does not patch forward yet")


def wrap_fused_output_quant_supported(original: Callable[..., bool], static_fp8_key: Any) -> Callable[..., bool]:
    """`static_fp8_key`: vLLM's kFp8StaticTensorSym, the key of static per-tensor FP8 output."""
    @functools.wraps(original)
    def fused_output_quant_supported(self: Any, quant_key: Any) -> bool:
        vllms = original(self, quant_key)
        from vllm.platforms import current_platform
        xqa_could = (not vllms and quant_key == static_fp8_key and self.supports_xqa_or_trtllm_gen_decode
                     and self.kv_cache_dtype.startswith("fp8") and current_platform.is_device_capability(90))
        why = SM90_WHY if xqa_could else f"vLLM's answer ({vllms})"
        geometry = f"{self.num_heads}/{self.num_kv_heads}x{self.head_size} {self.kv_cache_dtype}"
        current().note(f"fused output {quant_key} {geometry}", why)
        return bool(vllms)
    return fused_output_quant_supported
