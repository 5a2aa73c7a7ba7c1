"""A drop-in for vLLM's FlashInfer backend: the same questions vLLM asks, answered from measurements.

    from dispatcher.integrations import vllm as switchyard
    switchyard.configure(db="heuristics.db", head_dim=128, page_size=16, out_dtype="fp8")
    switchyard.install()          # replaces vllm.utils.flashinfer.use_trtllm_attention in place

`use_trtllm_attention` keeps vLLM's signature and its semantics for the forced, DCP, speculative-
decoding, FP8-query and sinks cases (vllm/utils/flashinfer.py); only the automatic case changes: it
asks the learned table whether the fastest accurate pipeline for this shape is a TRT-LLM kernel.
vLLM does not pass head_dim, page size or the output dtype, so configure() supplies them.
Answers are cached per argument tuple: after the first call for a shape it is a dict lookup."""
from __future__ import annotations

import importlib
import sys
from dataclasses import dataclass
from typing import Any

from ..decision import Decision
from ..dispatch import Dispatcher, load
from ..problem import AttentionProblem, size_cell

TRTLLM_KERNELS = frozenset({"trtllm-xqa", "trtllm-gen", "trtllm-fmha-v2"})
PATCHED_MODULES = ("vllm.utils.flashinfer", "vllm.v1.attention.backends.flashinfer")
FUNCTIONS = ("use_trtllm_attention",)


@dataclass
class _Config:
    db: str | None = None
    device: str | None = None
    head_dim: int = 128
    page_size: int = 16
    out_dtype: str = "bf16"        # "fp8" when the next GEMM takes FP8 (attention+quant fusion on)
    model_dtype: str = "bf16"


_config = _Config()
_dispatcher: Dispatcher | None = None
_answers: dict[tuple[Any, ...], Decision | None] = {}
_originals: dict[tuple[str, str], object] = {}


def configure(db: str | None = None, device: str | None = None, head_dim: int = 128, page_size: int = 16,
              out_dtype: str = "bf16", model_dtype: str = "bf16", dispatcher: Dispatcher | None = None) -> None:
    """Set what vLLM does not pass; loads the table now (never on the hot path)."""
    global _config, _dispatcher
    _config = _Config(db, device, head_dim, page_size, out_dtype, model_dtype)
    _dispatcher = dispatcher or load(db, device)
    _answers.clear()


def _d() -> Dispatcher:
    if _dispatcher is None:
        configure()
    assert _dispatcher is not None
    return _dispatcher


def _is_fp8(dtype: object) -> bool:
    return "float8" in str(dtype) or str(dtype).lower().startswith("fp8")


def _decision(num_qo_heads: int, num_kv_heads: int, num_tokens: int, max_seq_len: int, kv_cache_dtype: str,
              is_prefill: bool, has_sinks: bool) -> Decision | None:
    key = (num_qo_heads, num_kv_heads, size_cell(max(1, num_tokens)), size_cell(max(1, max_seq_len)),
           kv_cache_dtype, is_prefill, has_sinks)
    if key in _answers:
        return _answers[key]
    c = _config
    kv = "fp8" if _is_fp8(kv_cache_dtype) else c.model_dtype
    tokens, seq = max(1, num_tokens), max(1, max_seq_len)
    try:
        # decode: one new token per request; prefill: vLLM gives only the token count, seen as one request
        p = AttentionProblem(phase="prefill" if is_prefill else "decode", num_qo_heads=num_qo_heads,
                             num_kv_heads=num_kv_heads, head_dim=c.head_dim, page_size=c.page_size,
                             batch_size=1 if is_prefill else tokens, q_len=min(tokens, seq) if is_prefill else 1,
                             kv_len=seq, q_dtype=c.model_dtype, kv_dtype=kv, out_dtype=c.out_dtype,
                             has_sinks=has_sinks)
        dec = _d().choose(p)
    except (ValueError, LookupError):
        dec = None
    _answers[key] = dec
    return dec


def _trtllm_supported(is_prefill: bool) -> bool:
    """vLLM's supports_trtllm_attention: does this device have a TRT-LLM kernel for the phase?"""
    d = _d()
    phase = "prefill" if is_prefill else "decode"
    sm = d.device.sm
    return any(s.family == "trtllm" and phase in s.phases and d.device.kind in s.device_kinds
               and (not s.compute_capabilities or sm in s.compute_capabilities) for s in d.registry.values())


def use_trtllm_attention(num_qo_heads: int, num_kv_heads: int, num_tokens: int, max_seq_len: int,
                         dcp_world_size: int, kv_cache_dtype: str, q_dtype: object, is_prefill: bool,
                         force_use_trtllm: bool | None = None, has_sinks: bool = False,
                         has_spec: bool = False) -> bool:
    """Return True if TRT-LLM attention is used (vLLM's contract)."""
    if force_use_trtllm is not None and not force_use_trtllm:
        return False                                  # forced off
    if dcp_world_size > 1:
        return False                                  # TRT-LLM prefill has no cross-rank LSE combine
    if not _trtllm_supported(is_prefill):
        return False
    if num_qo_heads % num_kv_heads != 0:
        return False
    if has_spec and not is_prefill:
        return True                                   # speculative decoding needs TRT-LLM decode
    if _is_fp8(q_dtype):
        return True                                   # an FP8 query needs TRT-LLM
    if has_sinks:
        return True                                   # the only kernels with sinks
    if force_use_trtllm:
        return True
    dec = _decision(num_qo_heads, num_kv_heads, num_tokens, max_seq_len, kv_cache_dtype, is_prefill, has_sinks)
    return dec is not None and dec.kernel in TRTLLM_KERNELS


def fused_output_quant_supported(num_qo_heads: int, num_kv_heads: int, num_tokens: int, max_seq_len: int,
                                 kv_cache_dtype: str, is_prefill: bool, has_sinks: bool = False) -> bool:
    """Whether to let attention write FP8 itself (vLLM's attn+quant fusion) for this shape."""
    dec = _decision(num_qo_heads, num_kv_heads, num_tokens, max_seq_len, kv_cache_dtype, is_prefill, has_sinks)
    return dec is not None and dec.fused_out_quant


def should_quantize_query(num_qo_heads: int, num_kv_heads: int, num_tokens: int, max_seq_len: int,
                          kv_cache_dtype: str, is_prefill: bool, has_sinks: bool = False) -> bool:
    """Whether the chosen kernel reads an FP8 query (insert the query quant op)."""
    dec = _decision(num_qo_heads, num_kv_heads, num_tokens, max_seq_len, kv_cache_dtype, is_prefill, has_sinks)
    return dec is not None and dec.q_quant


def install() -> list[str]:
    """Replace vLLM's functions in place, in every vLLM module that holds them; returns those modules.
    Raises ImportError with the fix when vLLM is not importable."""
    try:
        importlib.import_module(PATCHED_MODULES[0])
    except ImportError as e:
        raise ImportError(f"vLLM is not importable here ({e}); install vllm, or call "
                          "dispatcher.integrations.vllm.use_trtllm_attention directly") from None
    patched = []
    me = sys.modules[__name__]
    for name in PATCHED_MODULES:
        try:
            mod = importlib.import_module(name)
        except ImportError:
            continue
        for fn in FUNCTIONS:
            if hasattr(mod, fn) and getattr(mod, fn) is not getattr(me, fn):
                _originals.setdefault((name, fn), getattr(mod, fn))
                setattr(mod, fn, getattr(me, fn))
                patched.append(f"{name}.{fn}")
    return patched


def uninstall() -> None:
    for (name, fn), original in _originals.items():
        setattr(sys.modules[name], fn, original)
    _originals.clear()
