"""Putting the plugin into vLLM and taking it out again.

`register` is the `vllm.general_plugins` entry point: vLLM calls it bare, once per process (API server,
engine core, every worker), so it never raises and does nothing unless $SWITCHYARD_DB is set. `install`
is the explicit way in; it raises where the entry point logs and leaves vLLM alone.
"""
from __future__ import annotations

import importlib
import os
import types
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...dispatch import Dispatcher
from .answers import configure, log
from .decode import wrap_build, wrap_capture
from .forward import wrap_forward, wrap_xqa
from .fused import wrap_fused_output_quant_supported
from .prefill import wrap_use_trtllm_attention
from .settings import ENV_DB, Settings

# the vLLM releases whose decision points this plugin was written against and tested on (their code,
# tests/test_vllm_plugin.py); any other is refused, never patched blindly
SUPPORTED_VLLM = ("0.33.0",)
UTILS = "vllm.utils.flashinfer"
BACKEND = "vllm.v1.attention.backends.flashinfer"
QUANT = "vllm.model_executor.layers.quantization.utils.quant_utils"
XQA = "flashinfer_xqa_batch_decode_with_kv_cache"     # the backend's own name for FlashInfer's XQA decode
MISSING = object()              # the patched attribute was inherited, not the owner's own


class UnsupportedVllm(RuntimeError):
    """This vLLM is not one the plugin knows how to patch."""


@dataclass
class Patch:
    owner: Any
    name: str
    original: Any               # the owner's own value, or MISSING

    @property
    def label(self) -> str:
        o = self.owner
        owner = o.__name__ if isinstance(o, types.ModuleType) else f"{o.__module__}.{o.__qualname__}"
        return f"{owner}.{self.name}"


_patches: list[Patch] = []


def vllm_version() -> str:
    try:
        return str(importlib.import_module("vllm.version").__version__)
    except ImportError as e:
        raise ImportError(f"vLLM is not importable here ({e}); install vllm {' or '.join(SUPPORTED_VLLM)}") from None


def check_version() -> str:
    version = vllm_version()
    if version not in SUPPORTED_VLLM:
        raise UnsupportedVllm(f"vLLM {version} is not supported by Switchyard's plugin (supported: "
                              f"{', '.join(SUPPORTED_VLLM)}); its FlashInfer decision points may differ, so "
                              "nothing was patched")
    return version


def install(db: str | None = None, device: str | None = None, *, decode_kv_len: int | None = None,
            decode_skew: float | None = None, dispatcher: Dispatcher | None = None) -> list[str]:
    """Patch vLLM's FlashInfer decision points; returns what was patched. Idempotent. Raises ImportError
    without vLLM, UnsupportedVllm for a vLLM version it does not know and FileNotFoundError for a
    database that is not there (every answer would stay vLLM's)."""
    path = db or Settings.from_env().db
    if path and not Path(path).exists() and dispatcher is None:
        raise FileNotFoundError(f"{path}: no such database; point install(db=...) or ${ENV_DB} at a heuristics.db "
                                "(`tuner sweep` makes one); nothing was patched")
    configure(db, device, decode_kv_len=decode_kv_len, decode_skew=decode_skew, dispatcher=dispatcher)
    if _patches:
        return installed()
    check_version()
    utils, backend = importlib.import_module(UTILS), importlib.import_module(BACKEND)
    quant = importlib.import_module(QUANT)
    builder, impl = backend.FlashInferMetadataBuilder, backend.FlashInferImpl
    prefill = wrap_use_trtllm_attention(utils.use_trtllm_attention, utils)
    replacements: list[tuple[Any, str, Callable[..., Any]]] = [
        (utils, "use_trtllm_attention", prefill),
        (backend, "use_trtllm_attention", prefill),        # the backend imported the name itself
        (builder, "build", wrap_build(builder.build)),
        (builder, "build_for_cudagraph_capture", wrap_capture(builder.build_for_cudagraph_capture)),
        (impl, "fused_output_quant_supported",
         wrap_fused_output_quant_supported(impl.fused_output_quant_supported, quant.kFp8StaticTensorSym)),
        (impl, "forward", wrap_forward(impl.forward, backend)),
        (backend, XQA, wrap_xqa(getattr(backend, XQA))),      # forward.py gives it the FP8 output's scale
    ]
    try:
        for owner, name, new in replacements:
            _patches.append(Patch(owner, name, vars(owner).get(name, MISSING)))
            setattr(owner, name, new)
    except Exception:
        uninstall()
        raise
    return installed()


def installed() -> list[str]:
    return [p.label for p in _patches]


def uninstall() -> None:
    """Put vLLM's own functions back."""
    while _patches:
        p = _patches.pop()
        if p.original is MISSING:
            delattr(p.owner, p.name)
        else:
            setattr(p.owner, p.name, p.original)


def register() -> None:
    """The vllm.general_plugins entry point (pyproject.toml): install when $SWITCHYARD_DB is set."""
    if not os.environ.get(ENV_DB):
        log.debug("Switchyard: %s is not set; vLLM runs unchanged", ENV_DB)
        return
    try:
        done = install()
    except (UnsupportedVllm, FileNotFoundError) as e:
        log.warning("Switchyard: %s; vLLM runs unchanged", e)
        return
    except Exception:  # noqa: BLE001 (vLLM calls plugins bare: an exception here would stop vLLM)
        log.exception("Switchyard: the plugin could not be installed; vLLM runs unchanged")
        return
    log.info("Switchyard: answering vLLM's FlashInfer choices from %s (%s)", os.environ[ENV_DB], ", ".join(done))
