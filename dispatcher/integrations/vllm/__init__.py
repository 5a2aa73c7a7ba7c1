"""Switchyard as a vLLM plugin: vLLM's FlashInfer backend asks its usual questions, the database answers
where vLLM can run the answer on this GPU.

    pip install -e /path/to/switchyard; SWITCHYARD_DB=heuristics.db vllm serve ...   # vllm.general_plugins

or explicitly, before vLLM builds its engine:

    from dispatcher.integrations import vllm as switchyard
    switchyard.install(db="heuristics.db")          # raises for a vLLM version it does not support
    switchyard.reasons()                            # why each decision point answered as it did

vLLM is imported only by install(); importing this package needs neither vLLM nor torch.
"""
from .answers import configure, reasons, vllm_registry
from .install import SUPPORTED_VLLM, UnsupportedVllm, install, installed, register, uninstall
from .settings import Settings

__all__ = ["SUPPORTED_VLLM", "Settings", "UnsupportedVllm", "configure", "install", "installed", "reasons",
           "register", "uninstall", "vllm_registry"]
