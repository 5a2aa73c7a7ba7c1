"""Hand-written selection rules, as vLLM's FlashInfer backend had them; for fallback and comparison.

A rule returns kernels in order of preference; `rule_pick` turns the first that can serve the problem
into a pipeline (the kernel's default tactic) and says why earlier ones were passed over.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from .device import DeviceInfo
from .pipeline import Pipeline
from .pipeline import candidates as all_candidates
from .problem import AttentionProblem
from .registry import KernelSpec, ineligibility_reasons


@dataclass(frozen=True)
class Pick:
    kernel: str
    fused_out: bool = False   # take the kernel's own FP8 output when the problem wants FP8


def _flashattention(p: AttentionProblem) -> list[Pick]:
    if p.phase == "decode":
        # vLLM's use_tensor_cores: tensor-core decode for large GQA groups
        order = ["fa2-tc", "fa2"] if p.group_size > 4 else ["fa2", "fa2-tc"]
        return [Pick(k) for k in order] + [Pick("fa3")]
    return [Pick("fa3"), Pick("fa2")]


def vllm_2025(p: AttentionProblem, d: DeviceInfo) -> list[Pick]:
    """vLLM's FlashInfer backend, 2025 (vllm/utils/flashinfer.py `use_trtllm_attention`,
    before FP8-KV support on Hopper): FP8 KV never uses TRT-LLM; BF16 uses TRT-LLM only where a
    TRT-LLM kernel exists for the arch (trtllm-gen on SM100), and for decode only up to 256 tokens;
    fused FP8 output only with TRT-LLM on SM100."""
    if d.kind == "cpu":
        return [Pick("torch-sdpa")]
    picks = []
    trtllm_ok = d.sm in (100, 103) and p.kv_dtype != "fp8" and (p.phase == "prefill" or p.num_tokens <= 256)
    if trtllm_ok:
        picks.append(Pick("trtllm-gen", fused_out=True))
    if p.kv_dtype == "fp8" and p.phase == "prefill":
        picks += [Pick("fa2"), Pick("fa3")]
    else:
        picks += _flashattention(p)
    return picks + [Pick("torch-sdpa")]


def vllm_2026(p: AttentionProblem, d: DeviceInfo) -> list[Pick]:
    """vLLM's FlashInfer backend, 2026 (after "Support Flashinfer TRTLLM FP8-q/kv/out Attention
    Kernel", shared/context/): on SM90, decode with FP8 KV uses TRT-LLM XQA, everything else
    FlashAttention (FP8 KV prefill quantizes the query for FA3); fused FP8 output only on SM100,
    where trtllm-gen serves decode and prefill."""
    if d.kind == "cpu":
        return [Pick("torch-sdpa")]
    picks = []
    if d.sm in (100, 103):
        picks.append(Pick("trtllm-gen", fused_out=True))
    elif p.phase == "decode" and p.kv_dtype == "fp8":
        picks.append(Pick("trtllm-xqa"))
    picks += _flashattention(p)
    return picks + [Pick("torch-sdpa")]


def vllm_0_33(p: AttentionProblem, d: DeviceInfo) -> list[Pick]:
    """vLLM 0.33.0's FlashInfer backend as it decides (vllm/utils/flashinfer.py, v1/attention/backends/
    flashinfer.py): decode's kernel is fixed at start-up, TRT-LLM wherever the arch has one (XQA on SM90
    for every KV dtype, trtllm-gen on SM100); prefill uses TRT-LLM only on SM100 (trtllm-gen), else
    FlashInfer's native prefill, FA3 on SM90 (an FP8 query with FP8 KV) and FA2 below; attention writes
    FP8 itself only on SM100 with a quantized KV cache ("XQA does not support FP8 output")."""
    if d.kind == "cpu":
        return [Pick("torch-sdpa")]
    picks = []
    if d.sm in (100, 103):
        picks.append(Pick("trtllm-gen", fused_out=p.kv_dtype == "fp8"))
    elif d.sm == 90 and p.phase == "decode":
        picks.append(Pick("trtllm-xqa"))
    if p.phase == "decode":
        picks += [Pick("fa2-tc"), Pick("fa2")]
    elif d.sm == 90:
        picks += [Pick("fa3"), Pick("fa2")]
    else:
        picks += [Pick("fa2"), Pick("fa3")]
    return picks + [Pick("torch-sdpa")]


RULES: dict[str, Callable[[AttentionProblem, DeviceInfo], list[Pick]]] = {
    "vllm-0.33": vllm_0_33,
    "vllm-2026": vllm_2026,
    "vllm-2025": vllm_2025,
}
DEFAULT_RULE = "vllm-0.33"      # what vLLM runs today; the older rules are kept for history


def rule_pick(rule: str, p: AttentionProblem, d: DeviceInfo, registry: dict[str, KernelSpec],
              candidates: list[Pipeline] | None = None) -> tuple[Pipeline | None, list[str]]:
    """The rule's pipeline for `p` (among `candidates`, the problem's pipelines by default), and why
    each pick before it was passed over; None when no pick of the rule can serve the problem."""
    cands = all_candidates(registry, p, d) if candidates is None else candidates
    notes: list[str] = []
    for pick in RULES[rule](p, d):
        mine = [c for c in cands if c.kernel == pick.kernel]
        if not mine:
            spec = registry.get(pick.kernel)
            why = (ineligibility_reasons(spec, p, d) if spec else ["not in the registry"]) or ["no runnable pipeline"]
            notes.append(f"{pick.kernel}: {'; '.join(why)}")
            continue
        fused = [c for c in mine if c.fused_out_quant == (pick.fused_out and p.out_dtype == "fp8")]
        return (fused or mine)[0], notes
    return None, notes
