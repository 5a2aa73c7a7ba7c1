"""The vLLM plugin (dispatcher/integrations/vllm) against vLLM 0.33.0's own code.

The `check_*` functions run in one subprocess (tests/vllm_wheel.py) that imports vLLM's real
vllm/utils/flashinfer.py and v1/attention/backends/flashinfer.py from the PyPI wheel, with stubs only for
what is not installed here: third-party packages (flashinfer's wrappers record how vLLM plans them), the
CUDA platform (a settable compute capability), the vLLM config, NVIDIA's cubin server and one Triton
kernel. The functions under test (use_trtllm_attention, can_use_trtllm_attention,
supports_trtllm_attention, FlashInferMetadataBuilder.__init__/build/build_for_cudagraph_capture,
FlashInferImpl.fused_output_quant_supported) are vLLM's own. `test_against_vllm_0_33[check_x]` reports
each check. Skipped, saying why, where vLLM's wheel cannot be downloaded.
"""
from __future__ import annotations

import contextlib
import fcntl
import json
import os
import subprocess
import sys
import tomllib
import types
from pathlib import Path
from unittest.mock import patch

import pytest

from dispatcher.device import B200, H200
from dispatcher.dispatch import Dispatcher
from dispatcher.integrations import vllm as plugin
from dispatcher.integrations.vllm.answers import active_builder
from dispatcher.pipeline import Pipeline
from dispatcher.problem import AttentionProblem
from dispatcher.table import Table, Timing
from tests import vllm_wheel
from tests.conftest import ROOT, SHIPPED

# -- the checks: run inside the subprocess, `v` holds vLLM's modules -------------------------------------
SCOUT = dict(num_qo_heads=40, num_kv_heads=8)          # Llama-4-Scout per GPU, as the shipped database has
MODELS = {"Llama-3-70B": (64, 8), "Llama-3-8B": (32, 8), "Qwen2.5-0.5B": (14, 2), "Gemma-2-9B": (8, 4),
          "Falcon-40B": (128, 8)}                      # vLLM's own test models


def vllm_call(v, **overrides):
    """vLLM's own test default (tests/kernels/attention/test_use_trtllm_attention.py): Llama-3-70B decode."""
    import torch
    args = dict(num_qo_heads=64, num_kv_heads=8, num_tokens=128, max_seq_len=4096, dcp_world_size=1,
                kv_cache_dtype="auto", q_dtype=torch.bfloat16, is_prefill=False, force_use_trtllm=None,
                has_sinks=False, has_spec=False)
    return v.fi.use_trtllm_attention(**{**args, **overrides})


def b200_prefers_native_prefill(native_us: float = 50.0) -> Dispatcher:
    """A B200 table where FlashInfer's native prefill (FA2) beats trtllm-gen (80 us) for Llama-3-70B/Scout
    shapes, unless `native_us` says otherwise."""
    t = Table()
    for heads in ((64, 8), (40, 8)):
        for q, kv in ((1024, 1024), (128, 4096)):
            p = AttentionProblem(phase="prefill", num_qo_heads=heads[0], num_kv_heads=heads[1], batch_size=1,
                                 q_len=q, kv_len=kv).cell()
            t.add(p, Timing(Pipeline("trtllm-gen", "bf16", "bf16", "bf16"), 80.0, 0.5, 0.002))
            t.add(p, Timing(Pipeline("fa2", "bf16", "bf16", "bf16", tactic=(("fixed_split_size", 0),)), native_us,
                            0.5, 0.002))
    return Dispatcher(t, B200, plugin.vllm_registry())


@contextlib.contextmanager
def inside_a_build(head_dim=128, page_size=16):
    """As when FlashInferMetadataBuilder.build calls use_trtllm_attention (the plugin needs its geometry)."""
    token = active_builder.set(types.SimpleNamespace(head_dim=head_dim, page_size=page_size, window_left=-1))
    try:
        yield
    finally:
        active_builder.reset(token)


def vllm_facts(v, sm, plugin_on):
    """vLLM's own unit cases for its three functions, as facts about 0.33.0 on this GPU; with the plugin
    on, the one automatic prefill case follows the measurements instead (FA2 faster on the B200)."""
    import torch
    trtllm_decode, trtllm_prefill = sm in (90, 100), sm == 100
    facts = [
        (v.fi.supports_trtllm_attention(), trtllm_decode),
        (v.fi.supports_trtllm_attention(is_prefill=True), trtllm_prefill),
        (v.fi.can_use_trtllm_attention(64, 8), trtllm_decode),
        (v.fi.can_use_trtllm_attention(64, 8, is_prefill=True), trtllm_prefill),
        (v.fi.can_use_trtllm_attention(40, 6), False),
        (vllm_call(v, force_use_trtllm=False), False),
        (vllm_call(v, dcp_world_size=2), False),
        (vllm_call(v, num_qo_heads=40, num_kv_heads=6), False),
        (vllm_call(v, num_qo_heads=40, num_kv_heads=6, force_use_trtllm=True), False),
        (vllm_call(v, has_spec=True), trtllm_decode),
        (vllm_call(v, q_dtype=torch.float8_e4m3fn), trtllm_decode),
        (vllm_call(v, has_sinks=True), trtllm_decode),
        (vllm_call(v, is_prefill=True, kv_cache_dtype="fp8"), False),
        (vllm_call(v, is_prefill=True, kv_cache_dtype="fp8", q_dtype=torch.float8_e4m3fn), trtllm_prefill),
        (vllm_call(v, force_use_trtllm=True), trtllm_decode),
        (vllm_call(v, is_prefill=True, force_use_trtllm=True), trtllm_prefill),
        (vllm_call(v, is_prefill=True, dcp_world_size=2), False),
        (vllm_call(v, is_prefill=True), trtllm_prefill and not plugin_on),   # vLLM's auto-detection
        (vllm_call(v), trtllm_decode),                                      # decode, 128 tokens, "auto"
        (vllm_call(v, num_tokens=512), False),                              # decode over 256 tokens
        (vllm_call(v, kv_cache_dtype="fp8"), sm == 90),                     # SM90 prefers XQA for FP8 KV
    ]
    facts += [(v.fi.can_use_trtllm_attention(q, kv), trtllm_decode) for q, kv in MODELS.values()]
    with patch("vllm.envs.VLLM_BATCH_INVARIANT", True):
        v.fi.supports_trtllm_attention.cache_clear()
        facts.append((v.fi.supports_trtllm_attention(), False))
    v.fi.supports_trtllm_attention.cache_clear()
    with patch.object(v.fi, "has_nvidia_artifactory", return_value=False):
        v.fi.supports_trtllm_attention.cache_clear()
        facts.append((v.fi.supports_trtllm_attention(), False))
    v.fi.supports_trtllm_attention.cache_clear()
    v.set_config(use_trtllm_attention=False)
    facts.append((v.fi.can_use_trtllm_attention(64, 8), False))
    v.set_config()
    return [i for i, (got, want) in enumerate(facts) if got is not want]


def check_vllm_unit_cases_hold_with_the_plugin_on_sm100_sm90_sm80(v):
    """Wherever vLLM's rule is final (forced, DCP, heads, spec, FP8 query, sinks, quantized KV, decode, no
    TRT-LLM prefill on the GPU), the plugin changes nothing; checked with a table that would flip every
    prefill it was allowed to answer."""
    for sm, table in ((100, b200_prefers_native_prefill()), (90, None), (80, None)):
        v.set_capability(sm // 10, sm % 10)
        assert vllm_facts(v, sm, plugin_on=False) == [], f"vLLM's own cases, before install on SM{sm}"
        plugin.install(db=str(SHIPPED), device="NVIDIA H200", dispatcher=table)
        with inside_a_build():
            assert vllm_facts(v, sm, plugin_on=True) == [], f"vLLM's own cases with the plugin on SM{sm}"
        plugin.uninstall()


def check_sm100_automatic_prefill_follows_the_measurements(v):
    v.set_capability(10, 0)
    assert vllm_call(v, is_prefill=True, num_tokens=1024, max_seq_len=1024) is True   # vLLM: "auto" KV -> TRT-LLM
    plugin.install(dispatcher=b200_prefers_native_prefill())
    with inside_a_build():
        assert vllm_call(v, is_prefill=True, num_tokens=1024, max_seq_len=1024) is False   # FA2 measured faster
        assert "Switchyard (False)" in plugin.reasons()["prefill"] and "fa2" in plugin.reasons()["prefill"]
        assert vllm_call(v, is_prefill=True, num_tokens=1024, max_seq_len=1024, force_use_trtllm=True) is True
    assert vllm_call(v, is_prefill=True, num_tokens=1024, max_seq_len=1024) is True   # outside a build: no geometry
    plugin.install(dispatcher=b200_prefers_native_prefill(native_us=200.0))             # trtllm-gen faster
    with inside_a_build():
        assert vllm_call(v, is_prefill=True, kv_cache_dtype="fp8") is False    # BF16 query on FP8 KV: vLLM's rule
        assert vllm_call(v, is_prefill=True, has_sinks=True, q_dtype=v.fib.torch.float16) is True


def check_a_prefill_past_a_query_tile_is_decided_apart(v):
    """130 query rows run a second 128-row tile: not answered from the cached answer for 128."""
    v.set_capability(10, 0)
    t = Table()
    for q, native_us in ((128, 200.0), (129, 50.0)):      # trtllm-gen (80 us) faster at 128, FA2 past it
        p = AttentionProblem(phase="prefill", num_qo_heads=64, num_kv_heads=8, batch_size=1, q_len=q, kv_len=4096)
        t.add(p.cell(), Timing(Pipeline("trtllm-gen", "bf16", "bf16", "bf16"), 80.0, 0.5, 0.002))
        t.add(p.cell(), Timing(Pipeline("fa2", "bf16", "bf16", "bf16", tactic=(("fixed_split_size", 0),)),
                               native_us, 0.5, 0.002))
    plugin.install(dispatcher=Dispatcher(t, B200, plugin.vllm_registry()))
    with inside_a_build():
        assert vllm_call(v, is_prefill=True, num_tokens=128, max_seq_len=4096) is True
        assert vllm_call(v, is_prefill=True, num_tokens=130, max_seq_len=4096) is False


def check_sm90_prefill_stays_native_whatever_the_database_says(v):
    """The old shim answered True on SM90 from Switchyard's registry (FMHAv2); vLLM has no path to it."""
    v.set_capability(9, 0)
    plugin.install(db=str(SHIPPED), device="NVIDIA H200")
    with inside_a_build():
        assert vllm_call(v, is_prefill=True, num_tokens=1024, max_seq_len=1024) is False
        assert "SM100 family only" in plugin.reasons()["prefill"]
        assert vllm_call(v, is_prefill=True, num_tokens=1024, max_seq_len=1024, force_use_trtllm=True) is False


def check_a_database_of_another_gpu_leaves_vllms_prefill(v):
    v.set_capability(10, 0)
    plugin.install(db=str(SHIPPED), device="NVIDIA H200")            # H200 measurements on a B200
    with inside_a_build():
        assert vllm_call(v, is_prefill=True, num_tokens=1024, max_seq_len=1024) is True
    assert "is not this GPU" in plugin.reasons()["prefill"]


# -- FlashInferMetadataBuilder: vLLM's real __init__ and build() ----------------------------------------
def make_builder(v, cache_dtype="fp8", graphs="piecewise", spec_tokens=0, max_capture=512, device="cpu"):
    import torch
    from vllm.config import CUDAGraphMode
    from vllm.model_executor.layers.attention_layer_base import AttentionLayerBase
    from vllm.v1.kv_cache_interface import FullAttentionSpec, KVCacheLayout, KVQuantMode

    class Layer(AttentionLayerBase):
        def __init__(self, impl):
            self.impl = impl

        def get_attn_backend(self):
            return v.fib.FlashInferBackend

        def get_kv_cache_spec(self, vllm_config):
            return None

    if device == "cpu":
        v.fib._fi_multi_ctas_kv_counter = torch.zeros(0, dtype=torch.uint8)   # a device buffer, here on the CPU
    spec = types.SimpleNamespace(num_speculative_tokens=spec_tokens, parallel_drafting=False,
                                 enable_adaptive_verification=False) if spec_tokens else None
    cfg = v.set_config(
        scheduler_config=types.SimpleNamespace(max_num_batched_tokens=8192, max_num_seqs=1024),
        parallel_config=types.SimpleNamespace(decode_context_parallel_size=1, cp_kv_cache_interleave_size=1,
                                              dcp_comm_backend="ag_rs"),
        cache_config=types.SimpleNamespace(cache_dtype=cache_dtype,
                                           get_resolved_kv_cache_layout=lambda: KVCacheLayout.LBHNC),
        model_config=types.SimpleNamespace(max_model_len=16384, dtype=torch.bfloat16,
                                           get_num_attention_heads=lambda parallel: 40),
        num_speculative_tokens=spec_tokens, speculative_config=spec, use_v2_model_runner=True)
    impl = v.fib.FlashInferImpl(num_heads=40, head_size=128, scale=128 ** -0.5, num_kv_heads=8, alibi_slopes=None,
                                sliding_window=None, kv_cache_dtype=cache_dtype)
    mode = CUDAGraphMode.FULL_AND_PIECEWISE if graphs == "full" else CUDAGraphMode.PIECEWISE
    cfg.compilation_config = types.SimpleNamespace(cudagraph_mode=mode, max_cudagraph_capture_size=max_capture,
                                                   static_forward_context={"layers.0.attn": Layer(impl)})
    quantized = cache_dtype.startswith("fp8")
    kv = FullAttentionSpec(block_size=16, num_kv_heads=8, head_size=128,
                           dtype=torch.uint8 if quantized else torch.bfloat16,
                           kv_quant_mode=KVQuantMode.FP8_PER_TENSOR if quantized else KVQuantMode.NONE)
    return v.fib.FlashInferMetadataBuilder(kv, ["layers.0.attn"], cfg, torch.device(device))


def batch(seq_lens, query_lens=None, device="cpu", pages_per_request=1100):
    """vLLM's per-step CommonAttentionMetadata (decodes first); request r owns KV pages
    r * pages_per_request onwards."""
    import torch
    from vllm.v1.attention.backend import CommonAttentionMetadata
    q = query_lens or [1] * len(seq_lens)
    start = torch.tensor([0] + torch.tensor(q).cumsum(0).tolist(), dtype=torch.int32)
    lens = torch.tensor(seq_lens, dtype=torch.int32)
    n, tokens = len(seq_lens), int(start[-1])
    pages = torch.arange(n * pages_per_request, dtype=torch.int32).reshape(n, pages_per_request)
    return CommonAttentionMetadata(
        query_start_loc=start.to(device), query_start_loc_cpu=start, seq_lens=lens.to(device),
        seq_lens_cpu_upper_bound=lens, num_reqs=n, num_actual_tokens=tokens, max_query_len=max(q),
        max_seq_len=max(seq_lens), block_table_tensor=pages.to(device),
        slot_mapping=torch.zeros(tokens, dtype=torch.int64, device=device))


def decode_path(v, metadata):
    """What forward() will run for the decodes: it dispatches on the metadata's type."""
    d = metadata.decode
    return d.kernel.value if isinstance(d, v.fib.FlashInferTrtllmAPIDecode) else "native"


UNIFORM = [1024] * 8
ONE_LONG = [500] * 7 + [8000]          # mixed lengths: FA2 tensor-core decode wins by 2-6x on the H200


def check_sm90_decode_per_step_native_for_one_long_request_xqa_for_uniform(v):
    v.set_capability(9, 0)
    plugin.install(db=str(SHIPPED), device="NVIDIA H200")
    b = make_builder(v)
    assert b.use_trtllm_decode_attention and b.flashinfer_trtllm_api_decode_kernel.value == "xqa"  # vLLM's pick
    assert decode_path(v, b.build(0, batch(UNIFORM))) == "xqa"
    skewed = b.build(0, batch(ONE_LONG))
    assert decode_path(v, skewed) == "native"
    plan = skewed.decode.wrapper.plans[-1]
    assert plan["q_data_type"] == v.fib.torch.bfloat16 and plan["kv_data_type"] == v.fib.torch.float8_e4m3fn
    assert skewed.decode.wrapper.init_kwargs["use_tensor_cores"] is True       # FA2 tensor-core decode
    assert b.use_trtllm_decode_attention is True                               # vLLM's flag restored
    assert "fa2-tc" in plugin.reasons()["decode group layers.0.attn step"]
    mixed = b.build(0, batch(ONE_LONG + [3000], [1] * 8 + [512]))              # decodes with one prefill
    assert decode_path(v, mixed) == "native" and type(mixed.prefill).__name__ == "FIPrefill"
    plugin.uninstall()
    assert decode_path(v, make_builder(v).build(0, batch(ONE_LONG))) == "xqa"  # vLLM alone


def check_a_step_outside_full_graphs_may_plan_a_fixed_split(v):
    """Per step, vLLM's native wrapper is planned afresh: where FA2-TC with a fixed split of 1024 KV pages is
    the decision, the plugin sets the builder's decode_fixed_split_size for that build; a captured graph never
    gets one. The batch: a serving replay step measured on the H200 (BF16 KV, 128 requests, mean 4258, longest
    34869, kv_balance 0.312, in the layout the sweep measured: fixed split 564 us, XQA 693;
    benchmarks/results/h200-2026-12-06/replay.db.xz). At 31 requests of 200 and one of 16000 FlashInfer's own
    plan cuts the long one in two (33 chunks fit), and the plugin plans it so (the fixed split runs it whole)."""
    v.set_capability(9, 0)
    plugin.install(db=str(SHIPPED), device="NVIDIA H200")
    b = make_builder(v, cache_dtype="auto")
    from dispatcher.balance import tiered
    replayed = tiered(128, 4258, 34869, 0.312)
    step = b.build(0, batch(replayed, pages_per_request=2200))
    assert decode_path(v, step) == "native" and step.decode.wrapper.plans[-1]["fixed_split_size"] == 1024
    assert b.decode_fixed_split_size == -1 and b.use_trtllm_decode_attention is True      # vLLM's, restored
    assert "fixed_split_size=1024" in plugin.reasons()["decode group layers.0.attn step"]
    step = b.build(0, batch([200] * 31 + [16000]))
    assert decode_path(v, step) == "native" and step.decode.wrapper.plans[-1]["fixed_split_size"] == -1
    with patch.dict(os.environ, {"SWITCHYARD_FIXED_SPLIT": "0"}):
        plugin.install(db=str(SHIPPED), device="NVIDIA H200")
        step = make_builder(v, cache_dtype="auto").build(0, batch(replayed, pages_per_request=2200))
    assert decode_path(v, step) != "native" or step.decode.wrapper.plans[-1]["fixed_split_size"] == -1
    plugin.install(db=str(SHIPPED), device="NVIDIA H200", decode_kv_len=742, decode_skew=21.6)
    b = make_builder(v, graphs="full", max_capture=64)
    captured = b.build_for_cudagraph_capture(batch([1] * 64))
    assert decode_path(v, captured) == "xqa" or captured.decode.wrapper.plans[-1]["fixed_split_size"] == -1


def check_full_graphs_decide_at_capture_and_replays_keep_it(v):
    v.set_capability(9, 0)
    plugin.install(db=str(SHIPPED), device="NVIDIA H200", decode_kv_len=1024, decode_skew=1.0)
    b = make_builder(v, graphs="full", max_capture=16)
    assert decode_path(v, b.build_for_cudagraph_capture(batch([1] * 8))) == "xqa"   # expected: uniform
    assert decode_path(v, b.build(0, batch(ONE_LONG))) == "xqa"       # replay of size 8: never switched
    big = [500] * 23 + [16000]                                         # 24 > 16: no graph, decided per step
    assert decode_path(v, b.build(0, batch(big))) == "native"
    plugin.install(db=str(SHIPPED), device="NVIDIA H200", decode_kv_len=1024, decode_skew=8.0)
    b = make_builder(v, graphs="full", max_capture=16)
    captured = b.build_for_cudagraph_capture(batch([1] * 8))
    assert decode_path(v, captured) == "native" and captured.decode.wrapper.is_cuda_graph_enabled
    replay = b.build(0, batch(UNIFORM))
    assert decode_path(v, replay) == "native" and replay.decode.wrapper is captured.decode.wrapper
    why = plugin.reasons()["decode group layers.0.attn graph bs=8"]
    assert "longest 8185" in why and "fa2-tc" in why, why      # 8x the mean: the others hold a token each


def check_a_replay_of_a_size_never_captured_by_the_plugin_keeps_vllms_kernel(v):
    """A FULL graph captured before the plugin decided (or without it) holds vLLM's XQA: its replays
    keep XQA even where the step's own lengths would pick the native decode."""
    v.set_capability(9, 0)
    plugin.install(db=str(SHIPPED), device="NVIDIA H200")
    b = make_builder(v, graphs="full", max_capture=16)
    assert decode_path(v, b.build(0, batch(ONE_LONG))) == "xqa"        # size 8 <= 16, never captured
    assert decode_path(v, make_builder(v).build(0, batch(ONE_LONG))) == "native"     # without graphs: per step


def check_a_step_is_decided_for_the_problem_from_seq_lens_builds(v):
    """Per step the plugin keys the decode requests' lengths as AttentionProblem.from_seq_lens does (the
    mean rounded as there, kv_balance from the lengths), so `tuner decide --seq-lens` explains what ran."""
    import random
    v.set_capability(9, 0)
    plugin.install(db=str(SHIPPED), device="NVIDIA H200")
    rng = random.Random(7)
    # [1] * 6 + [5000]: a mean of 715.1 that must round up to hold the longest (7 x 715 - 6 < 5000)
    batches = [ONE_LONG, [1] * 6 + [5000], [2, 2, 2, 5000], [200] * 31 + [16000], [3000] * 40 + [3001] * 3]
    batches += [[rng.randint(1, 17000) for _ in range(rng.randint(2, 300))] for _ in range(12)]
    batches += [[rng.randint(1, 300) for _ in range(rng.randint(2, 300))] + [rng.randint(4000, 17000)]
                for _ in range(12)]
    for lens in batches:
        make_builder(v).build(0, batch(lens))
        p = AttentionProblem.from_seq_lens(seq_lens=lens, phase="decode", **SCOUT, kv_dtype="fp8")
        dec = plugin.answers.current().dispatcher(per_step=True).choose(p)
        note = plugin.reasons()["decode group layers.0.attn step"]
        assert note.startswith(f"bs={p.batch_size} mean={p.kv_len} longest={p.max_kv_len} "), (lens, note)
        assert f"{dec.pipeline} ({dec.source}: {dec.reason})" in note, (lens, note, dec)


def check_decode_stays_vllms_where_it_must(v):
    v.set_capability(9, 0)
    plugin.install(db=str(SHIPPED), device="NVIDIA H200")
    assert decode_path(v, make_builder(v, spec_tokens=2).build(0, batch(ONE_LONG))) == "xqa"
    assert "speculative decoding" in plugin.reasons()["decode group layers.0.attn"]
    # BF16 KV, uniform 64 x 2048: vLLM's native wrapper (the fa2-tc pipeline, 137.0 us on the H200) beats its
    # XQA (154.1 us with PDL); among vLLM's own settings only (fixed_split_size=1024, 132.0 us, is not one)
    assert decode_path(v, make_builder(v, cache_dtype="auto").build(0, batch([2048] * 64))) == "native"
    assert "fa2-tc[fixed_split_size=0]" in plugin.reasons()["decode group layers.0.attn step"]
    plugin.install(dispatcher=Dispatcher(Table(), H200, plugin.vllm_registry()))      # no measurements
    assert decode_path(v, make_builder(v).build(0, batch(ONE_LONG))) == "xqa"
    plugin.install(db=str(SHIPPED), device="NVIDIA H200")
    v.set_capability(10, 0)
    b = make_builder(v)
    assert decode_path(v, b.build(0, batch(ONE_LONG))) == "trtllm-gen"              # SM100: vLLM's trtllm-gen
    assert "trtllm-gen" in plugin.reasons()["decode group layers.0.attn"]
    v.set_capability(8, 0)
    assert decode_path(v, make_builder(v).build(0, batch(ONE_LONG))) == "native"      # SM80: no XQA at all


def check_sm100_prefill_in_a_real_build_follows_the_measurements(v):
    v.set_capability(10, 0)

    def prefill_path():
        return type(make_builder(v, cache_dtype="auto").build(0, batch([1024], [1024])).prefill).__name__
    assert prefill_path() == "TRTLLMPrefill"                       # vLLM's auto-detection: "auto" KV
    plugin.install(dispatcher=b200_prefers_native_prefill())
    assert prefill_path() == "FIPrefill"                           # FlashInfer's native prefill measured faster


# -- FlashInferImpl.fused_output_quant_supported and forward ---------------------------------------------
def check_fused_fp8_output_follows_vllm_except_measured_xqa_on_sm90(v):
    """SM100: trtllm-gen writes FP8/FP4 itself (vLLM's True). SM90, FP8 KV, static FP8 output: True where
    XQA's own FP8 output was measured faster (the shipped H200 db), False where a db says slower; NVFP4
    output and BF16 KV stay vLLM's False. SM80: False."""
    fp8, fp4 = v.quant.kFp8StaticTensorSym, v.quant.kNvfp4Dynamic
    cases = {100: {("fp8", fp8): True, ("fp8", fp4): True, ("auto", fp8): False},
             90: {("fp8", fp8): True, ("fp8", fp4): False, ("auto", fp8): False},
             80: {("fp8", fp8): False, ("auto", fp8): False}}
    plugin.install(db=str(SHIPPED), device="NVIDIA H200")
    for sm, expected in cases.items():
        v.set_capability(sm // 10, sm % 10)
        make_builder(v)                                       # sets the config FlashInferImpl reads
        for (kv, key), want in expected.items():
            impl = v.fib.FlashInferImpl(40, 128, 128 ** -0.5, 8, None, None, kv)
            assert impl.fused_output_quant_supported(key) is want, (sm, kv, key)
        if sm == 90:
            assert "faster than XQA and a separate quant" in plugin.reasons()[f"fused output {fp8} 40/8x128 fp8"]
    v.set_capability(9, 0)
    plugin.install(dispatcher=xqa_fp8_output_table(fused_us=30.0, separate_us=25.0))
    impl = v.fib.FlashInferImpl(40, 128, 128 ** -0.5, 8, None, None, "fp8")
    assert impl.fused_output_quant_supported(fp8) is False
    assert "slower" in plugin.reasons()[f"fused output {fp8} 40/8x128 fp8"]


def xqa_fp8_output_table(fused_us: float, separate_us: float) -> Dispatcher:
    """An H200 table of XQA decode with FP8 KV and FP8 output, written by XQA or by a separate quant."""
    t = Table()
    for batch in (1, 16, 256):
        p = AttentionProblem(phase="decode", num_qo_heads=40, num_kv_heads=8, batch_size=batch, kv_len=2048,
                             kv_dtype="fp8", out_dtype="fp8").cell()
        pdl = (("enable_pdl", True),)
        t.add(p, Timing(Pipeline("trtllm-xqa", "bf16", "fp8", "fp8", tactic=pdl), fused_us, 0.2, 0.04))
        t.add(p, Timing(Pipeline("trtllm-xqa", "bf16", "fp8", "bf16", out_quant=True, tactic=pdl), separate_us,
                        0.2, 0.03))
    return Dispatcher(t, H200, plugin.vllm_registry())


def decode_step(v, builder, seq_lens, out_dtype):
    """One layer's forward() inputs for a decode step: the layer's scales, a query, vLLM's FP8 KV cache
    (LBHNC: [pages, kv heads, page, K and V], stored as uint8) and the output buffer."""
    import torch
    n = len(seq_lens)
    layer = types.SimpleNamespace(_q_scale_float=1.0, _k_scale_float=0.5, _v_scale_float=0.75, _o_scale_float=None,
                                  _q_scale=torch.ones(1), _k_scale=torch.full((1,), 0.5),
                                  _v_scale=torch.full((1,), 0.75))
    query = torch.randn(n, 40, 128, dtype=torch.bfloat16)
    kv = torch.zeros(n * 1100, 8, 16, 256, dtype=torch.uint8)
    out = torch.empty(n, 40, 128, dtype=out_dtype)
    return layer, query, kv, out, builder.build(0, batch(seq_lens))


def fused_sm90_layer(v):
    """The plugin on, a builder and its layer, whose static FP8 output the plugin fused (vLLM's fusion
    pass asked, as when it compiles)."""
    plugin.install(db=str(SHIPPED), device="NVIDIA H200")
    b = make_builder(v)
    impl = b.vllm_config.compilation_config.static_forward_context["layers.0.attn"].impl
    assert impl.fused_output_quant_supported(v.quant.kFp8StaticTensorSym) is True
    return b, impl


def check_sm90_fused_fp8_output_xqa_writes_it_with_its_own_scale(v):
    """vLLM's own forward, with FlashInfer's XQA call recorded: a decode step on XQA gets the output's FP8
    buffer, o_scale and bmm2_scale = v_scale / o_scale (as the tuner's trtllm-xqa+fused-out pipeline);
    without the plugin vLLM refuses the fused call on SM90."""
    import torch
    v.set_capability(9, 0)
    calls = []
    v.fib.flashinfer_xqa_batch_decode_with_kv_cache = lambda **kw: calls.append(kw)     # the kernel, recorded
    v.fib.trtllm_workspace_buffer = torch.zeros(64, dtype=torch.uint8)                # vLLM's is on the GPU
    b, impl = fused_sm90_layer(v)
    layer, query, kv, out, step = decode_step(v, b, UNIFORM, torch.float8_e4m3fn)
    assert decode_path(v, step) == "xqa"
    assert impl.forward(layer, query, None, None, kv, step, out, output_scale=torch.tensor([0.25])) is out
    fused = calls[-1]
    assert fused["o_scale"] == 0.25 and fused["bmm2_scale"] == 0.75 / 0.25 and fused["out"].dtype == out.dtype
    assert fused["out"].data_ptr() == out.data_ptr() and layer._o_scale_float == 0.25
    # vLLM's fusion pass asks until one layer says True, then fuses every layer: one never asked runs too
    other = v.fib.FlashInferImpl(40, 128, 128 ** -0.5, 8, None, None, "fp8")
    layer, query, kv, out, step = decode_step(v, b, UNIFORM, torch.float8_e4m3fn)
    other.forward(layer, query, None, None, kv, step, out, output_scale=torch.tensor([0.5]))
    assert calls[-1]["o_scale"] == 0.5 and calls[-1]["out"].data_ptr() == out.data_ptr()
    layer, query, kv, bf16_out, step = decode_step(v, b, UNIFORM, torch.bfloat16)
    impl.forward(layer, query, None, None, kv, step, bf16_out)                  # no fusion: vLLM's call as is
    assert "o_scale" not in calls[-1] and calls[-1]["bmm2_scale"] == 0.75
    plugin.uninstall()
    with pytest.raises(AssertionError, match="fusion"):
        impl.forward(layer, query, None, None, kv, step, out, output_scale=torch.tensor([0.25]))


def check_sm90_fused_fp8_output_elsewhere_quantizes_what_vllms_kernel_wrote(v):
    """A step Switchyard decodes natively (one long request): vLLM's native wrapper writes the model's
    dtype (an identity kernel here, writing the query), then the static FP8 quant: out = q / scale."""
    import torch
    v.set_capability(9, 0)
    b, impl = fused_sm90_layer(v)
    layer, query, kv, out, step = decode_step(v, b, ONE_LONG, torch.float8_e4m3fn)
    assert decode_path(v, step) == "native"
    impl.forward(layer, query, None, None, kv, step, out, output_scale=torch.tensor([0.25]))
    assert torch.equal(out.float(), (query.float() / 0.25).to(torch.float8_e4m3fn).float())


# -- installing -------------------------------------------------------------------------------------------
def check_other_vllm_versions_are_refused_and_left_alone(v):
    own = v.fi.use_trtllm_attention
    with patch.object(v.version, "__version__", "0.34.0"):
        with pytest.raises(plugin.UnsupportedVllm, match="vLLM 0.34.0 is not supported"):
            plugin.install(db=str(SHIPPED))
        with patch.dict(os.environ, {"SWITCHYARD_DB": str(SHIPPED)}):
            plugin.register()                                  # the entry point: logs, never raises
    assert v.fi.use_trtllm_attention is own and plugin.installed() == []


def check_entry_point_installs_only_with_a_database_and_uninstall_restores(v):
    builder = v.fib.FlashInferMetadataBuilder
    own = (v.fi.use_trtllm_attention, builder.build, v.fib.FlashInferImpl.fused_output_quant_supported,
           v.fib.FlashInferImpl.forward)
    with patch.dict(os.environ, {"SWITCHYARD_DB": ""}):
        plugin.register()
    assert plugin.installed() == []
    with patch.dict(os.environ, {"SWITCHYARD_DB": str(SHIPPED), "SWITCHYARD_DEVICE": "NVIDIA H200"}):
        plugin.register()
        plugin.register()                                      # once per process, but idempotent anyway
    assert len(plugin.installed()) == 7 and v.fib.use_trtllm_attention is v.fi.use_trtllm_attention
    assert builder.build.__wrapped__ is own[1]
    plugin.uninstall()
    assert (v.fi.use_trtllm_attention, builder.build, v.fib.FlashInferImpl.fused_output_quant_supported,
            v.fib.FlashInferImpl.forward) == own
    assert v.fib.use_trtllm_attention is own[0] and "build_for_cudagraph_capture" not in vars(builder)


# -- the pytest side ---------------------------------------------------------------------------------------
CHECKS = sorted(n for n in list(globals()) if n.startswith("check_"))


def run_checks(tree: Path) -> dict[str, str]:
    env = {k: val for k, val in os.environ.items() if not k.startswith(("SWITCHYARD_", "VLLM_"))}
    # without nvcc/ninja on PATH vLLM does not register FlashInfer's torch ops (the stub has none)
    env.update(PATH=str(Path(sys.executable).parent), VLLM_FLASHINFER_WORKSPACE_BUFFER_SIZE=str(1 << 20))
    done = subprocess.run([sys.executable, "-m", "tests.vllm_wheel", str(tree), __name__], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=600)
    lines = [ln for ln in done.stdout.splitlines() if ln.startswith(vllm_wheel.RESULT_MARK)]
    assert lines, f"the check subprocess failed (rc {done.returncode}):\n{done.stderr[-4000:]}"
    return json.loads(lines[-1][len(vllm_wheel.RESULT_MARK):])


@pytest.fixture(scope="session")
def vllm_checks(tmp_path_factory, worker_id) -> dict[str, str]:
    """One subprocess per test run, shared by the xdist workers through a file."""
    try:
        tree = vllm_wheel.obtain()
    except vllm_wheel.Unavailable as e:
        pytest.skip(f"vLLM {vllm_wheel.VERSION}'s wheel is not available here: {e}")
    if worker_id == "master":
        return run_checks(tree)
    shared = tmp_path_factory.getbasetemp().parent / "vllm-checks.json"
    with open(shared.with_suffix(".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not shared.exists():
            shared.write_text(json.dumps(run_checks(tree)))
    return json.loads(shared.read_text())


@pytest.mark.parametrize("check", CHECKS)
def test_against_vllm_0_33(vllm_checks, check):
    assert vllm_checks.get(check) == "ok", vllm_checks.get(check, "not run")


def test_the_entry_point_is_declared_and_needs_no_vllm():
    entry = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["entry-points"]["vllm.general_plugins"]
    module, _, attr = entry["switchyard"].partition(":")
    assert getattr(sys.modules[module], attr) is plugin.register
    with patch.dict(os.environ, {"SWITCHYARD_DB": ""}):
        plugin.register()                                      # unset: nothing happens, vLLM not imported
    assert "vllm" not in sys.modules and plugin.installed() == []


def test_a_missing_database_is_named_before_vllm_is_touched(tmp_path, caplog):
    """Before: install() patched vLLM and warned only at its first decision; the entry point the same."""
    gone = tmp_path / "heuristics.db"
    with pytest.raises(FileNotFoundError, match=f"{gone}: no such database; point install"):
        plugin.install(db=str(gone))
    with patch.dict(os.environ, {"SWITCHYARD_DB": str(gone)}), caplog.at_level("WARNING", "vllm.switchyard"):
        plugin.register()
    assert f"{gone}: no such database" in caplog.text and "vllm" not in sys.modules and plugin.installed() == []
    with patch.dict(os.environ, {"SWITCHYARD_DB": str(gone)}), pytest.raises(ImportError):   # never read: no check
        plugin.install(dispatcher=Dispatcher(Table(), H200))


def test_install_without_vllm_says_how():
    with pytest.raises(ImportError, match="vLLM is not importable here"):
        plugin.install(db=str(SHIPPED))


def test_settings_come_from_the_environment_and_bad_ones_name_the_variable():
    s = plugin.Settings.from_env({"SWITCHYARD_DB": "x.db", "SWITCHYARD_DECODE_KV_LEN": "4096",
                                  "SWITCHYARD_DECODE_SKEW": "4"})
    assert (s.db, s.decode_kv_len, s.expected_decode(8), s.expected_decode(1)) == ("x.db", 4096, (4096, 16384),
                                                                                   (4096, 4096))
    # a batch of two cannot hold a request 4x the mean: the longest is all it can be, so it is decided
    assert s.expected_decode(2) == (4096, 8191)
    assert AttentionProblem(phase="decode", batch_size=2, kv_len=4096, max_kv_len=8191, **SCOUT)
    with pytest.raises(ValueError, match="SWITCHYARD_DECODE_SKEW"):
        plugin.Settings.from_env({"SWITCHYARD_DECODE_SKEW": "0.5"})
    with pytest.raises(ValueError, match="SWITCHYARD_DECODE_KV_LEN"):
        plugin.Settings.from_env({"SWITCHYARD_DECODE_KV_LEN": "long"})
    # accepted before, then an OverflowError at CUDA-graph capture (inf) or a problem no kernel can hold
    for name, value in (("SWITCHYARD_DECODE_SKEW", "inf"), ("SWITCHYARD_DECODE_SKEW", "nan"),
                        ("SWITCHYARD_DECODE_KV_LEN", "99999999999")):
        with pytest.raises(ValueError, match=rf"\({name}\) {value} must be"):
            plugin.Settings.from_env({name: value})
    assert plugin.Settings.from_env({}).fixed_split
    assert not plugin.Settings.from_env({"SWITCHYARD_FIXED_SPLIT": "0"}).fixed_split
    with pytest.raises(ValueError, match="SWITCHYARD_FIXED_SPLIT='maybe' is not a switch"):
        plugin.Settings.from_env({"SWITCHYARD_FIXED_SPLIT": "maybe"})


def test_the_gpu_checks_label_the_decode_path_by_the_chosen_pipeline():
    """tests/gpu/vllm_forward.py labels a step "fixed split" from the plugin's note. The note names the runner-up
    too, so the one-long BF16 step (FlashInfer's own plan chosen, the split 2.3x slower) was labelled as the
    split on an H100, and a first fix matched no note at all. Both steps' notes, as decode.decide writes them."""
    import numpy as np

    from dispatcher.balance import mean_of
    from dispatcher.integrations.vllm import decode
    from dispatcher.integrations.vllm.answers import Answers
    from dispatcher.integrations.vllm.settings import Settings
    from tests.gpu.vllm_forward import STEPS, labelled
    answers = Answers(Settings(db=str(SHIPPED), device="NVIDIA H200"))
    state = decode.DecodeState(None, point="decode group layers.0.attn", native="fa2-tc",
                               fields=dict(phase="decode", num_qo_heads=40, num_kv_heads=8, head_dim=128, page_size=16,
                                           q_dtype="bf16", kv_dtype="bf16", out_dtype="bf16"))
    paths = {}
    for name, lens in STEPS.items():
        live = np.array(lens)
        batch, longest, total = live.size, int(live.max()), int(live.sum())
        balance = float(live.clip(max=total / batch).sum() / total)
        choice, why = decode.decide(answers, state, batch, mean_of(total, batch, longest), longest, per_step=True,
                                    balance=balance)
        paths[name] = (choice.split, labelled("native", f"bs={batch}: {why}"))
    assert paths == {"uniform 64 x 2048": (1024, "native, fixed split of 1024 KV pages"),
                     "one long: 31 x 500 + 16000": (None, "native")}
