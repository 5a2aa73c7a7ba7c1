"""Switchyard's side of the plugin: the dispatcher (loaded on first use, never on import), its decisions,
and why each vLLM decision point answered as it did (`reasons()`, also logged once per point)."""
from __future__ import annotations

import contextvars
import dataclasses
import logging
from pathlib import Path
from typing import Any

from ...decision import Decision
from ...dispatch import Dispatcher, load
from ...problem import AttentionProblem
from ...registry import KernelSpec, load_registry
from .settings import Settings

log = logging.getLogger("vllm.switchyard")      # a child of vLLM's logger: shown in vLLM's own log
REASONS_LIMIT = 1024                            # distinct decision points remembered
# the metadata builder whose build() is running: prefill decisions need its head_dim and page size,
# which vLLM does not pass to use_trtllm_attention
active_builder: contextvars.ContextVar[Any] = contextvars.ContextVar("switchyard_active_builder", default=None)

# the kernels vLLM 0.33's FlashInfer backend runs, with the knob values it runs them with (it never sets
# a fixed split or disables split-KV, batch invariance aside), and without query quantization: the plugin
# decides only where vLLM's query is in the model's dtype (decode on XQA GPUs, prefill's automatic case)
VLLM_KERNELS = ("trtllm-xqa", "trtllm-gen", "fa2-tc", "fa3", "fa2")
VLLM_KNOBS = {"fixed_split_size": (0,), "disable_split_kv": (False,)}
# a decode step outside a FULL CUDA graph plans vLLM's native wrapper afresh, so the plugin may also set
# its decode_fixed_split_size (FlashInfer's fixed_split_size), which a captured graph's plan cannot hold
STEP_KNOBS = {**VLLM_KNOBS, "fixed_split_size": (0, 1024)}

# torch / vLLM spellings of the dtypes Switchyard measures; anything else (fp8_e5m2, nvfp4) it has not
DTYPE_NAMES = {"bfloat16": "bf16", "bf16": "bf16", "float16": "fp16", "half": "fp16", "fp16": "fp16",
               "float8_e4m3fn": "fp8", "fp8": "fp8", "fp8_e4m3": "fp8"}


class Answers:
    def __init__(self, settings: Settings, dispatcher: Dispatcher | None = None):
        self.settings = settings
        self._given = dispatcher
        self._dispatchers: dict[bool, Dispatcher] = {}
        self._reasons: dict[str, str] = {}
        self.fp8_out_fused = False          # fused.py said True: the model's FP8 output is Switchyard's to run

    def dispatcher(self, per_step: bool = False) -> Dispatcher:
        """The decisions among what vLLM runs (`per_step`: also what it can plan per step, STEP_KNOBS)."""
        if self._given is not None:
            return self._given
        if per_step not in self._dispatchers:
            db = self.settings.db
            if db and not Path(db).exists():
                log.warning("Switchyard: database %s does not exist; every answer stays vLLM's", db)
            knobs = STEP_KNOBS if per_step else VLLM_KNOBS
            self._dispatchers[per_step] = load(db, self.settings.device, registry=vllm_registry(knobs),
                                                 missing_ok=True)
        return self._dispatchers[per_step]

    def decide(self, fields: dict[str, Any], per_step: bool = False) -> tuple[Decision | None, str]:
        """The measured decision for a problem, or None and why not (no measurement: vLLM's rule stands)."""
        try:
            dec = self.dispatcher(per_step).choose(AttentionProblem(**fields))
        except (ValueError, LookupError) as e:
            return None, f"Switchyard cannot decide this shape ({e})"
        if dec.source == "rule":
            return None, f"no measurement near this shape ({dec.reason})"
        return dec, f"{dec.pipeline} ({dec.source}: {dec.reason})"

    def mismatch(self, capability: Any) -> str | None:
        """Why the database's device is not this GPU, or None when it is."""
        device = self.dispatcher().device
        sm = capability.to_int() if capability is not None else 0
        if device.sm != sm:
            return f"the database's device {device.name} (SM{device.sm}) is not this GPU (SM{sm})"
        return None

    def note(self, point: str, why: str) -> None:
        """Record why a decision point answered as it did; logged the first time the point answers."""
        if point not in self._reasons:
            if len(self._reasons) >= REASONS_LIMIT:
                self._reasons.clear()
            log.info("Switchyard %s: %s", point, why)
        self._reasons[point] = why

    def reasons(self) -> dict[str, str]:
        return dict(self._reasons)


_current: Answers | None = None


def vllm_registry(allowed: dict[str, tuple[Any, ...]] = VLLM_KNOBS) -> dict[str, KernelSpec]:
    """Switchyard's kernels as far as vLLM runs them (VLLM_KERNELS, with the knob values `allowed`)."""
    def knobs(space: Any) -> Any:
        return tuple((knob, allowed.get(knob, values)) for knob, values in space)
    return {k: dataclasses.replace(s, q_quant=False, tactics=tuple((kind, knobs(space)) for kind, space in s.tactics))
            for k, s in load_registry().items() if k in VLLM_KERNELS}


def configure(db: str | None = None, device: str | None = None, *, decode_kv_len: int | None = None,
              decode_skew: float | None = None, dispatcher: Dispatcher | None = None) -> Answers:
    """Where the measurements are and what decode batches to expect; unset arguments come from the
    environment (settings.py). Replaces earlier answers."""
    global _current
    env = Settings.from_env()
    settings = Settings(db=db or env.db, device=device or env.device,
                        decode_kv_len=decode_kv_len or env.decode_kv_len, decode_skew=decode_skew or env.decode_skew,
                        fixed_split=env.fixed_split)
    _current = Answers(settings, dispatcher)
    return _current


def current() -> Answers:
    return _current or configure()


def reasons() -> dict[str, str]:
    """Why each vLLM decision point answered as it did, by point (for logs and debugging)."""
    return current().reasons()


def dtype_name(dtype: Any) -> str | None:
    """Switchyard's name of a torch dtype or a vLLM dtype string, or None if it measures no such dtype."""
    return DTYPE_NAMES.get(str(dtype).removeprefix("torch.").lower())


def kv_dtype_name(cache_dtype: str, model_dtype: Any) -> str | None:
    """vLLM's --kv-cache-dtype in Switchyard's names: "auto" is the model's dtype."""
    return dtype_name(model_dtype) if cache_dtype == "auto" else dtype_name(cache_dtype)
