"""What the GPU runners share: workspaces, the q-quant and out-quant steps, dtype mapping."""
from __future__ import annotations

from functools import cache, lru_cache

import torch

from dispatcher.device import DeviceInfo
from dispatcher.pipeline import Pipeline

from ..inputs import TORCH_DTYPES, PagedInputs
from ..quant import quantize_fp8

WORKSPACE_BYTES = 256 * 2**20


@cache
def workspace(device: str, purpose: str) -> torch.Tensor:
    """One zero-filled workspace per purpose: XQA keeps semaphores in its first 8 MiB, which must
    start at zero and must not be shared with kernels that scribble on their workspace."""
    return torch.zeros(WORKSPACE_BYTES, dtype=torch.uint8, device=device)


@lru_cache(maxsize=1)
def flashinfer_missing() -> str | None:
    try:
        import flashinfer  # noqa: F401
    except Exception as e:  # noqa: BLE001
        return (f"flashinfer-python is not importable ({type(e).__name__}: {e}); "
                "install the cuda extra: pip install -e '.[cuda]'")
    return None


class FlashInferRunner:
    """Base for runners of FlashInfer kernels: CUDA and an importable flashinfer."""

    kernel = ""
    archs: tuple[int, ...] | None = None

    def unavailable(self, device: DeviceInfo) -> str | None:
        if device.kind != "cuda":
            return f"{self.kernel} needs a CUDA device"
        if self.archs and device.sm not in self.archs:
            archs = ", ".join(f"SM{a}" for a in self.archs)
            return f"{self.kernel} runs on {archs} only; {device.name} is SM{device.sm}"
        return flashinfer_missing()


def model_dtype(x: PagedInputs) -> torch.dtype:
    return TORCH_DTYPES[x.problem.q_dtype if x.problem.q_dtype != "fp8" else "bf16"]


def query_step(pipe: Pipeline, x: PagedInputs):
    """(the query the kernel reads, a step producing it, its scale). The q-quant op is one kernel."""
    if not pipe.q_quant:
        return x.q, None, 1.0
    q8 = torch.empty_like(x.q, dtype=torch.float8_e4m3fn)
    return q8, (lambda: quantize_fp8(x.q, x.q_scale, q8)), x.q_scale


def out_buffers(pipe: Pipeline, x: PagedInputs):
    """(the kernel's output buffer, the final step: separate out-quant when the pipeline has one)."""
    kdt = torch.float8_e4m3fn if pipe.fused_out_quant else model_dtype(x)
    kout = torch.empty(x.q.shape, dtype=kdt, device=x.q.device)
    if not pipe.out_quant:
        return kout, lambda o: o
    o8 = torch.empty(x.q.shape, dtype=torch.float8_e4m3fn, device=x.q.device)
    return kout, lambda o: quantize_fp8(o, x.o_scale, o8)


def compose(pre, kernel, post):
    if pre is None:
        return lambda: post(kernel())

    def run():
        pre()
        return post(kernel())
    return run


def no_sinks(x: PagedInputs) -> None:
    if x.problem.has_sinks:
        raise NotImplementedError("attention sinks are not measured yet (the fp32 reference has none)")
