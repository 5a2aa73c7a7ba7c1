"""Every runner against the fp32 reference on the GPU (run on the lent H200: pytest -m gpu tests/gpu)."""
import dataclasses

import pytest
import torch

from dispatcher import AttentionProblem, load_registry
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
PROBLEMS += [dataclasses.replace(PROBLEMS[1], num_qo_heads=10, num_kv_heads=2, page_size=32)]   # TP4 geometry


@pytest.fixture(scope="module")
def device():
    from dispatcher.device import describe
    return describe("cuda")


def cases(device):
    reg = load_registry()
    return [(p, pipe) for p in PROBLEMS for pipe in candidates(reg, p, device, all_tactics=False)]


def test_every_eligible_pipeline_matches_the_reference(device):
    """Runs every default-tactic pipeline; prints a table (committed with the device run)."""
    results, failures = [], []
    for p, pipe in cases(device):
        runner, why = runnable(pipe.kernel, device)
        if why:
            results.append((p, pipe.id, "unavailable", why))
            continue
        x = make_inputs(p, "cuda")
        try:
            out = runner.build(pipe, x)()
            torch.cuda.synchronize()
        except Exception as e:  # noqa: BLE001
            results.append((p, pipe.id, "failed", f"{type(e).__name__}: {str(e)[:200]}"))
            continue
        fp8 = pipe.fused_out_quant or pipe.out_quant
        assert out.dtype == (torch.float8_e4m3fn if fp8 else torch.bfloat16), pipe.id
        err = relative_error(out, x, fp8)
        budget = max_relerr(p.kv_dtype, p.out_dtype)
        results.append((p, pipe.id, "ok" if err <= budget else "INACCURATE", f"relerr {err:.4f} (budget {budget})"))
        if err > budget:
            failures.append(pipe.id)
    for p, pid, status, note in results:
        print(f"{p.phase:7s} {p.num_qo_heads}/{p.num_kv_heads} pg{p.page_size} {p.kv_dtype}/{p.out_dtype} "
              f"{pid:45s} {status:11s} {note}")
    ran = {pid.split("[")[0].split("+")[0] for _, pid, status, _ in results if status in ("ok", "INACCURATE")}
    assert {"trtllm-xqa", "fa2-tc", "fa3", "trtllm-fmha-v2", "torch-sdpa"} <= ran
    assert not failures


def test_fused_fp8_out_and_q_quant_paths(device):
    """XQA writes FP8 itself (out * o_scale vs reference); FMHAv2 takes a quantized query."""
    reg = load_registry()
    decode = PROBLEMS[3]                       # fp8 KV, fp8 out
    prefill = PROBLEMS[7]
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
    from tuner.harness import TimingConfig, make_timer
    from tuner.jit import prebuild
    from tuner.store import Store
    from tuner.sweep import plan, run_sweep
    probs = [PROBLEMS[3], dataclasses.replace(PROBLEMS[3], batch_size=64, kv_len=8192)]
    reg = load_registry()
    prebuild(plan(probs, device, reg), device)
    s = Store(tmp_path / "h.db")
    report = run_sweep(probs, device, s, make_timer("graph", TimingConfig(rounds=5)), registry=reg)
    s.close()
    assert all(o.winner for o in report.outcomes)
    for o in report.outcomes:
        ok = sorted((r["median_us"], r["pipeline"]) for r in o.rows if r["status"] == "ok")
        print(o.problem.batch_size, o.problem.kv_len, "winner", o.winner, ok[:4])
        assert ok and ok[0][0] > 0
