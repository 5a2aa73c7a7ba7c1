"""Every runner against the fp32 reference on the GPU (run on the lent H200: pytest -m gpu tests/gpu).
One test per pipeline, so a run cut short still reports what it reached."""
import dataclasses

import pytest
import torch

from dispatcher import AttentionProblem, load_registry
from dispatcher.device import H200
from dispatcher.pipeline import candidates
from dispatcher.policy import max_relerr
from tuner.inputs import make_inputs, relative_error
from tuner.runners import runnable

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")]

SCOUT = dict(num_qo_heads=40, num_kv_heads=8, head_dim=128, page_size=16)
PROBLEMS = [AttentionProblem(phase="decode", batch_size=4, kv_len=1000, kv_dtype=kv, out_dtype=o, **SCOUT)
            for kv in ("bf16", "fp8") for o in ("bf16", "fp8")]
PROBLEMS += [AttentionProblem(phase="prefill", batch_size=2, q_len=128, kv_len=512, kv_dtype=kv, out_dtype=o, **SCOUT)
             for kv in ("bf16", "fp8") for o in ("bf16", "fp8")]
PROBLEMS += [dataclasses.replace(PROBLEMS[3], num_qo_heads=10, num_kv_heads=2, page_size=32)]   # TP4 geometry
# pipelines as the sweep would build them on an SM90 GPU, default tactics
CASES = [(p, pipe) for p in PROBLEMS for pipe in candidates(load_registry(), p, H200, all_tactics=False)]
ID = lambda c: f"{c[0].phase}-{c[0].num_kv_heads}kv-pg{c[0].page_size}-{c[0].kv_dtype}-{c[0].out_dtype}-{c[1].id}"  # noqa: E731


@pytest.mark.parametrize("case", CASES, ids=[ID(c) for c in CASES])
def test_pipeline_matches_the_reference(case, device):
    p, pipe = case
    runner, why = runnable(pipe.kernel, device)
    if why:
        pytest.skip(why)
    x = make_inputs(p, "cuda")
    try:
        out = runner.build(pipe, x)()
        torch.cuda.synchronize()
    except (RuntimeError, ValueError) as e:     # ValueError: torch-sdpa's flash backend declines masks up front
        if pipe.kernel in ("torch-sdpa", "cudnn"):
            pytest.xfail(f"{pipe.kernel} declined: {str(e)[:200]}")   # recorded as failed by a sweep
        raise
    fp8 = pipe.fused_out_quant or pipe.out_quant
    assert out.dtype == (torch.float8_e4m3fn if fp8 else torch.bfloat16)
    err, budget = relative_error(out, x, fp8), max_relerr(p.kv_dtype, p.out_dtype)
    print(f"{ID(case)} relerr {err:.4f} budget {budget}", flush=True)
    assert err <= budget


def test_fused_fp8_out_and_q_quant_paths(device):
    """XQA writes FP8 itself (out * o_scale vs reference); FMHAv2 takes a quantized query."""
    reg = load_registry()
    decode, prefill = PROBLEMS[3], PROBLEMS[7]      # fp8 KV, fp8 out
    fused = [c for c in candidates(reg, decode, device, False) if c.kernel == "trtllm-xqa" and c.fused_out_quant]
    qquant = [c for c in candidates(reg, prefill, device, False) if c.kernel == "trtllm-fmha-v2" and c.q_quant]
    assert fused and qquant
    for p, pipe in ((decode, fused[0]), (prefill, qquant[0])):
        x = make_inputs(p, "cuda")
        runner, _ = runnable(pipe.kernel, device)
        out = runner.build(pipe, x)()
        assert out.dtype == torch.float8_e4m3fn
        assert relative_error(out, x, True) < 0.1
        # a wrong o_scale must show: the check is not vacuous
        assert relative_error(out, dataclasses.replace(x, o_scale=x.o_scale * 2), True) > 0.5


def test_graph_sweep_records_h200_winners(device, tmp_path):
    from tuner.store import Store
    from tuner.sweep import run_sweep
    from tuner.timing import TimingConfig, make_timer
    probs = [PROBLEMS[3], PROBLEMS[3].with_sizes(batch_size=64, kv_len=8192)]
    s = Store(tmp_path / "h.db")
    report = run_sweep(probs, device, s, make_timer("graph", TimingConfig(rounds=5)), registry=load_registry())
    s.close()
    for o in report.outcomes:
        ok = sorted((r["median_us"], r["pipeline"]) for r in o.rows if r["status"] == "ok")
        print(o.problem.batch_size, o.problem.kv_len, "winner", o.winner, ok[:4], flush=True)
        assert o.winner and ok and ok[0][0] > 0
    # the warm-up stage says what it is made of, graph capture included (graph mode warms through
    # the capture's first replay: its eager warm-up part is only a synchronize)
    assert report.seconds["prepare.capture"] > 0 and report.seconds["prepare.estimate"] > 0
    assert report.seconds["prepare.capture"] > report.seconds["prepare.warmup"]
    assert report.seconds["prepare"] >= report.seconds["prepare.capture"]


@pytest.mark.parametrize("kernel", ["fa2-tc", "fa3", "trtllm-xqa"])
def test_rotated_copies_each_read_their_own_cache(kernel, device):
    """The timing rotates through KV-cache copies; a runner sharing one plan between them must still
    run each callable on its own copy (here the copies hold different values, so a mix-up shows)."""
    from tuner.inputs import reference
    from tuner.runners import build_rotated
    p = PROBLEMS[1]                                  # decode, bf16 KV, fp8 out
    pipe = next(c for c in candidates(load_registry(), p, device, False) if c.kernel == kernel)
    runner, why = runnable(kernel, device)
    if why:
        pytest.skip(why)
    x = make_inputs(p, "cuda")
    other = dataclasses.replace(x, kv_cache=x.kv_cache.flip(0).contiguous())   # pages swapped round
    other = dataclasses.replace(other, ref=reference(other))
    fns = build_rotated(runner, pipe, [x, other])
    fp8 = pipe.fused_out_quant or pipe.out_quant
    budget = max_relerr(p.kv_dtype, p.out_dtype)
    assert relative_error(fns[1]().clone(), other, fp8) <= budget
    assert relative_error(fns[0]().clone(), x, fp8) <= budget
    assert relative_error(fns[0]().clone(), other, fp8) > 0.3      # the copies really differ


def test_fmha_v2_builds_one_kernel_and_matches_the_full_module(device):
    """The tuner's FMHAv2 module holds the one kernel the runner calls (FlashInfer's holds 132,
    most of a cold sweep's compile), and that kernel gives the full module's output bit for bit."""
    import flashinfer.prefill as prefill

    from tuner.runners import fmha_v2_narrow as narrow
    p = PROBLEMS[7]
    pipe = next(c for c in candidates(load_registry(), p, device, False) if c.kernel == "trtllm-fmha-v2")
    x = make_inputs(p, "cuda")
    runner, _ = runnable(pipe.kernel, device)
    out = runner.build(pipe, x)()
    assert prefill.get_trtllm_fmha_v2_module is narrow._get_module
    spec = narrow.narrow_spec("Q_PAGED_KV_HND", torch.float8_e4m3fn, torch.float8_e4m3fn, 128)
    assert spec.name.endswith("_hd128") and len(spec.sources) == 3
    from flashinfer.jit.attention.modules import gen_fmha_v2_module
    full = gen_fmha_v2_module("q_paged_kv_hnd", torch.float8_e4m3fn, torch.float8_e4m3fn)
    if not (full.is_aot or full.is_compiled):
        pytest.skip("FlashInfer's full FMHAv2 module is not built here (minutes of nvcc)")
    prefill.get_trtllm_fmha_v2_module = narrow._stock
    try:
        ref = runner.build(pipe, x)()
    finally:
        prefill.get_trtllm_fmha_v2_module = narrow._get_module
    torch.cuda.synchronize()
    assert torch.equal(out.view(torch.uint8), ref.view(torch.uint8))
