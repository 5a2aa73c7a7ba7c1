"""FlashInfer's CUDA-graph plan with a fixed split-KV size refuses exactly where
dispatcher.registry.graph_split_chunks says it does (the lent H200: pytest -m gpu tests/gpu), so the
dispatcher never picks a tactic the serving engine's plan would refuse, and keeps it where it plans."""
import pytest
import torch

from dispatcher import AttentionProblem, load_registry
from dispatcher.registry import tactic_reasons
from tuner.runners.flashinfer_fa import planned_with_room

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")]

REG = load_registry()
FIXED = {"fixed_split_size": 1024}


def scout(heads: int, **sizes) -> AttentionProblem:
    return AttentionProblem(num_qo_heads=5 * heads, num_kv_heads=heads, head_dim=128, page_size=16, **sizes)


# (problem, refused): each pair either side of the plan's limit
CASES = [
    (scout(8, phase="decode", batch_size=4, kv_len=131072), False),      # 32 chunks of 33
    (scout(8, phase="decode", batch_size=5, kv_len=131072), True),       # 40
    (scout(8, phase="decode", batch_size=16, kv_len=32768), False),      # 32
    (scout(8, phase="decode", batch_size=17, kv_len=32768), True),       # 34
    (scout(2, phase="decode", batch_size=16, kv_len=131072), False),     # 128 of 132
    (scout(2, phase="decode", batch_size=17, kv_len=131072), True),      # 136
    (scout(8, phase="prefill", batch_size=2, q_len=2048, kv_len=2048), False),    # 160 of 161
    (scout(8, phase="prefill", batch_size=2, q_len=2048, kv_len=20000), True),    # 320
]


def indptr(p: AttentionProblem, device):
    pages = -(-p.kv_len // p.page_size)
    kv_indptr = torch.arange(p.batch_size + 1, dtype=torch.int32, device=device) * pages
    kv_indices = torch.arange(p.batch_size * pages, dtype=torch.int32, device=device)
    last = torch.full((p.batch_size,), p.kv_len - (pages - 1) * p.page_size, dtype=torch.int32, device=device)
    qo_indptr = torch.arange(p.batch_size + 1, dtype=torch.int32, device=device) * p.q_len
    return qo_indptr, kv_indptr, kv_indices, last


def plan(p: AttentionProblem, device: str) -> None:
    """FlashInfer's own plan in CUDA-graph mode with a fixed split of 1024 pages, as the runners make it."""
    import flashinfer
    qo, kv, idx, last = indptr(p, device)
    bf16 = torch.bfloat16
    if p.phase == "decode":
        planned_with_room(
            lambda ws: flashinfer.BatchDecodeWithPagedKVCacheWrapper(
                ws, "HND", use_cuda_graph=True, use_tensor_cores=True, paged_kv_indptr_buffer=kv,
                paged_kv_indices_buffer=idx, paged_kv_last_page_len_buffer=last),
            lambda w: w.plan(kv, idx, last, p.num_qo_heads, p.num_kv_heads, p.head_dim, p.page_size,
                             q_data_type=bf16, kv_data_type=bf16, o_data_type=bf16, fixed_split_size=1024), device)
    else:
        planned_with_room(
            lambda ws: flashinfer.BatchPrefillWithPagedKVCacheWrapper(
                ws, "HND", use_cuda_graph=True, qo_indptr_buf=qo, paged_kv_indptr_buf=kv,
                paged_kv_indices_buf=idx, paged_kv_last_page_len_buf=last, backend="fa2"),
            lambda w: w.plan(qo, kv, idx, last, p.num_qo_heads, p.num_kv_heads, p.head_dim, p.page_size,
                             causal=True, q_data_type=bf16, kv_data_type=bf16, o_data_type=bf16,
                             fixed_split_size=1024), device)
    torch.cuda.synchronize()


@pytest.mark.parametrize("p, refused", CASES, ids=lambda c: c.describe() if isinstance(c, AttentionProblem) else "")
def test_flashinfer_refuses_a_fixed_split_plan_exactly_where_the_registry_says(device, p, refused):
    spec = REG["fa2-tc" if p.phase == "decode" else "fa2"]
    assert bool(tactic_reasons(spec, FIXED, p, device)) == refused
    if refused:
        with pytest.raises(RuntimeError, match="should not exceed padded batch size"):
            plan(p, "cuda")
    else:
        plan(p, "cuda")
