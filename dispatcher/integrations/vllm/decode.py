"""Decode: which kernel FlashInferMetadataBuilder.build() plans, per batch.

vLLM 0.33 fixes the decode kernel once per KV-cache group: __init__ sets use_trtllm_decode_attention
(XQA on SM90 whenever it can), and build() reads that flag once per batch to plan either XQA or its
native decode wrapper. The wrapped build() sets the flag to Switchyard's answer for one build and
restores it. Where a FULL CUDA graph fixes the kernel, the answer is made at capture, per batch size,
from the configured length statistics, and reused for every replay of that size; elsewhere it is made
per step from the batch's own mean and longest decode request, and may also plan the native wrapper
with a fixed split-KV chunk (decode_fixed_split_size, which vLLM sets only for batch invariance).
"""
from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ...balance import balance_cell, mean_of, within
from ...cells import size_cell
from .answers import Answers, active_builder, current, dtype_name, kv_dtype_name

STATE = "switchyard_decode"             # the per-builder DecodeState, set on first build
CAPTURING = "switchyard_capturing"      # True while build_for_cudagraph_capture runs
STEP_CACHE_LIMIT = 4096


@dataclass(frozen=True)
class Choice:
    xqa: bool                   # use_trtllm_decode_attention: XQA, else vLLM's native decode wrapper
    split: int | None = None    # the native wrapper's decode_fixed_split_size (None: vLLM's own setting)


@dataclass
class DecodeState:
    why_not: str | None                     # why Switchyard leaves this group's decode to vLLM; None: it may choose
    point: str = "decode"                   # this group's name in reasons()
    native: str = ""                        # the kernel vLLM's native decode wrapper runs, in Switchyard's names
    fields: dict[str, Any] = field(default_factory=dict)     # the decode problem, sizes aside
    may_split: bool = True                  # vLLM plans FlashInfer's own split (no batch invariance)
    captured: dict[int, Choice | None] = field(default_factory=dict)   # FULL-graph batch size -> answer
    steps: dict[tuple[int, int, int, int], Choice | None] = field(default_factory=dict)


def wrap_build(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def build(self: Any, *args: Any, **kwargs: Any) -> Any:
        metadata = kwargs.get("common_attn_metadata", args[1] if len(args) > 1 else None)
        token = active_builder.set(self)
        try:
            choice = safe_choice(self, metadata)
            vllms = Choice(self.use_trtllm_decode_attention, self.decode_fixed_split_size)
            if choice is not None and choice.split is None:
                choice = Choice(choice.xqa, vllms.split)            # the split stays vLLM's
            if choice is None or choice == vllms:
                return original(self, *args, **kwargs)
            self.use_trtllm_decode_attention, self.decode_fixed_split_size = choice.xqa, choice.split
            try:
                return original(self, *args, **kwargs)
            finally:
                self.use_trtllm_decode_attention, self.decode_fixed_split_size = vllms.xqa, vllms.split
        finally:
            active_builder.reset(token)
    return build


def wrap_capture(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def build_for_cudagraph_capture(self: Any, *args: Any, **kwargs: Any) -> Any:
        setattr(self, CAPTURING, True)
        try:
            return original(self, *args, **kwargs)
        finally:
            setattr(self, CAPTURING, False)
    return build_for_cudagraph_capture


def safe_choice(builder: Any, metadata: Any) -> Choice | None:
    """choose(), but a failure leaves vLLM's kernel for this group from then on (never breaks serving)."""
    try:
        return choose(builder, metadata)
    except Exception as e:  # noqa: BLE001 (any bug here must not stop vLLM)
        setattr(builder, STATE, DecodeState(why_not=f"Switchyard failed ({e!r}); vLLM's choice from now on"))
        current().note(point(builder), f"failed: {e!r}; vLLM's decode kernel from now on")
        return None


def choose(builder: Any, metadata: Any) -> Choice | None:
    """This build's decode: XQA or vLLM's native decode and its split; None: vLLM's own."""
    state = state_of(builder)
    if state.why_not or metadata is None or metadata.causal is not True:
        return None
    split = sys.modules[type(builder).__module__].split_decodes_and_prefills   # build()'s own split
    num_decodes, num_prefills, num_decode_tokens, _ = split(
        metadata, decode_threshold=builder.reorder_batch_threshold, require_uniform=False)
    if num_decodes == 0:
        return None
    # vLLM's own test for "this batch may replay a FULL graph" (build(): use_cudagraph)
    in_graph = (builder.enable_cuda_graph and num_prefills == 0
                and num_decode_tokens <= builder._decode_cudagraph_max_bs)
    if in_graph and getattr(builder, CAPTURING, False):
        if num_decode_tokens not in state.captured:
            state.captured[num_decode_tokens] = captured_answer(state, num_decode_tokens)
        return state.captured[num_decode_tokens]
    if in_graph:      # a replay: the kernel captured for this size (vLLM's own where it was not ours)
        return state.captured.get(num_decode_tokens)
    return step_answer(state, metadata, num_decodes)


def captured_answer(state: DecodeState, batch_size: int) -> Choice | None:
    answers = current()
    mean, longest = answers.settings.expected_decode(batch_size)
    answer, why = decide(answers, state, batch_size, mean, longest)
    answers.note(f"{state.point} graph bs={batch_size}", f"{why} (at capture, for mean {mean}, longest {longest})")
    return answer


def step_answer(state: DecodeState, metadata: Any, num_decodes: int) -> Choice | None:
    """From the decode requests' own lengths (the CPU copy vLLM keeps; no GPU sync)."""
    lens = metadata.seq_lens_cpu_upper_bound
    if lens is None:
        return None
    live = lens[:num_decodes].numpy()
    live = live[live > 0]                      # rows padded for a CUDA graph have length 0
    if not live.size:
        return None
    total = live.sum()
    batch, exact_mean, longest = int(live.size), total / live.size, int(live.max())
    mean = mean_of(int(total), batch, longest)            # as from_seq_lens keys the same lengths
    # how the tokens spread (dispatcher/balance.py): FA2's balanced plan costs up to 2x more with many short requests
    balance = float(live.clip(max=exact_mean).sum() / total)
    key = (batch, size_cell(mean), size_cell(longest), balance_cell(balance))
    if key not in state.steps:
        if len(state.steps) >= STEP_CACHE_LIMIT:
            state.steps.clear()
        answers = current()
        split = state.may_split and answers.settings.fixed_split
        state.steps[key], why = decide(answers, state, batch, mean, longest, per_step=split, balance=balance)
        answers.note(f"{state.point} step", f"bs={batch} mean={mean} longest={longest} balance={balance:.2f}: {why}")
    return state.steps[key]


def decide(answers: Answers, state: DecodeState, batch: int, mean: int, longest: int,
           per_step: bool = False, balance: float = 0.0) -> tuple[Choice | None, str]:
    """`per_step`: the native wrapper is planned for this step alone (no FULL graph), so a fixed split
    is one more choice. `balance`: the step's kv_balance (0: one long request, the others alike)."""
    longest = max(mean, min(longest, batch * mean - (batch - 1)))      # what a batch of this size allows
    dec, why = answers.decide({**state.fields, "batch_size": batch, "kv_len": mean, "max_kv_len": longest,
                               "kv_balance": within(balance, batch, mean, longest) if balance else 0.0},
                              per_step=per_step)
    if dec is None:
        return None, f"vLLM's XQA: {why}"
    if dec.kernel == "trtllm-xqa":
        return Choice(True), f"XQA: {why}"
    if dec.kernel == state.native and not dec.q_quant:
        split = (int(dict(dec.tactic).get("fixed_split_size", 0)) or None) if per_step else None
        return Choice(False, split), f"vLLM's native decode ({state.native}): {why}"
    return None, f"vLLM's XQA: the fastest, {why}, is not a path vLLM has here"


def point(builder: Any) -> str:
    names = getattr(builder, "layer_names", None) or ["?"]
    return f"decode group {names[0]}"


def state_of(builder: Any) -> DecodeState:
    state = getattr(builder, STATE, None)
    if state is None:
        state = eligibility(builder, current())
        state.point = point(builder)
        setattr(builder, STATE, state)
        current().note(state.point, state.why_not or f"XQA or vLLM's native decode ({state.native}), "
                                                     "per batch, from the database")
    return state


def eligibility(builder: Any, answers: Answers) -> DecodeState:
    """Whether vLLM chose XQA here and its native decode could run instead, with the same inputs."""
    kernel = builder.flashinfer_trtllm_api_decode_kernel
    if not builder.use_trtllm_decode_attention or kernel is None:
        return DecodeState("vLLM decodes natively here (no XQA for this group); nothing to choose")
    if kernel.value != "xqa":
        return DecodeState(f"vLLM chose {kernel.value}; its FP8 query, fused output and large pages have no "
                           "native equivalent: kept")
    blockers = {"speculative decoding (XQA verifies the drafts)": builder.reorder_batch_threshold != 1,
                "attention sinks": builder.has_sinks, "an NVFP4 KV cache": builder.is_kvcache_nvfp4,
                "decode context parallelism": builder.use_dcp,
                "layers with different window, soft cap or scale (vLLM's native path refuses them)":
                    not builder.global_hyperparameters.has_same_all_params}
    blocked = [why for why, yes in blockers.items() if yes]
    if blocked:
        return DecodeState(f"kept vLLM's XQA: {', '.join(blocked)}")
    model = builder.model_config.dtype
    # where Switchyard runs the group's FP8 output (fused.py), XQA writing FP8 meets native decode + a quant
    out = "fp8" if writes_fp8(builder) else dtype_name(model)
    dtypes = {"q_dtype": dtype_name(builder.q_data_type_decode), "out_dtype": out,
              "kv_dtype": kv_dtype_name(builder.cache_dtype, model)}
    if None in dtypes.values():
        return DecodeState(f"kept vLLM's XQA: Switchyard measures no such dtypes ({builder.cache_dtype}, {model})")
    from vllm.platforms import current_platform
    try:
        wrong_device = answers.mismatch(current_platform.get_device_capability())
    except Exception as e:  # noqa: BLE001 (an unreadable database leaves vLLM's choice)
        wrong_device = f"the database could not be loaded ({e})"
    if wrong_device:
        return DecodeState(f"kept vLLM's XQA: {wrong_device}")
    # vLLM's native decode is the wrapper our fa2-tc runner times: BatchDecodeWithPagedKVCacheWrapper with
    # tensor cores and FlashInfer's "auto" backend (which may run FA3 kernels inside it on SM90)
    native = "fa2-tc"
    return DecodeState(None, native=native, may_split=builder.decode_fixed_split_size == -1
                       and not builder.disable_split_kv, fields={
        "phase": "decode", "num_qo_heads": builder.num_qo_heads, "num_kv_heads": builder.num_kv_heads,
        "head_dim": builder.head_dim, "page_size": builder.page_size, "window_left": builder.window_left,
        **dtypes})


def writes_fp8(builder: Any) -> bool:
    """Whether Switchyard fused the FP8 output (fused.py, at compile time: then every FP8-KV layer's), so
    that this FP8-KV group's XQA writes FP8 and its native decode is followed by the quant."""
    return current().fp8_out_fused and kv_dtype_name(builder.cache_dtype, builder.model_config.dtype) == "fp8"
