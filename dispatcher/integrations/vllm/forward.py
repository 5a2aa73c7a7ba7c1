"""FlashInferImpl.forward for the layers whose FP8 output Switchyard runs on SM90 (fused.py said True).

vLLM's fusion pass then hands attention an FP8 output and its scale, which vLLM 0.33's forward accepts for
trtllm-gen only. For any SM90 layer that gets them (the pass fuses every layer once one said True):
- a batch of decodes only, on XQA, one query token each: vLLM's own forward, its XQA call given
  o_scale and bmm2_scale = v_scale / o_scale, so XQA writes FP8 itself (the tuner's
  trtllm-xqa+fused-out pipeline, timed and checked on the H200);
- anything else (prefill, decode steps on vLLM's native wrapper, speculative decode): vLLM's own forward
  into a buffer of the query's dtype, then the static FP8 quant the unfused graph would have run.
Every other call goes to vLLM's forward unchanged. The host copy of the output scale is taken on the
layer's first call, as vLLM does for trtllm-gen (its warm-up run, outside CUDA graphs).
"""
from __future__ import annotations

import contextvars
import functools
from collections.abc import Callable
from typing import Any

from .fused import xqa_could_write_fp8

HANDLES = "switchyard_runs_fp8_out"     # per FlashInferImpl: whether this wrapper runs its FP8 output

# the output scale XQA writes FP8 with, while a patched forward runs; None: vLLM's call unchanged
xqa_o_scale: contextvars.ContextVar[float | None] = contextvars.ContextVar("switchyard_xqa_o_scale", default=None)


def wrap_xqa(original: Callable[..., Any]) -> Callable[..., Any]:
    """vLLM's flashinfer_xqa_batch_decode_with_kv_cache (FlashInfer's xqa_batch_decode_with_kv_cache), which
    derives kv_scale = bmm2_scale * o_scale and writes out / o_scale in `out`'s dtype."""
    @functools.wraps(original)
    def xqa_batch_decode_with_kv_cache(*args: Any, **kwargs: Any) -> Any:
        o_scale = xqa_o_scale.get()
        if o_scale is not None:
            kwargs["o_scale"] = o_scale
            kwargs["bmm2_scale"] = kwargs.get("bmm2_scale", 1.0) / o_scale
        return original(*args, **kwargs)
    return xqa_batch_decode_with_kv_cache


def wrap_forward(original: Callable[..., Any], backend: Any) -> Callable[..., Any]:
    """`backend`: vllm.v1.attention.backends.flashinfer (its metadata classes)."""
    @functools.wraps(original)
    def forward(self: Any, layer: Any, query: Any, key: Any, value: Any, kv_cache: Any, attn_metadata: Any,
                output: Any, output_scale: Any = None, output_block_scale: Any = None) -> Any:
        if (output_scale is None or attn_metadata is None or not runs_fp8_output(self)
                or not is_fp8(output)):         # the common case first, without a torch lookup per call
            return original(self, layer, query, key, value, kv_cache, attn_metadata, output, output_scale,
                            output_block_scale)
        if layer._o_scale_float is None:
            layer._o_scale_float = output_scale.cpu().item()
        if xqa_decodes_only(attn_metadata, backend):
            token = xqa_o_scale.set(layer._o_scale_float)
            try:
                return original(self, layer, query, key, value, kv_cache, attn_metadata, output)
            finally:
                xqa_o_scale.reset(token)
        import torch
        staged = torch.empty(output.shape, dtype=query.dtype, device=output.device)
        original(self, layer, query, key, value, kv_cache, attn_metadata, staged)
        n = attn_metadata.num_actual_tokens
        output[:n] = quantize_fp8(staged[:n], output_scale)
        return output
    return forward


def runs_fp8_output(impl: Any) -> bool:
    """Whether this layer's FP8 output is Switchyard's to run: where vLLM's forward cannot (SM90, XQA,
    FP8 KV; fused.py), whichever layer the fusion pass asked (it fuses every layer once one says True).
    A graph fused without the plugin cannot reach here; one fused with it is run here, cached or not."""
    handles = getattr(impl, HANDLES, None)
    if handles is None:
        handles = xqa_could_write_fp8(impl)
        setattr(impl, HANDLES, handles)
    return bool(handles)


def is_fp8(t: Any) -> bool:
    import torch
    return bool(t.dtype == torch.float8_e4m3fn)


def xqa_decodes_only(metadata: Any, backend: Any) -> bool:
    decode = metadata.decode
    return (metadata.num_prefill_tokens == 0 and isinstance(decode, backend.FlashInferTrtllmAPIDecode)
            and decode.kernel == backend.FlashInferDecodeKernel.XQA and decode.q_len_per_req == 1
            and decode.q_cu_seq_lens is None)


def quantize_fp8(x: Any, scale: Any) -> Any:
    """vLLM's static per-tensor FP8 quant (x / scale, saturated to e4m3's range), in torch."""
    import torch
    fp8 = torch.finfo(torch.float8_e4m3fn)
    return (x.float() / scale).clamp(fp8.min, fp8.max).to(torch.float8_e4m3fn)
