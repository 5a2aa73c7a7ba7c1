"""Sizes off the grid's powers of two where kernels change pace with the hardware: `tuner sweep --tiles`.

- Decode within one wave of CTAs (batch x KV heads <= the SM count) and just past it (1.15-1.7 waves) at short
  KV, where XQA's time steps between the grid's KV lengths and the model read it 5-12% off on an H100 and an
  H200 (benchmarks/results/decode-tiles/bias.txt, bias-band.txt).
- Prefill queries below, just past and between the first multiples of 128 rows, without and after a cached
  prefix of 3x the query: FA3, FMHAv2 and cuDNN run 128-row query tiles (benchmarks/results/prefill-tiles/).
Measured as grid rows, the decode sizes took an H100's off-grid sets from 1.0036-1.0043 to 1.0025-1.0026 pooled
on two report seeds (benchmarks/results/h100-2026-12-07g-tiles/); the shipped table holds the prefill sizes.
"""
from __future__ import annotations

DECODE_BATCHES = (1, 3, 6, 12, 24, 48)            # those within one wave are measured
DECODE_KV = (272, 320, 384, 448, 576, 704)
BAND_WAVES = (1.15, 1.4, 1.7)
BAND_KV = (272, 384, 576, 704, 1400, 2800)
PREFILL_BATCHES = (1, 2, 4, 8, 16)
PREFILL_Q = (100, 129, 160, 192, 257, 320, 385, 768)
PREFILL_PREFIX_FACTORS = (1, 4)                   # kv_len = q_len x factor, as the grid's


def wave_batches(kv_heads: int, sms: int, waves: tuple[float, ...]) -> list[int]:
    """The batch sizes making `waves` waves of one CTA per KV head, each once and at least 1."""
    return list(dict.fromkeys(max(1, round(w * sms / kv_heads)) for w in waves))


def decode_sizes(kv_heads: int, sms: int, waves: tuple[float, ...] = (),
                 kv_lens: tuple[int, ...] = DECODE_KV) -> list[tuple[int, int]]:
    """(batch, kv_len): DECODE_BATCHES within one wave, or with `waves` the batches making those waves."""
    batches = wave_batches(kv_heads, sms, waves) if waves else [b for b in DECODE_BATCHES if b * kv_heads <= sms]
    return [(b, kv) for b in batches for kv in kv_lens]


def prefill_sizes(batches: tuple[int, ...] = PREFILL_BATCHES,
                  q_lens: tuple[int, ...] = PREFILL_Q) -> list[tuple[int, int, int]]:
    """(batch, q_len, kv_len) without and after a cached prefix."""
    return [(b, q, q * f) for b in batches for q in q_lens for f in PREFILL_PREFIX_FACTORS]


def tile_sizes(phase: str, kv_heads: int, sms: int) -> list[tuple[int, int, int, int]]:
    """(batch_size, q_len, kv_len, max_kv_len) of `tuner sweep --tiles`' sizes for one configuration, as
    tuner.grid.sizes gives the grid's: uniform batches."""
    if phase == "decode":
        pairs = decode_sizes(kv_heads, sms) + decode_sizes(kv_heads, sms, BAND_WAVES, BAND_KV)
        return [(b, 1, kv, kv) for b, kv in dict.fromkeys(pairs)]
    return [(b, q, kv, kv) for b, q, kv in prefill_sizes()]
