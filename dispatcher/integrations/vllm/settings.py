"""What the plugin reads from the environment: where the measurements are, and what decode batches to
expect where a CUDA graph fixes the kernel before any real batch is seen."""
from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

from ...cells import longest_request
from ...problem import LIMITS

ENV_DB = "SWITCHYARD_DB"                    # the database; unset: the entry point does nothing
ENV_DEVICE = "SWITCHYARD_DEVICE"            # a device name in the database; unset: this host's GPU
ENV_DECODE_KV_LEN = "SWITCHYARD_DECODE_KV_LEN"   # expected mean KV length of a decode request
ENV_DECODE_SKEW = "SWITCHYARD_DECODE_SKEW"       # expected longest / mean KV length in a decode batch
ENV_FIXED_SPLIT = "SWITCHYARD_FIXED_SPLIT"       # 0: never plan vLLM's native decode with a fixed split
DEFAULT_DECODE_KV_LEN = 2048
DEFAULT_DECODE_SKEW = 1.0                   # uniform batches: vLLM's own assumption


@dataclass(frozen=True)
class Settings:
    db: str | None = None
    device: str | None = None
    decode_kv_len: int = DEFAULT_DECODE_KV_LEN
    decode_skew: float = DEFAULT_DECODE_SKEW
    fixed_split: bool = True                # per step, a fixed split-KV plan where measured faster

    def __post_init__(self) -> None:
        lo, hi = LIMITS["kv_len"]           # what a problem's kv_len may be, so a capture never meets a bad one
        if not lo <= self.decode_kv_len <= hi:
            raise ValueError(f"decode_kv_len ({ENV_DECODE_KV_LEN}) {self.decode_kv_len} must be a whole number from "
                             f"{lo} to {hi}")
        if not 1.0 <= self.decode_skew <= hi / self.decode_kv_len:
            raise ValueError(f"decode_skew ({ENV_DECODE_SKEW}) {self.decode_skew} must be from 1 (the longest request "
                             f"over the mean) to {hi / self.decode_kv_len:g} (a longest request of {hi} tokens)")

    @classmethod
    def from_env(cls, env: Mapping[str, str] = os.environ) -> Settings:
        return cls(db=env.get(ENV_DB) or None, device=env.get(ENV_DEVICE) or None,
                   decode_kv_len=int(_number(env, ENV_DECODE_KV_LEN, DEFAULT_DECODE_KV_LEN, whole=True)),
                   decode_skew=_number(env, ENV_DECODE_SKEW, DEFAULT_DECODE_SKEW),
                   fixed_split=_switch(env, ENV_FIXED_SPLIT, True))

    def expected_decode(self, batch_size: int) -> tuple[int, int]:
        """(mean, longest) KV length of a decode batch of this size, as configured; the longest is at most
        the most a batch of this size allows (its others one token each), as a batch of two may be asked."""
        mean = self.decode_kv_len
        return mean, min(round(mean * self.decode_skew), longest_request(max(batch_size, 1), mean, 1))


def _number(env: Mapping[str, str], name: str, default: float, whole: bool = False) -> float:
    raw = env.get(name)
    if not raw:
        return default
    try:
        return int(raw) if whole else float(raw)
    except ValueError:
        raise ValueError(f"{name}={raw!r} is not a {'whole number' if whole else 'number'}") from None


def _switch(env: Mapping[str, str], name: str, default: bool) -> bool:
    raw = env.get(name, "").strip().lower()
    if not raw:
        return default
    if raw in ("0", "1", "false", "true", "off", "on"):
        return raw in ("1", "true", "on")
    raise ValueError(f"{name}={raw!r} is not a switch; use 1 or 0")
