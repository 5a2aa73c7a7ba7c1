"""Static per-tensor FP8 (e4m3) quantization as one kernel, the way a serving engine fuses it.

On CUDA a single Triton kernel (scale, clamp, cast); on the CPU the torch ops (the CPU has no
fused alternative, and only CPU kernels compete with it there)."""
from __future__ import annotations

from functools import lru_cache

import torch

FP8_MAX = 448.0


@lru_cache(maxsize=1)
def _triton_kernel():
    import triton
    import triton.language as tl

    @triton.jit
    def quant_kernel(x_ptr, y_ptr, inv_scale, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        m = offs < n
        v = tl.load(x_ptr + offs, mask=m).to(tl.float32) * inv_scale
        v = tl.minimum(tl.maximum(v, -448.0), 448.0)
        tl.store(y_ptr + offs, v.to(tl.float8e4nv), mask=m)

    return triton, quant_kernel


def quantize_fp8(x: torch.Tensor, scale: float, out: torch.Tensor | None = None) -> torch.Tensor:
    """x / scale, clamped to e4m3's range, as float8_e4m3fn. `out` lets a graph reuse its buffer."""
    y = out if out is not None else torch.empty_like(x, dtype=torch.float8_e4m3fn)
    if x.is_cuda:
        triton, kernel = _triton_kernel()
        n = x.numel()
        kernel[(triton.cdiv(n, 4096),)](x.contiguous(), y, 1.0 / scale, n, BLOCK=4096)
        return y
    y.copy_((x.float() * (1.0 / scale)).clamp_(-FP8_MAX, FP8_MAX))
    return y
