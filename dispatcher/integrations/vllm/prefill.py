"""Prefill: vllm.utils.flashinfer.use_trtllm_attention, vLLM 0.33's per-step choice between TRT-LLM
prefill and FlashInfer's native prefill (its only caller is FlashInferMetadataBuilder.build).

vLLM's own function answers first and its answer stands wherever its rules are final: forced on or off,
DCP, a GPU without TRT-LLM prefill (vLLM 0.33 has it on the SM100 family only: never on SM90), heads
not divisible, an FP8 query, sinks, a quantized KV cache, and every decode call. Only in its automatic
case (BF16/FP16 query and KV) does the database answer, and only with a kernel vLLM has there:
trtllm-gen (True) or FlashInfer's native prefill, FA2 on the SM100 family (False).
"""
from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from ...cells import q_cell, size_cell
from .answers import active_builder, current, dtype_name

NATIVE_PREFILL = "fa2"          # FlashInfer's "auto" prefill backend on the SM100 family
CACHE_LIMIT = 4096
POINT = "prefill"


def wrap_use_trtllm_attention(original: Callable[..., bool], flashinfer_utils: Any) -> Callable[..., bool]:
    """vLLM's use_trtllm_attention with the same signature, answering from the database where vLLM
    auto-detects; `flashinfer_utils` is vllm.utils.flashinfer (its capability checks are vLLM's own)."""
    answers_by_shape: dict[tuple[Any, ...], bool | None] = {}

    @functools.wraps(original)
    def use_trtllm_attention(num_qo_heads: int, num_kv_heads: int, num_tokens: int, max_seq_len: int,
                             dcp_world_size: int, kv_cache_dtype: str, q_dtype: Any, is_prefill: bool,
                             force_use_trtllm: bool | None = None, has_sinks: bool = False,
                             has_spec: bool = False) -> bool:
        vllms = original(num_qo_heads, num_kv_heads, num_tokens, max_seq_len, dcp_world_size, kv_cache_dtype,
                         q_dtype, is_prefill, force_use_trtllm=force_use_trtllm, has_sinks=has_sinks,
                         has_spec=has_spec)
        if not is_prefill:
            return vllms                       # vLLM 0.33 asks only about prefill; decode is decode.py's
        final = vllms_rule_is_final(flashinfer_utils, num_qo_heads, num_kv_heads, dcp_world_size, kv_cache_dtype,
                                    q_dtype, force_use_trtllm, has_sinks)
        if final:
            current().note(POINT, f"vLLM's answer ({vllms}): {final}")
            return vllms
        builder = active_builder.get()
        key = (num_qo_heads, num_kv_heads, getattr(builder, "head_dim", None), getattr(builder, "page_size", None),
               *q_cell(max(1, num_tokens)), size_cell(max(1, max_seq_len)), str(q_dtype))
        if key not in answers_by_shape:
            if len(answers_by_shape) >= CACHE_LIMIT:
                answers_by_shape.clear()
            answers_by_shape[key] = prefill_answer(builder, num_qo_heads, num_kv_heads, num_tokens, max_seq_len,
                                                   q_dtype, vllms)
        ours = answers_by_shape[key]
        return vllms if ours is None else ours

    return use_trtllm_attention


def vllms_rule_is_final(fi: Any, num_qo_heads: int, num_kv_heads: int, dcp_world_size: int, kv_cache_dtype: str,
                        q_dtype: Any, force: bool | None, has_sinks: bool) -> str | None:
    """Why vLLM's prefill answer is not its auto-detection (so it stands), or None in the automatic case.
    The same tests in the same order as vLLM 0.33's use_trtllm_attention, through its own functions."""
    if force is not None:
        return f"forced {'on' if force else 'off'} (--attention-config.use_trtllm_attention, or pages >= 128)"
    if dcp_world_size > 1:
        return "decode context parallelism (TRT-LLM prefill cannot combine across ranks)"
    if not fi.supports_trtllm_attention(is_prefill=True):
        return "vLLM has no TRT-LLM prefill on this GPU (vLLM 0.33: the SM100 family only)"
    if num_qo_heads % num_kv_heads:
        return "query heads are not a multiple of KV heads"
    if q_dtype == fi.current_platform.fp8_dtype():
        return "an FP8 query (only TRT-LLM prefill takes one)"
    if has_sinks:
        return "attention sinks"
    if kv_cache_dtype != "auto":
        return (f"a {kv_cache_dtype} KV cache with a {q_dtype} query: TRT-LLM prefill would need vLLM's "
                "dequantizing copy, which Switchyard has not measured")
    return None


def prefill_answer(builder: Any, num_qo_heads: int, num_kv_heads: int, num_tokens: int, max_seq_len: int,
                   q_dtype: Any, vllms: bool) -> bool | None:
    """True: TRT-LLM prefill, False: FlashInfer's native prefill, None: vLLM's answer."""
    answers = current()
    if builder is None:
        answers.note(POINT, f"vLLM's answer ({vllms}): asked outside a metadata build (no head_dim, page size)")
        return None
    dtype = dtype_name(q_dtype)
    if dtype is None:
        answers.note(POINT, f"vLLM's answer ({vllms}): Switchyard measures no {q_dtype} prefill")
        return None
    from vllm.platforms import current_platform
    try:
        wrong_device = answers.mismatch(current_platform.get_device_capability())
    except Exception as e:  # noqa: BLE001 (an unreadable database or setting leaves vLLM's answer)
        wrong_device = f"Switchyard could not read its measurements ({e})"
    if wrong_device:
        answers.note(POINT, f"vLLM's answer ({vllms}): {wrong_device}")
        return None
    # vLLM gives the batch's prefill tokens and longest sequence only: seen as one request
    kv_len = max(max_seq_len, num_tokens, 1)
    dec, why = answers.decide({
        "phase": "prefill", "num_qo_heads": num_qo_heads, "num_kv_heads": num_kv_heads,
        "head_dim": builder.head_dim, "page_size": builder.page_size, "window_left": builder.window_left,
        "batch_size": 1, "q_len": max(1, num_tokens), "kv_len": kv_len,
        "q_dtype": dtype, "kv_dtype": dtype, "out_dtype": dtype})
    # both vLLM paths take the model's dtype here: a pick that quantizes the query is not one of them
    answer = None if dec is None or dec.q_quant else {"trtllm-gen": True, NATIVE_PREFILL: False}.get(dec.kernel)
    taken = "vLLM's answer" if answer is None else "Switchyard"
    shown = vllms if answer is None else answer
    answers.note(POINT, f"{taken} ({shown}) for {num_tokens} tokens, longest {max_seq_len}: {why}")
    return answer
