"""FlashInfer's FlashAttention kernels: fa2 (CUDA-core decode, fa2 prefill), fa2-tc (tensor-core
decode) and fa3 (Hopper; decode runs as prefill with q_len 1), and cudnn through the same
prefill wrapper. Planned once per problem (plan), run many times (run), graph-capturable; the
rotated copies of one problem's KV cache share one plan (they differ only in the cache tensor)."""
from __future__ import annotations

import re

import torch

from dispatcher.pipeline import Pipeline

from ..inputs import TORCH_DTYPES, PagedInputs
from ._common import (
    WORKSPACE_BYTES,
    FlashInferRunner,
    compose,
    model_dtype,
    no_sinks,
    out_buffers,
    query_step,
    workspace,
)

# FlashInfer names the bytes it lacked: "... allocating memory for batch_prefill_tmp_v with size N ..."
_SHORT = re.compile(r"Buffer overflow when allocating memory for \S+ with size (\d+)")


def planned_with_room(make, plan, device: str):
    """make(workspace) -> wrapper, then plan(wrapper). A plan that needs a larger workspace than the
    shared one (FA2 prefill's split-KV scratch grows with batch x tokens: 1.1 GB at 15 x 3707 tokens,
    benchmarks/results/h200-2026-12-05/) is planned again on a workspace of its own with that room."""
    w = make(workspace(device, "fa"))
    try:
        plan(w)
        return w
    except RuntimeError as e:
        short = _SHORT.search(str(e))
        if short is None:
            raise
        need = int(short.group(1)) * 2 + WORKSPACE_BYTES
    w = make(torch.zeros(need, dtype=torch.uint8, device=device))
    plan(w)
    return w


def _split(pipe: Pipeline) -> dict:
    """plan() keywords for the split-KV tactic; fixed_split_size 0 leaves FlashInfer's own choice."""
    t = pipe.tactic_dict()
    n = int(t.get("fixed_split_size", 0))
    return dict(fixed_split_size=n or None, disable_split_kv=bool(t.get("disable_split_kv", False)))


class PlanOnce(FlashInferRunner):
    """A runner whose `planned(pipe, x)` plans a wrapper and returns, for any rotated copy of `x`,
    the callable running the pipeline on that copy's KV cache."""

    def planned(self, pipe: Pipeline, x: PagedInputs):
        raise NotImplementedError

    def build(self, pipe: Pipeline, x: PagedInputs):
        return self.planned(pipe, x)(x)

    def build_rotated(self, pipe: Pipeline, copies: list[PagedInputs]):
        run_on = self.planned(pipe, copies[0])
        return [run_on(xi) for xi in copies]


class Fa2Decode(PlanOnce):
    kernel, tensor_cores = "fa2", False

    def planned(self, pipe: Pipeline, x: PagedInputs):
        import flashinfer
        no_sinks(x)
        p = x.problem
        kout, post = out_buffers(pipe, x)
        w = planned_with_room(
            lambda ws: flashinfer.BatchDecodeWithPagedKVCacheWrapper(
                ws, "HND", use_cuda_graph=True, use_tensor_cores=self.tensor_cores,
                paged_kv_indptr_buffer=x.kv_indptr, paged_kv_indices_buffer=x.kv_indices,
                paged_kv_last_page_len_buffer=x.last_page_len),
            lambda w: w.plan(x.kv_indptr, x.kv_indices, x.last_page_len, p.num_qo_heads, p.num_kv_heads,
                             p.head_dim, p.page_size, window_left=p.window_left, q_data_type=model_dtype(x),
                             kv_data_type=TORCH_DTYPES[p.kv_dtype], o_data_type=model_dtype(x), sm_scale=x.sm_scale,
                             **_split(pipe)), x.device)
        kv_scales = dict(k_scale=x.k_scale, v_scale=x.v_scale) if p.kv_dtype == "fp8" else {}
        return lambda xi: compose(None, lambda: w.run(x.q, xi.kv_cache, out=kout, **kv_scales), post)


class Fa2TcDecode(Fa2Decode):
    kernel, tensor_cores = "fa2-tc", True


class PagedPrefill(PlanOnce):
    """BatchPrefillWithPagedKVCacheWrapper with one backend; serves decode too (q_len 1)."""

    backend = "fa2"

    def planned(self, pipe: Pipeline, x: PagedInputs):
        import flashinfer
        no_sinks(x)
        p = x.problem
        q, pre, q_scale = query_step(pipe, x)
        kout, post = out_buffers(pipe, x)
        extra = {}
        if self.backend == "cudnn":
            extra = dict(seq_lens=x.seq_lens, seq_lens_q=torch.full_like(x.seq_lens, p.q_len),
                         block_tables=x.page_table, max_token_per_sequence=p.q_len, max_sequence_kv=p.max_kv_len)
        w = planned_with_room(
            lambda ws: flashinfer.BatchPrefillWithPagedKVCacheWrapper(
                ws, "HND", use_cuda_graph=True, qo_indptr_buf=x.qo_indptr, paged_kv_indptr_buf=x.kv_indptr,
                paged_kv_indices_buf=x.kv_indices, paged_kv_last_page_len_buf=x.last_page_len, backend=self.backend),
            lambda w: w.plan(x.qo_indptr, x.kv_indptr, x.kv_indices, x.last_page_len, p.num_qo_heads,
                             p.num_kv_heads, p.head_dim, p.page_size, causal=p.causal, sm_scale=x.sm_scale,
                             window_left=p.window_left, q_data_type=q.dtype, kv_data_type=TORCH_DTYPES[p.kv_dtype],
                             o_data_type=model_dtype(x), **_split(pipe), **extra), x.device)
        scales = {}
        if pipe.q_quant:
            scales["q_scale"] = q_scale
        if p.kv_dtype == "fp8":
            scales.update(k_scale=x.k_scale, v_scale=x.v_scale)
        return lambda xi: compose(pre, lambda: w.run(q, xi.kv_cache, out=kout, **scales), post)


class Fa2(PlanOnce):
    """fa2: CUDA-core decode for decode, the fa2 paged prefill kernel for prefill."""

    kernel = "fa2"

    def planned(self, pipe: Pipeline, x: PagedInputs):
        return (_FA2_DECODE if x.problem.phase == "decode" else _FA2_PREFILL).planned(pipe, x)


class Fa3(PagedPrefill):
    kernel, backend, archs = "fa3", "fa3", (90,)


class Cudnn(PagedPrefill):
    kernel, backend, archs = "cudnn", "cudnn", (90, 100, 103)

    def unavailable(self, device):
        why = super().unavailable(device)
        if why:
            return why
        try:
            import cudnn  # noqa: F401 (nvidia-cudnn-frontend)
        except Exception as e:  # noqa: BLE001
            return f"the cudnn backend needs nvidia-cudnn-frontend ({type(e).__name__}: {e})"
        return None


_FA2_DECODE = Fa2Decode()
_FA2_PREFILL = PagedPrefill()
FA2, FA2_TC, FA3, CUDNN = Fa2(), Fa2TcDecode(), Fa3(), Cudnn()
