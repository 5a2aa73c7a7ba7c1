"""The grid of problems a sweep measures: model geometry x dtypes x page sizes x sizes."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from dispatcher.cells import longest_request
from dispatcher.mixed_residual import CORRECTING_KV_DTYPES
from dispatcher.problem import AttentionProblem

from .models import ModelPreset
from .sizes import kv_bytes
from .tiles import tile_sizes


def pow2_range(lo: int, hi: int) -> list[int]:
    out, v = [], lo
    while v <= hi:
        out.append(v)
        v *= 2
    return out


@dataclass(frozen=True)
class SizeGrid:
    decode_batch: tuple[int, ...]
    decode_kv: tuple[int, ...]
    prefill_batch: tuple[int, ...]
    prefill_q: tuple[int, ...]
    prefill_prefix_factor: tuple[int, ...]   # kv_len = q_len * factor (1: no cached prefix)
    max_prefill_kv: int
    max_tokens: int                          # batch * q_len cap for prefill
    # decode's longest request over the mean (1: uniform batches only); each within what the batch
    # allows and with the longest request at most the largest decode_kv (tuner/lengths.py lays them out)
    decode_skew: tuple[int, ...] = (1,)
    # the KV dtypes whose decode gets that axis: the model leaves a BF16 or FP16 cache's measured mixed batches
    # out (PredictorConfig.mixed_residual_16bit_kv), so measuring them would only cost sweep time
    skew_kv_dtypes: tuple[str, ...] = CORRECTING_KV_DTYPES


FULL = SizeGrid(decode_batch=tuple(pow2_range(1, 512)), decode_kv=tuple(pow2_range(128, 131072)),
                prefill_batch=(1, 4, 16), prefill_q=(128, 512, 2048, 8192),
                prefill_prefix_factor=(1, 4), max_prefill_kv=32768, max_tokens=32768)
# FULL's decode with the half-octave points between (batch 1.5 x 2^k, KV 2^(k+1/2), each on the decision
# lattice of dispatcher.problem): 3.4x the decode points, for `--search adaptive` to choose from
DENSE = SizeGrid(decode_batch=tuple(sorted({*pow2_range(1, 512), *(3 * b for b in pow2_range(1, 128))})),
                 decode_kv=tuple(sorted({*pow2_range(128, 131072), *(round(2 ** (k + 0.5)) for k in range(7, 17))})),
                 prefill_batch=(1, 2, 4, 8, 16), prefill_q=(128, 256, 512, 1024, 2048, 4096, 8192),
                 prefill_prefix_factor=(1, 2, 4), max_prefill_kv=32768, max_tokens=32768)
# FULL with decode's skew axis for FP8 KV: mixed-length batches, one long request among short ones (3.3x
# an FP8 configuration's decode points: for --search adaptive, see docs/mixed-batches.md)
MIXED = dataclasses.replace(FULL, decode_skew=(1, 2, 4, 8, 16, 32))
# small enough that a CPU sweep of llama4-scout takes under two minutes on two cores
QUICK = SizeGrid(decode_batch=(1, 4, 16), decode_kv=(128, 512), prefill_batch=(1,), prefill_q=(64, 256),
                 prefill_prefix_factor=(1, 4), max_prefill_kv=1024, max_tokens=256)


def sizes(phase: str, g: SizeGrid, kv_dtype: str = "fp8") -> list[tuple[int, int, int, int]]:
    """(batch_size, q_len, kv_len, max_kv_len) of every grid point for a KV cache of `kv_dtype`: kv_len is
    the mean per request."""
    if phase == "decode":
        top = max(g.decode_kv)
        skews = g.decode_skew if kv_dtype in g.skew_kv_dtypes else (1,)
        return [(b, 1, kv, kv * s) for s in skews for b in g.decode_batch for kv in g.decode_kv
                if kv * s <= min(top, longest_request(b, kv, 1))]
    out = []
    for b in g.prefill_batch:
        for q in g.prefill_q:
            for f in g.prefill_prefix_factor:
                if q * f <= g.max_prefill_kv and b * q <= g.max_tokens:
                    out.append((b, q, q * f, q * f))
    return out


def problems(model: ModelPreset, tps: list[int], phases: list[str], kv_dtypes: list[str],
             out_dtypes: list[str], page_sizes: list[int], grid: SizeGrid, q_dtype: str = "",
             max_kv_bytes: int | None = None, tiles_sms: int = 0) -> list[AttentionProblem]:
    """The grid, most useful first (first page size and TP before the others), so a sweep cut short
    by --max-minutes still covers whole configurations. `max_kv_bytes` drops problems whose one-layer
    KV cache could not be held by the GPU alongside the model's other layers. `tiles_sms`: also each
    configuration's tile sizes (tuner/tiles.py) for a GPU of that many SMs, after its grid points."""

    out = []
    for page in page_sizes:
        for tp in tps:
            hq, hkv = model.heads(tp)
            for phase in phases:
                for kv in kv_dtypes:
                    for o in out_dtypes:
                        at = sizes(phase, grid, kv)
                        if tiles_sms:
                            on_grid = set(at)
                            at += [t for t in tile_sizes(phase, hkv, tiles_sms) if t not in on_grid]
                        for b, q, L, top in at:
                            p = AttentionProblem(
                                phase=phase, num_qo_heads=hq, num_kv_heads=hkv, head_dim=model.head_dim,
                                page_size=page, batch_size=b, q_len=q, kv_len=L, max_kv_len=top, q_dtype=q_dtype,
                                kv_dtype=kv, out_dtype=o, window_left=model.window_left,
                                has_sinks=model.has_sinks)
                            if max_kv_bytes is None or kv_bytes(p) <= max_kv_bytes:
                                out.append(p)
    return out
