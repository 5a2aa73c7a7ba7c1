"""trtllm-xqa: TRT-LLM XQA decode through flashinfer.decode.trtllm_batch_decode_with_kv_cache.

Scales: XQA derives kv_scale = bmm2_scale * o_scale and q_scale = bmm1_scale / kv_scale * sqrt(d),
so with FP8 output bmm2_scale = v_scale / o_scale (shared/gpu/README.md)."""
from __future__ import annotations

from dispatcher.pipeline import Pipeline

from ..inputs import PagedInputs
from ._common import FlashInferRunner, compose, no_sinks, out_buffers, workspace


class Xqa(FlashInferRunner):
    kernel = "trtllm-xqa"
    archs = (90, 120, 121)

    def build(self, pipe: Pipeline, x: PagedInputs):
        from flashinfer.decode import trtllm_batch_decode_with_kv_cache
        no_sinks(x)
        p = x.problem
        kout, post = out_buffers(pipe, x)
        o_scale = x.o_scale if pipe.fused_out_quant else 1.0
        ws = workspace(x.device, "xqa")
        pdl = bool(pipe.tactic_dict().get("enable_pdl", True))

        def kernel():
            return trtllm_batch_decode_with_kv_cache(
                x.q, x.kv_cache, ws, x.page_table, x.seq_lens, p.max_kv_len,
                bmm1_scale=x.k_scale * x.sm_scale, bmm2_scale=x.v_scale / o_scale, window_left=p.window_left,
                out=kout, out_dtype=kout.dtype, kv_layout="HND", enable_pdl=pdl, backend="xqa", o_scale=o_scale)
        return compose(None, kernel, post)


RUNNER = Xqa()
