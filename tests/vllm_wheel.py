"""vLLM 0.33.0's own Python code for the plugin tests, importable on a CPU-only host without vLLM installed.

`obtain()` downloads the wheel once (`pip download vllm==0.33.0 --no-deps`, or $SWITCHYARD_VLLM_WHEEL, a
wheel already on disk), keeps only its Python files (no compiled extensions) under
~/.cache/switchyard/vllm-0.33.0/tree and deletes the wheel; nothing of it is committed.

`python -m tests.vllm_wheel TREE MODULE [--gpu]` imports vLLM's FlashInfer modules from TREE with stubs for what
is not installed here: third-party packages (flashinfer, zmq, psutil, transformers, ...), the CUDA platform
(a settable compute capability), the vLLM config (a namespace with a real AttentionConfig), NVIDIA's
cubin server and one Triton kernel. It then runs every `check_*` function of MODULE and prints their
outcomes as JSON; with --gpu FlashInfer and vLLM's Triton kernel are the real ones (tests/gpu). The stubs
fill sys.modules, so this runs in a subprocess, never inside pytest. `python -m tests.vllm_wheel pack OUT`
packs the part of the tree they import, for a GPU host without PyPI.
"""
from __future__ import annotations

import contextlib
import fcntl
import importlib
import importlib.abc
import importlib.machinery
import json
import os
import re
import shutil
import subprocess
import sys
import traceback
import types
import zipfile
from pathlib import Path
from typing import Any

VERSION = "0.33.0"
RESULT_MARK = "SWITCHYARD-CHECKS "


class Unavailable(RuntimeError):
    """vLLM's wheel cannot be had here (no network, no pip)."""


def cache_root() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "switchyard" / f"vllm-{VERSION}"


def obtain() -> Path:
    """The directory holding vLLM's `vllm/` Python tree; fetched and extracted on first use (locked: the
    suite runs under pytest-xdist)."""
    root = cache_root()
    tree = root / "tree"
    root.mkdir(parents=True, exist_ok=True)
    with open(root / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (tree / "vllm" / "version.py").exists():
            wheel = _wheel(root)
            _extract(wheel, root)
            if wheel.parent == root / "wheel":
                shutil.rmtree(root / "wheel", ignore_errors=True)     # only the Python files are kept
    return tree


def _wheel(root: Path) -> Path:
    given = os.environ.get("SWITCHYARD_VLLM_WHEEL")
    if given:
        return Path(given)
    out = root / "wheel"
    cmd = [sys.executable, "-m", "pip", "download", f"vllm=={VERSION}", "--no-deps", "--only-binary=:all:",
           "--disable-pip-version-check", "-q", "-d", str(out)]
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise Unavailable(f"pip download vllm=={VERSION} failed: {e}") from None
    wheels = sorted(out.glob(f"vllm-{VERSION}-*.whl"))
    if done.returncode or not wheels:
        raise Unavailable(f"pip download vllm=={VERSION} failed (PyPI unreachable?): {done.stderr.strip()[-300:]}")
    return wheels[0]


def _extract(wheel: Path, root: Path) -> None:
    tmp = root / "tree.partial"
    shutil.rmtree(tmp, ignore_errors=True)
    with zipfile.ZipFile(wheel) as z:
        z.extractall(tmp, [n for n in z.namelist() if n.endswith(".py") or ".dist-info/" in n])
    shutil.rmtree(root / "tree", ignore_errors=True)
    tmp.rename(root / "tree")


# -- stubs: run only in the check subprocess ---------------------------------------------------------
# Third-party packages vLLM's two FlashInfer modules import (directly or through vllm.config, logging,
# multimodal) that are not installed here; any attribute of these is a dummy.
STUB_PACKAGES = ("psutil", "zmq", "flashinfer", "cbor2", "transformers", "huggingface_hub", "safetensors",
                 "aiohttp", "openai", "openai_harmony", "pybase64", "cachetools", "uvloop", "cpuinfo")
# vLLM's KV-transfer package pulls the scheduler, msgspec and more; the backend needs one function of it
CUT_VLLM_MODULES = ("vllm.distributed.kv_transfer", "vllm.distributed.kv_transfer.kv_connector",
                    "vllm.distributed.kv_transfer.kv_connector.utils")


class _Dummy:
    def __init__(self, *a: Any, **k: Any) -> None:
        pass

    def __call__(self, *a: Any, **k: Any) -> None:
        return None

    def __class_getitem__(cls, item: Any) -> type:       # cachetools.LRUCache[K, V] in annotations
        return cls


class _StubModule(types.ModuleType):
    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        value = (type(name, (_Dummy,), {}) if name[:1].isupper()
                 else importlib.import_module(f"{self.__name__}.{name}"))
        setattr(self, name, value)
        return value

    def __call__(self, *a: Any, **k: Any) -> None:
        return None

    def __getitem__(self, item: Any) -> Any:
        return self


class _StubFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def __init__(self, exclude: tuple[str, ...] = ()) -> None:
        self.stubbed = tuple(p for p in STUB_PACKAGES if p not in exclude)

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> Any:
        if fullname.split(".")[0] in self.stubbed:
            return importlib.machinery.ModuleSpec(fullname, self, is_package=True)
        return None

    def create_module(self, spec: Any) -> types.ModuleType:
        return _StubModule(spec.name)

    def exec_module(self, module: types.ModuleType) -> None:
        module.__path__ = []


class FakeWrapper:
    """FlashInfer's prefill/decode wrappers: remember how vLLM built and planned them."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.init_kwargs = kwargs
        self.is_cuda_graph_enabled = bool(kwargs.get("use_cuda_graph"))
        self.plans: list[dict[str, Any]] = []

    def plan(self, *args: Any, **kwargs: Any) -> None:
        self.plans.append(kwargs)
        self._window_left = kwargs.get("window_left", -1)
        self._logits_soft_cap = kwargs.get("logits_soft_cap") or 0.0
        self._sm_scale = kwargs.get("sm_scale")

    def run(self, query: Any, kv_cache: Any, *args: Any, out: Any = None, **kwargs: Any) -> Any:
        """An identity kernel: writes the query, so a test can tell what reached `out`."""
        out.copy_(query.to(out.dtype))
        return out


def _fake_flashinfer() -> None:
    fi = importlib.import_module("flashinfer")
    for name in ("BatchDecodeWithPagedKVCacheWrapper", "BatchPrefillWithPagedKVCacheWrapper",
                 "BatchPrefillWithRaggedKVCacheWrapper", "BatchAttentionWithAttentionSinkWrapper"):
        setattr(fi, name, type(name, (FakeWrapper,), {}))
    utils = importlib.import_module("flashinfer.utils")
    utils.get_trtllm_gen_multi_ctas_kv_counter_bytes = lambda *a, **k: 0
    utils.get_device_sm_count = lambda *a, **k: 132


_capability = [(10, 0)]


def set_capability(major: int, minor: int = 0) -> None:
    """Fake another GPU; clears vLLM's cached capability answer."""
    _capability[0] = (major, minor)
    fi = sys.modules.get("vllm.utils.flashinfer")
    if fi is not None:
        fi.supports_trtllm_attention.cache_clear()


def _fake_platform() -> None:
    import vllm.platforms as platforms
    from vllm.platforms.interface import DeviceCapability, Platform, PlatformEnum

    class FakeCudaPlatform(Platform):
        _enum = PlatformEnum.CUDA
        device_name = "cuda"
        device_type = "cuda"
        dispatch_key = "CUDA"

        @classmethod
        def get_device_capability(cls, device_id: int = 0) -> Any:
            return DeviceCapability(*_capability[0])

        @classmethod
        def is_pin_memory_available(cls) -> bool:
            return False                                  # a CPU-only torch cannot pin

    platforms._current_platform = FakeCudaPlatform()     # before the modules bind current_platform


def set_config(use_trtllm_attention: bool | None = None, **sections: Any) -> Any:
    """The current vLLM config: a real AttentionConfig in a namespace (a full VllmConfig cannot be built
    under these stubs); `sections` adds or replaces the other parts."""
    import vllm.config.vllm as cfg
    from vllm.config import AttentionConfig

    config = types.SimpleNamespace(attention_config=AttentionConfig(use_trtllm_attention=use_trtllm_attention),
                                   **sections)
    cfg._current_vllm_config = config
    return config


def install_stubs(tree: Path, capability: tuple[int, int] = (10, 0), real_flashinfer: bool = False) -> None:
    """`real_flashinfer`: on a GPU, FlashInfer's own package and kernels instead of the stub."""
    sys.path.insert(0, str(tree))
    sys.modules.setdefault("regex", re)                     # vLLM does `import regex as re`
    sys.meta_path.insert(0, _StubFinder(exclude=("flashinfer",) if real_flashinfer else ()))
    for name in CUT_VLLM_MODULES:
        mod = types.ModuleType(name)
        mod.__path__ = []
        sys.modules[name] = mod
    sys.modules[CUT_VLLM_MODULES[-1]].get_kv_connector_cache_layout = lambda *a, **k: None  # type: ignore[attr-defined]
    if not real_flashinfer:
        _fake_flashinfer()
    set_capability(*capability)
    _fake_platform()


def copy_page_indices(grid: tuple[int]) -> Any:
    """vLLM's Triton kernel _copy_page_indices_kernel (no Triton here), the same copy in torch."""
    def run(page_indices: Any, block_table: Any, stride: int, cu_num_blocks: Any, BLOCK_SIZE: int) -> None:
        for r in range(grid[0]):
            start, end = int(cu_num_blocks[r]), int(cu_num_blocks[r + 1])
            page_indices[start:end] = block_table[r, : end - start]
    return run


class _Kernel:
    def __getitem__(self, grid: tuple[int]) -> Any:
        return copy_page_indices(grid)


def load_vllm(triton: bool = False) -> types.SimpleNamespace:
    """vLLM's modules under test, with the platform-facing stubs set (`triton`: vLLM's own Triton kernel)."""
    fi = importlib.import_module("vllm.utils.flashinfer")
    fib = importlib.import_module("vllm.v1.attention.backends.flashinfer")
    quant = importlib.import_module("vllm.model_executor.layers.quantization.utils.quant_utils")
    fi.has_nvidia_artifactory = lambda: True          # else an HTTP request to NVIDIA's cubin server
    if not triton:
        fib._copy_page_indices_kernel = _Kernel()
    return types.SimpleNamespace(fi=fi, fib=fib, quant=quant, set_capability=set_capability,
                                 set_config=set_config, version=importlib.import_module("vllm.version"))


def run_checks(tree: Path, module: str, gpu: bool = False) -> dict[str, str]:
    install_stubs(tree, real_flashinfer=gpu)
    v = load_vllm(triton=gpu)
    mod = importlib.import_module(module)
    plugin = importlib.import_module("dispatcher.integrations.vllm")
    results = {}
    for name in sorted(n for n in vars(mod) if n.startswith("check_")):
        set_capability(9, 0)
        set_config()
        try:
            getattr(mod, name)(v)
            results[name] = "ok"
        except Exception:
            results[name] = traceback.format_exc()
        finally:
            with contextlib.suppress(Exception):
                plugin.uninstall()
    return results


def pack(out: Path) -> None:
    """The part of the tree the checks import (plus vLLM's attention, utils and platform packages whole),
    as an .txz for a GPU host that cannot reach PyPI: its tests find it through $SWITCHYARD_VLLM_TREE
    once unpacked. Run it in a fresh process: it imports vLLM under the CPU stubs."""
    import tarfile
    tree = obtain()
    run_checks(tree, "tests.test_vllm_plugin")
    files = {Path(m.__file__) for n, m in list(sys.modules.items()) if n.split(".")[0] == "vllm"
             and getattr(m, "__file__", None)}
    for sub in ("vllm/v1/attention", "vllm/utils", "vllm/platforms"):
        files |= set((tree / sub).rglob("*.py"))
    files |= set(tree.glob("vllm-*.dist-info/*"))
    with tarfile.open(out, "w:xz") as tar:
        for f in sorted(files):
            tar.add(f, arcname=str(f.relative_to(tree)))
    print(f"{len(files)} files of vLLM {VERSION} -> {out} ({out.stat().st_size / 1e6:.1f} MB)")


if __name__ == "__main__":
    if sys.argv[1] == "pack":
        pack(Path(sys.argv[2]))
    else:
        outcome = run_checks(Path(sys.argv[1]), sys.argv[2], gpu="--gpu" in sys.argv[3:])
        print(RESULT_MARK + json.dumps(outcome))
