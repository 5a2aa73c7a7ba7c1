"""The narrow FMHAv2 build's routing, on the CPU (the build itself runs on the device:
tests/gpu/test_runners_gpu.py::test_fmha_v2_builds_one_kernel_and_matches_the_full_module)."""
import sys
import types

import pytest

from dispatcher import load_registry
from tuner.runners import fmha_v2_narrow as narrow


def test_every_declared_head_dim_has_a_narrow_kernel():
    fmha = load_registry()["trtllm-fmha-v2"]
    assert fmha.head_dims and all(narrow.use_head_size(h) is None for h in fmha.head_dims)


def test_a_head_size_without_a_kernel_says_which_exist():
    why = narrow.use_head_size(72)
    assert "head_dim 72" in why and "128" in why
    assert narrow._head_size is None


def test_lookups_go_to_flashinfer_when_nothing_can_be_narrowed(monkeypatch):
    """Without FlashInfer's generator (here: no flashinfer.jit), every lookup gets FlashInfer's
    own module, with the caller's arguments."""
    calls = []
    prefill = types.ModuleType("flashinfer.prefill")
    prefill.get_trtllm_fmha_v2_module = lambda *a: calls.append(a) or "full module"
    pkg = types.ModuleType("flashinfer")
    pkg.prefill = prefill
    monkeypatch.setitem(sys.modules, "flashinfer", pkg)
    monkeypatch.setitem(sys.modules, "flashinfer.prefill", prefill)
    monkeypatch.setattr(narrow, "_stock", None)
    narrow._narrow_or_stock.cache_clear()
    narrow.install()
    narrow.install()                          # twice: still one layer, the original kept
    assert prefill.get_trtllm_fmha_v2_module is narrow._get_module
    narrow.use_head_size(128)
    assert prefill.get_trtllm_fmha_v2_module("Q_PAGED_KV_HND", "e4m3", "e4m3") == "full module"
    assert calls == [("Q_PAGED_KV_HND", "e4m3", "e4m3")]
    narrow._narrow_or_stock.cache_clear()


@pytest.mark.parametrize("head", [64, 128, 256])
def test_the_narrow_module_has_a_name_of_its_own(head):
    uri = narrow.narrow_uri("Q_PAGED_KV_HND", "e4m3", "bf16", head)
    assert uri == f"trtllm_fmha_v2_q_paged_kv_hnd_e4m3_bf16_hd{head}"


def test_a_flashinfer_whose_generator_moved_gets_its_own_module(monkeypatch):
    """A generator API that changed (here: a missing function) is not an error: no narrow spec."""
    def moved(*a):
        raise AttributeError("module 'fmha_library' has no attribute 'generate_kernel_spec'")
    monkeypatch.setattr(narrow, "_spec", moved)
    assert narrow.narrow_spec("Q_PAGED_KV_HND", "torch.float8_e4m3fn", None, 128) is None
