"""Fused FP8 output: FlashInferImpl.fused_output_quant_supported(quant_key), which vLLM's attention+quant
fusion pass asks once per layer while it compiles the model.

vLLM's answer stands on every GPU but one case. On SM90 with an FP8 KV cache and static per-tensor FP8
output, vLLM says False ("XQA does not support FP8 output"), but FlashInfer 0.7.2's XQA writes FP8 itself
(o_scale, bmm2_scale = v_scale / o_scale). There the answer is True where the database measured XQA writing
FP8 faster than XQA and a separate quant, summed over the decode batches expected at run time (batch sizes
EXPECTED_BATCHES at SWITCHYARD_DECODE_KV_LEN / _SKEW); forward.py then runs the attention of every
layer handed FP8 output with its scale (the pass fuses all layers once one says True).
"""
from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from ...problem import AttentionProblem
from .answers import Answers, current, dtype_name

EXPECTED_BATCHES = tuple(2 ** i for i in range(9))      # 1..256: vLLM's CUDA-graph sizes span these


def wrap_fused_output_quant_supported(original: Callable[..., bool], static_fp8_key: Any) -> Callable[..., bool]:
    """`static_fp8_key`: vLLM's kFp8StaticTensorSym, the key of static per-tensor FP8 output."""
    @functools.wraps(original)
    def fused_output_quant_supported(self: Any, quant_key: Any) -> bool:
        vllms = bool(original(self, quant_key))
        geometry = f"{self.num_heads}/{self.num_kv_heads}x{self.head_size} {self.kv_cache_dtype}"
        if quant_key != static_fp8_key or vllms or not xqa_could_write_fp8(self):
            current().note(f"fused output {quant_key} {geometry}", f"vLLM's answer ({vllms})")
            return vllms
        answers = current()
        ours, why = layer_answer(answers, self)
        # vLLM's fusion pass stops at the first True and its pattern then matches every attention layer
        # (the layer name is a wildcard): the answer holds for the model, not one layer
        answers.fp8_out_fused = answers.fp8_out_fused or ours
        answers.note(f"fused output {quant_key} {geometry}", why)
        return ours
    return fused_output_quant_supported


def xqa_could_write_fp8(impl: Any) -> bool:
    """SM90, vLLM decodes with XQA here, the KV cache is FP8 (e4m3) and nothing forward.py does not run."""
    from vllm.platforms import current_platform
    return (current_platform.is_device_capability(90) and bool(impl.supports_xqa_or_trtllm_gen_decode)
            and dtype_name(impl.kv_cache_dtype) == "fp8" and impl.sinks is None
            and getattr(impl, "dcp_world_size", 1) == 1)


def layer_answer(answers: Answers, impl: Any) -> tuple[bool, str]:
    """measured_answer for a vLLM layer: its geometry, and the page size and dtype of vLLM's config."""
    from vllm.config import get_current_vllm_config_or_none
    from vllm.platforms import current_platform
    try:
        wrong_device = answers.mismatch(current_platform.get_device_capability())
    except Exception as e:  # noqa: BLE001 (an unreadable database leaves vLLM's answer)
        return False, f"vLLM's answer (False): Switchyard could not read its measurements ({e})"
    if wrong_device:
        return False, f"vLLM's answer (False): {wrong_device}"
    config = get_current_vllm_config_or_none()
    model = getattr(getattr(config, "model_config", None), "dtype", "bfloat16")
    page = getattr(getattr(config, "cache_config", None), "block_size", None) or 16
    return measured_answer(answers, fp8_out_fields(impl.num_heads, impl.num_kv_heads, impl.head_size, page,
                                                   impl.window_left, dtype_name(model) or "bf16"))


def fp8_out_fields(num_qo_heads: int, num_kv_heads: int, head_dim: int, page_size: int, window_left: int,
                   q_dtype: str) -> dict[str, Any]:
    """A layer's FP8-KV, FP8-output decode problem, sizes aside (what measured_answer takes)."""
    return dict(phase="decode", num_qo_heads=num_qo_heads, num_kv_heads=num_kv_heads, head_dim=head_dim,
                page_size=page_size, window_left=window_left, kv_dtype="fp8", q_dtype=q_dtype, out_dtype="fp8")


def measured_answer(answers: Answers, fields: dict[str, Any]) -> tuple[bool, str]:
    """True where XQA's own FP8 output was measured faster in total over the expected decode batches of a
    layer (`fields`: its decode problem, sizes aside)."""
    try:
        fused, separate = expected_times(answers, fields)
    except Exception as e:  # noqa: BLE001 (an unreadable database leaves vLLM's answer)
        return False, f"vLLM's answer (False): Switchyard could not read its measurements ({e})"
    if not fused:
        return False, "vLLM's answer (False): no measurement of XQA's FP8 output for this layer's shapes"
    ratio = sum(separate) / sum(fused)
    mean, longest = answers.settings.expected_decode(max(EXPECTED_BATCHES))
    where = f"decode batches {EXPECTED_BATCHES[0]}-{EXPECTED_BATCHES[-1]} at mean KV {mean}, longest {longest}"
    if lent := answers.dispatcher().lent:      # the family read from another GPU's measurements: say so
        where += lent.note(AttentionProblem(**fields, batch_size=1, kv_len=mean), measured=False)
    if ratio > 1.0:
        return True, (f"True: XQA writing FP8 itself measured {ratio:.3f}x faster than XQA and a separate quant "
                      f"({where}); Switchyard runs this layer's FP8 output (forward.py)")
    return False, f"vLLM's answer (False): XQA's own FP8 output measured {1 / ratio:.3f}x slower ({where})"


def expected_times(answers: Answers, fields: dict[str, Any]) -> tuple[list[float], list[float]]:
    """Predicted XQA times (us) with FP8 written by the kernel and with a separate quant, per expected
    batch where both are known."""
    fused, separate = [], []
    d = answers.dispatcher()
    decided = d.decided                    # once: a refresh mid-loop must not mix two tables
    table, model = decided.table, decided.model
    for batch in EXPECTED_BATCHES:
        mean, longest = answers.settings.expected_decode(batch)
        cell = AttentionProblem(**fields, batch_size=batch, kv_len=mean, max_kv_len=longest).cell()
        xqa = [t for t in (table.own_timings(cell) or model.at(cell)) if t.pipeline.kernel == "trtllm-xqa"
               and t.pipeline.tactic_dict().get("enable_pdl", True) and not t.pipeline.q_quant]   # vLLM's PDL on
        own = [t.median_us for t in xqa if t.pipeline.fused_out_quant]
        quant = [t.median_us for t in xqa if t.pipeline.out_quant]
        if own and quant:
            fused.append(min(own))
            separate.append(min(quant))
    return fused, separate
