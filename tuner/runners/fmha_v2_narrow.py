"""FMHAv2 built with only the kernels the sweep runs.

FlashInfer's FMHAv2 module for one (layout, q dtype, out dtype) generates and compiles every
SM90 warp-specialised variant: 11 head sizes x soft-capping x softmax stats x skip-softmax x ALiBi,
132 kernel files. A cold llama4-scout sweep needs two such modules: 268 of its 350 files, most of
its 8-10 minutes of nvcc on the H200. The runner uses none of those features (no soft cap, no
stats, no skip-softmax, no ALiBi), so the tuner builds the same generator's kernels for the head
size of the problem, without them: one kernel file per module. A kernel is the same generated code in
either module (FlashInfer's dispatch picks it by the same flags), so its timing is what serving
code gets from FlashInfer's full module.

FlashInfer's module getter (flashinfer.prefill.get_trtllm_fmha_v2_module) is replaced in the
tuner's process only (install); anything this cannot narrow (another arch in the build, a
FlashInfer whose generator moved) is handed to the original getter."""
from __future__ import annotations

import functools
import warnings

# the SM90 warp-specialised head sizes FlashInfer's FMHAv2 generator knows (fmha_library.py)
SM90_HEAD_SIZES = (32, 40, 48, 64, 80, 96, 104, 128, 160, 192, 256)
# the variant flags the runner never sets: FlashInfer dispatches on each, so off is one kernel
VARIANT_OFF = dict(enable_skip_softmax=False, return_softmax=False,
                   enable_attn_logit_softcapping=False, alibi=False, is_mla=False, head_size_v=0)
_DTYPE = {"torch.bfloat16": "bf16", "torch.float16": "fp16", "torch.float8_e4m3fn": "e4m3"}

_head_size: int | None = None         # the problem being built or run: which module to hand out
_stock = None


def use_head_size(head_dim: int) -> str | None:
    """Set the head size the next FMHAv2 call needs; the reason when no narrow module has it."""
    global _head_size
    _head_size = head_dim if head_dim in SM90_HEAD_SIZES else None
    return None if _head_size else f"head_dim {head_dim} has no SM90 FMHAv2 kernel (sizes {SM90_HEAD_SIZES})"


def narrow_uri(input_layout: str, q_dtype: str, out_dtype: str, head_size: int) -> str:
    # a name of its own: never mistaken for (or loaded as) FlashInfer's full module
    return f"trtllm_fmha_v2_{input_layout.lower()}_{q_dtype}_{out_dtype}_hd{head_size}"


def install() -> None:
    """Route FlashInfer's FMHAv2 module lookups in this process through the narrow build."""
    global _stock
    import flashinfer.prefill as prefill
    if _stock is None:
        _stock = prefill.get_trtllm_fmha_v2_module
        prefill.get_trtllm_fmha_v2_module = _get_module


def _get_module(input_layout, input_dtype, output_dtype=None):
    return _narrow_or_stock(input_layout, input_dtype, output_dtype, _head_size)


@functools.cache
def _narrow_or_stock(input_layout, input_dtype, output_dtype, head_size):
    spec = narrow_spec(input_layout, input_dtype, output_dtype, head_size) if head_size else None
    if spec is None:
        return _stock(input_layout, input_dtype, output_dtype)
    try:
        return spec.build_and_load()
    except RuntimeError as e:             # nvcc or ninja failed on the generated subset
        warnings.warn(f"FMHAv2 narrow module {spec.name} did not build ({e}); using FlashInfer's "
                      "full module, which compiles all 132 kernels", stacklevel=2)
        return _stock(input_layout, input_dtype, output_dtype)


def narrow_spec(input_layout, input_dtype, output_dtype, head_size):
    """FlashInfer's JitSpec holding the one plain kernel for `head_size`; None where it cannot be narrow."""
    try:
        return _spec(input_layout, input_dtype, output_dtype, head_size)
    except (ImportError, AttributeError, TypeError, KeyError):
        return None                       # a FlashInfer whose generator moved, a dtype it lacks


def _spec(input_layout, input_dtype, output_dtype, head_size):
    try:
        from flashinfer.jit import env as jit_env
        from flashinfer.jit.attention.fmha_v2 import fmha_library as lib
        from flashinfer.jit.core import current_compilation_context as ctx
        from flashinfer.jit.core import gen_jit_spec
        from flashinfer.jit.utils import write_if_different
    except ImportError:
        return None
    if {major for major, _ in ctx.TARGET_CUDA_ARCHS} != {9}:
        return None                       # SM120's kernels come from another list: the full module
    q = _DTYPE[str(input_dtype)]
    # FlashInfer names and builds a BF16-query module with its output dtype = the query's
    out = _DTYPE[str(output_dtype if output_dtype is not None else input_dtype)]
    uri = narrow_uri(input_layout, q, out, head_size)
    if "paged" not in input_layout.lower():
        return None                       # the runner's layout only; others keep the full module
    gen = jit_env.FLASHINFER_GEN_SRC_DIR / uri
    gen.mkdir(parents=True, exist_ok=True)
    layout = lib.InputLayout.Q_PAGED_KV
    kspec = lib.generate_kernel_spec(sm=90, head_size=head_size, dtype=q, input_layout=layout,
                                     output_dtype=out, **VARIANT_OFF)
    fname, lname, kname = lib.encode_name(kspec)
    code = lib.get_kernel_code(kspec, kname, lname) if lib.is_kernel_spec_valid(kspec) else None
    if code is None:
        return None
    write_if_different(gen / fname, code)
    write_if_different(gen / "fmha_v2_api.h", lib.get_api_code([(kspec, fname, lname, kname)]))
    sources = [gen / fname]
    for static in ("fmha_v2_run.cu", "fmha_v2_jit_binding.cu"):
        write_if_different(gen / static, (jit_env.FLASHINFER_CSRC_DIR / static).read_text())
        sources.append(gen / static)
    flags = ctx.get_nvcc_flags_list(supported_major_versions=[9])
    flags += [f"-I{jit_env.FLASHINFER_CSRC_DIR / 'fmha_v2'}", f"-I{gen}",
              f"-I{jit_env.FLASHINFER_INCLUDE_DIR}", "-Wno-deprecated-gpu-targets"]
    return gen_jit_spec(uri, sources, extra_cuda_cflags=flags)
