"""torch-sdpa: PyTorch scaled_dot_product_attention over KV gathered from the paged cache.

Runs anywhere torch does; the gather (and FP8 dequant) is part of what is timed, as it would be in a
serving engine that used SDPA on a paged cache."""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from dispatcher.device import DeviceInfo
from dispatcher.pipeline import Pipeline

from ..inputs import TORCH_DTYPES, PagedInputs, allowed_keys
from ..quant import quantize_fp8

BACKENDS = {"flash": SDPBackend.FLASH_ATTENTION, "efficient": SDPBackend.EFFICIENT_ATTENTION,
            "cudnn": SDPBackend.CUDNN_ATTENTION, "math": SDPBackend.MATH}


class TorchSdpa:
    kernel = "torch-sdpa"

    def unavailable(self, device: DeviceInfo) -> str | None:
        return None

    def build(self, pipe: Pipeline, x: PagedInputs):
        p = x.problem
        name = pipe.tactic_dict().get("backend", "flash")
        backend = BACKENDS[name]
        model_dtype = TORCH_DTYPES[p.q_dtype if p.q_dtype != "fp8" else "bf16"]
        # every request padded to the longest: a mixed batch masks each one's keys past its own length
        B, Lq, L, H, Hkv, D = p.batch_size, p.q_len, p.max_kv_len, p.num_qo_heads, p.num_kv_heads, p.head_dim
        table = x.page_table.long()
        mixed = len(set(x.lens)) > 1
        mask = None
        needs_mask = p.window_left >= 0 or (p.causal and Lq > 1) or mixed
        if needs_mask:
            if name == "flash" and x.q.is_cuda:   # said before the gather: SDPA's own error names no reason
                raise ValueError("torch-sdpa[backend=flash] on CUDA takes no attention mask; this problem needs "
                                 "one (causal with a cached prefix, a sliding window, or requests of mixed lengths)")
            mask = request_masks(x) if mixed else allowed_keys(p, torch.arange(L - Lq, L, device=x.q.device),
                                                                 x.q.device)   # causal from the bottom right
        # the efficient backend has no enable_gqa: it gets the KV heads repeated in the gather instead
        repeat = p.group_size if name == "efficient" and H != Hkv else 1
        out_fp8 = torch.empty((B * Lq, H, D), dtype=torch.float8_e4m3fn, device=x.q.device) if pipe.out_quant else None

        def kv(which: int) -> torch.Tensor:
            pages = x.kv_cache[:, which][table]                           # [B, P, Hkv, page, D]
            t = pages.permute(0, 2, 1, 3, 4).reshape(B, Hkv, -1, D)[:, :, :L]
            if repeat > 1:
                t = t.repeat_interleave(repeat, dim=1)
            if p.kv_dtype == "fp8":
                t = t.to(model_dtype) * (x.k_scale if which == 0 else x.v_scale)
            return t

        def run() -> torch.Tensor:
            q = x.q.view(B, Lq, H, D).transpose(1, 2)
            with sdpa_kernel(backend):
                o = F.scaled_dot_product_attention(q, kv(0), kv(1), attn_mask=mask, scale=x.sm_scale,
                                                   enable_gqa=H != Hkv and repeat == 1)
            o = o.transpose(1, 2).reshape(B * Lq, H, D)
            return quantize_fp8(o, x.o_scale, out_fp8) if out_fp8 is not None else o

        return run


def request_masks(x: PagedInputs) -> torch.Tensor:
    """[batch, 1, q_len, longest] bool: each request's allowed keys within its own length (its new
    tokens at its own end), in one pass over the whole batch."""
    p, dev = x.problem, x.q.device
    lens = torch.tensor(x.lens, device=dev)
    pos = (lens[:, None] - p.q_len + torch.arange(p.q_len, device=dev)).flatten()
    keys = allowed_keys(p, pos, dev, p.max_kv_len).view(p.batch_size, 1, p.q_len, p.max_kv_len)
    return keys & (torch.arange(p.max_kv_len, device=dev) < lens[:, None, None, None])


RUNNER = TorchSdpa()
