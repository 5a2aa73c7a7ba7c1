"""TRT-LLM context kernels: trtllm-fmha-v2 (Hopper FMHAv2 prefill) and trtllm-gen (Blackwell).

trtllm-gen is written to FlashInfer's documented API but was never run here: it is SM100/SM103
only and downloads its cubins at run time."""
from __future__ import annotations

import torch

from dispatcher.pipeline import Pipeline

from ..inputs import PagedInputs
from . import fmha_v2_narrow
from ._common import FlashInferRunner, compose, no_sinks, out_buffers, query_step, workspace


def _cum_kv(x: PagedInputs) -> torch.Tensor:
    """Where each request's keys start in the batch's keys: the running sum of their lengths."""
    return torch.cumsum(torch.tensor((0, *x.lens), dtype=torch.int32), 0, dtype=torch.int32).to(x.q.device)


def _io(pipe: Pipeline, x: PagedInputs):
    """What both TRT-LLM context paths share: the query step, the output, and the fused scales
    (bmm2_scale = v_scale / o_scale when the kernel writes FP8 itself)."""
    no_sinks(x)
    q, pre, q_scale = query_step(pipe, x)
    kout, post = out_buffers(pipe, x)
    o_scale = x.o_scale if pipe.fused_out_quant else 1.0
    return q, pre, kout, post, q_scale * x.k_scale * x.sm_scale, x.v_scale / o_scale


class FmhaV2(FlashInferRunner):
    kernel, archs = "trtllm-fmha-v2", (90, 120, 121)

    def build(self, pipe: Pipeline, x: PagedInputs):
        from flashinfer.prefill import trtllm_fmha_v2_prefill
        fmha_v2_narrow.install()    # one kernel per module built, not FlashInfer's 132
        p = x.problem
        q, pre, kout, post, bmm1, bmm2 = _io(pipe, x)
        ws, cum_kv = workspace(x.device, "fmha"), _cum_kv(x)
        mask = "sliding_window" if p.window_left >= 0 else ("causal" if p.causal else "padding")

        def kernel():
            fmha_v2_narrow.use_head_size(p.head_dim)    # which narrow module FlashInfer's lookup gets
            return trtllm_fmha_v2_prefill(
                (q, x.kv_cache), "Q_PAGED_KV_HND", ws, x.seq_lens, p.q_len, p.max_kv_len,
                bmm1_scale=bmm1, bmm2_scale=bmm2, batch_size=p.batch_size, cum_seq_lens_q=x.qo_indptr,
                cum_seq_lens_kv=cum_kv,
                block_tables=x.page_table, out=kout, out_dtype=kout.dtype, mask_mode=mask,
                window_left=p.window_left)
        return compose(pre, kernel, post)


class TrtllmGen(FlashInferRunner):
    kernel, archs = "trtllm-gen", (100, 103)

    def build(self, pipe: Pipeline, x: PagedInputs):
        from flashinfer.decode import trtllm_batch_decode_with_kv_cache
        from flashinfer.prefill import trtllm_batch_context_with_kv_cache
        p = x.problem
        q, pre, kout, post, bmm1, bmm2 = _io(pipe, x)
        ws = workspace(x.device, "trtllm-gen")
        pdl = bool(pipe.tactic_dict().get("enable_pdl", True))
        if p.phase == "decode":
            def kernel():
                return trtllm_batch_decode_with_kv_cache(
                    q, x.kv_cache, ws, x.page_table, x.seq_lens, p.max_kv_len, bmm1_scale=bmm1, bmm2_scale=bmm2,
                    window_left=p.window_left, out=kout, out_dtype=kout.dtype, kv_layout="HND",
                    enable_pdl=pdl, backend="trtllm-gen")
        else:
            cum_kv = _cum_kv(x)

            def kernel():
                return trtllm_batch_context_with_kv_cache(
                    q, x.kv_cache, ws, x.page_table, x.seq_lens, p.q_len, p.max_kv_len, bmm1, bmm2,
                    p.batch_size, x.qo_indptr, cum_kv, window_left=p.window_left, out=kout,
                    out_dtype=kout.dtype, kv_layout="HND", enable_pdl=pdl, causal=p.causal)
        return compose(pre, kernel, post)


FMHA_V2, TRTLLM_GEN = FmhaV2(), TrtllmGen()
