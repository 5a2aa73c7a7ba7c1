"""Model presets as data: the attention geometry a sweep needs, per GPU after tensor parallelism."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ModelPreset:
    name: str
    num_qo_heads: int
    num_kv_heads: int
    head_dim: int
    num_layers: int
    window_left: int = -1        # sliding window on some layers (-1: none)
    has_sinks: bool = False
    chunked_local: int = 0       # chunked local attention span on some layers (0: none)
    default_tps: tuple[int, ...] = (1,)
    notes: str = ""

    def heads(self, tp: int) -> tuple[int, int]:
        """(q heads, kv heads) on one GPU at tensor-parallel size `tp`; KV heads replicate below 1."""
        if self.num_qo_heads % tp:
            raise ValueError(f"tp {tp} does not divide {self.name}'s {self.num_qo_heads} query heads; "
                             f"use a tp in {[t for t in (1, 2, 4, 8, 16) if self.num_qo_heads % t == 0]}")
        return self.num_qo_heads // tp, max(1, self.num_kv_heads // tp)


PRESETS = {p.name: p for p in (
    ModelPreset("llama4-scout", 40, 8, 128, 48, chunked_local=8192, default_tps=(1, 4),
                notes="Llama-4-Scout-17B-16E: 3 of every 4 layers use chunked local attention over 8192 "
                      "tokens (NoPE layers attend globally), so KV beyond 8192 matters for 1 layer in 4."),
    ModelPreset("llama-3.1-8b", 32, 8, 128, 32),
    ModelPreset("llama-3.3-70b", 64, 8, 128, 80),
    ModelPreset("qwen3-32b", 64, 8, 128, 64),
    ModelPreset("gpt-oss-120b", 64, 8, 64, 36, window_left=127, has_sinks=True,
                notes="gpt-oss-120b: attention sinks on every layer; alternating layers use a 128-token "
                      "sliding window."),
)}


def preset(name: str) -> ModelPreset:
    try:
        return PRESETS[name]
    except KeyError:
        raise ValueError(f"model {name!r} is not a preset; use one of {', '.join(PRESETS)}") from None
