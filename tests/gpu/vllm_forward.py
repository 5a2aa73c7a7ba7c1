"""vLLM 0.33's own FlashInferImpl.forward on the H200, without and with the plugin (run by
tests/gpu/test_vllm_forward_gpu.py through `python -m tests.vllm_wheel TREE tests.gpu.vllm_forward --gpu`).

vLLM's Python code from its wheel, FlashInfer's real kernels, vLLM's own Triton kernel; torch stands in
only for vLLM's compiled static FP8 quant (forward.quantize_fp8). Per decode step (Llama-4-Scout TP1 layer,
40/8 heads x 128, page 16): vLLM's forward as 0.33 runs it (XQA; with FP8 output: BF16, then the quant) and
the patched one (the plugin's kernel for the step, a fixed split-KV plan included; with FP8 output fused:
XQA writes FP8 itself, other kernels' output is quantized after). Both are
checked against an fp32 per-request reference and each other within the accuracy budget, and timed
(CUDA-graph replays of the whole forward); one line per case after FORWARD_MARK.
"""
from __future__ import annotations

import json
import math
import re

import torch

from dispatcher.integrations import vllm as plugin
from dispatcher.integrations.vllm.forward import quantize_fp8
from dispatcher.policy import max_relerr
from tests.conftest import SHIPPED
from tests.test_vllm_plugin import batch, decode_path, make_builder

FORWARD_MARK = "SWITCHYARD-FORWARD "
PAGE, HQ, HKV, D = 16, 40, 8, 128
STEPS = {"uniform 64 x 2048": [2048] * 64, "one long: 31 x 500 + 16000": [500] * 31 + [16000]}
K_SCALE, V_SCALE = 0.5, 0.75


def inputs(seq_lens: list[int], kv_dtype: str, seed: int = 0):
    g = torch.Generator(device="cuda").manual_seed(seed)
    width = max(math.ceil(n / PAGE) for n in seq_lens) + 1
    shape = (len(seq_lens) * width, HKV, PAGE, 2 * D)              # LBHNC: pages, kv heads, page, K|V
    kv = torch.randn(shape, device="cuda", generator=g)
    kv = kv.to(torch.float8_e4m3fn).view(torch.uint8) if kv_dtype == "fp8" else kv.to(torch.bfloat16)
    q = torch.randn(len(seq_lens), HQ, D, device="cuda", generator=g).to(torch.bfloat16)
    return q, kv, width


def layer_scales(kv_dtype: str):
    import types
    k, v = (K_SCALE, V_SCALE) if kv_dtype == "fp8" else (1.0, 1.0)
    one = lambda x: torch.full((1,), x, device="cuda")  # noqa: E731
    return types.SimpleNamespace(_q_scale_float=1.0, _k_scale_float=k, _v_scale_float=v, _o_scale_float=None,
                                 _q_scale=one(1.0), _k_scale=one(k), _v_scale=one(v))


def reference(q, kv, seq_lens, width, kv_dtype):
    """fp32 attention per request over its own pages."""
    fp8 = kv_dtype == "fp8"
    out = []
    for r, n in enumerate(seq_lens):
        pages = kv[r * width: r * width + math.ceil(n / PAGE)]
        pages = pages.view(torch.float8_e4m3fn) if fp8 else pages
        t = pages.float().permute(1, 0, 2, 3).reshape(HKV, -1, 2 * D)[:, :n]
        k = t[..., :D].repeat_interleave(HQ // HKV, 0) * (K_SCALE if fp8 else 1.0)
        v = t[..., D:].repeat_interleave(HQ // HKV, 0) * (V_SCALE if fp8 else 1.0)
        s = (q[r].float()[:, None] @ k.transpose(1, 2)) * D ** -0.5            # [H, 1, n]
        out.append((s.softmax(-1) @ v)[:, 0])
    return torch.stack(out)


def relerr(got, want) -> float:
    return float((got.float() - want).norm() / want.norm())


def time_us(fn, iters: int = 50) -> tuple[float, str]:
    """Mean time of one call replayed in a CUDA graph (as vLLM's FULL graphs run decode), else eagerly."""
    fn()
    torch.cuda.synchronize()
    run, how = fn, "eager"
    try:
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            fn()
        run, how = graph.replay, "graph"
    except Exception as e:  # noqa: BLE001 (recorded: the time is then eager, Python included)
        how = f"eager ({type(e).__name__})"
        torch.cuda.synchronize()
    run()
    torch.cuda.synchronize()
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(iters):
        run()
    stop.record()
    torch.cuda.synchronize()
    return start.elapsed_time(stop) * 1000 / iters, how


def one_side(v, seq_lens, kv_dtype, fp8_out, with_plugin, q, kv, width):
    """(output as float, time in us, decode path, how it was timed) of one side's forward."""
    if with_plugin:
        plugin.install(db=str(SHIPPED), device="NVIDIA H200")
    else:
        plugin.uninstall()
    builder = make_builder(v, cache_dtype=kv_dtype, device="cuda")
    impl = builder.vllm_config.compilation_config.static_forward_context["layers.0.attn"].impl
    if fp8_out and with_plugin:       # vLLM's fusion pass asks while compiling, before any batch is built
        assert impl.fused_output_quant_supported(v.quant.kFp8StaticTensorSym) is True
    step = builder.build(0, batch(seq_lens, device="cuda", pages_per_request=width))
    layer = layer_scales(kv_dtype)
    n = len(seq_lens)
    bf16 = torch.empty(n, HQ, D, dtype=torch.bfloat16, device="cuda")
    scale = torch.full((1,), fp8_out, device="cuda") if fp8_out else None
    if not fp8_out:
        fn = lambda: impl.forward(layer, q, None, None, kv, step, bf16)  # noqa: E731
        result = lambda: bf16.float()  # noqa: E731
    elif with_plugin:
        out8 = torch.empty(n, HQ, D, dtype=torch.float8_e4m3fn, device="cuda")
        fn = lambda: impl.forward(layer, q, None, None, kv, step, out8, output_scale=scale)  # noqa: E731
        result = lambda: out8.float() * fp8_out  # noqa: E731
    else:                      # vLLM 0.33 on SM90: no fusion; attention in BF16, then its static quant op
        out8 = torch.empty(n, HQ, D, dtype=torch.float8_e4m3fn, device="cuda")

        def fn():
            impl.forward(layer, q, None, None, kv, step, bf16)
            out8.copy_(quantize_fp8(bf16, scale))
        result = lambda: out8.float() * fp8_out  # noqa: E731
    us, how = time_us(fn)
    fn()
    torch.cuda.synchronize()
    why = plugin.reasons().get("decode group layers.0.attn step", "") if with_plugin else ""
    return result(), us, labelled(decode_path(v, step), why), how


def labelled(path: str, note: str) -> str:
    """The decode path, "native" told apart by the pipeline the plugin's step note names as chosen: the note
    reads "bs=..: vLLM's native decode (fa2-tc): PIPELINE (source: reason)", and the reason names others."""
    chosen = re.search(r"native decode \([^)]*\): (\S+)", note)
    if path == "native" and chosen and chosen.group(1).startswith("fa2-tc[fixed_split_size=1024]"):
        return "native, fixed split of 1024 KV pages"
    return path


def run_case(v, name, kv_dtype, out_dtype):
    seq_lens = STEPS[name]
    q, kv, width = inputs(seq_lens, kv_dtype)
    ref = reference(q, kv, seq_lens, width, kv_dtype)
    fp8_out = float(ref.abs().amax()) * 1.25 / 448.0 if out_dtype == "fp8" else 0.0
    theirs = one_side(v, seq_lens, kv_dtype, fp8_out, False, q, kv, width)
    ours = one_side(v, seq_lens, kv_dtype, fp8_out, True, q, kv, width)
    budget = max_relerr("fp8" if kv_dtype == "fp8" else "bf16", out_dtype)
    row = {"step": name, "kv": kv_dtype, "out": out_dtype, "budget": budget,
           "vllm": {"path": theirs[2], "us": round(theirs[1], 2), "timed": theirs[3], "relerr": relerr(theirs[0], ref)},
           "plugin": {"path": ours[2], "us": round(ours[1], 2), "timed": ours[3], "relerr": relerr(ours[0], ref),
                      "fused_fp8_out": out_dtype == "fp8"},
           "plugin_vs_vllm_relerr": relerr(ours[0], theirs[0]), "speedup": round(theirs[1] / ours[1], 3)}
    print(FORWARD_MARK + json.dumps(row), flush=True)
    assert row["vllm"]["relerr"] <= budget and row["plugin"]["relerr"] <= budget, row
    assert row["plugin_vs_vllm_relerr"] <= budget, row
    return row


def check_bf16_steps_match_vllms_forward(v):
    rows = [run_case(v, name, "auto", "bf16") for name in STEPS]
    assert rows[1]["plugin"]["path"].startswith("native") and rows[1]["vllm"]["path"] == "xqa"   # one long request


def check_fp8_kv_fused_fp8_output_matches_vllms_forward_and_quant(v):
    rows = [run_case(v, name, "fp8", "fp8") for name in STEPS]
    assert rows[0]["plugin"]["path"] == "xqa"          # uniform: XQA writing FP8 itself
