import sys
import textwrap

import pytest

from dispatcher.device import H200
from dispatcher.dispatch import Dispatcher
from dispatcher.integrations import vllm as shim
from dispatcher.pipeline import Pipeline
from dispatcher.table import Table, Timing
from tests.conftest import small

SCOUT = dict(num_qo_heads=40, num_kv_heads=8, head_dim=128)
XQA_F = Pipeline("trtllm-xqa", "bf16", "fp8", "fp8", tactic=(("enable_pdl", False),))
TC = Pipeline("fa2-tc", "bf16", "fp8", "bf16", out_quant=True, tactic=(("fixed_split_size", 0),))
FA3_Q = Pipeline("fa3", "fp8", "fp8", "bf16", q_quant=True, out_quant=True)


@pytest.fixture
def h200():
    """An H200 table: XQA fused wins short KV, FA2-TC wins long KV (decode), FA3+q-quant prefill."""
    t = Table()
    for kv, (x, tc) in {1024: (10.0, 20.0), 65536: (300.0, 200.0)}.items():
        p = small(**SCOUT, kv_dtype="fp8", out_dtype="fp8", batch_size=8, kv_len=kv)
        t.add(p, Timing(XQA_F, x, 0.1, 0.04))
        t.add(p, Timing(TC, tc, 0.1, 0.003))
    t.add(small(**SCOUT, phase="prefill", kv_dtype="fp8", out_dtype="fp8", batch_size=1, q_len=1024, kv_len=1024),
          Timing(FA3_Q, 50.0, 0.5, 0.01))
    shim.configure(dispatcher=Dispatcher(t, H200), out_dtype="fp8")
    yield
    shim._dispatcher = None


def call(**kw):
    args = dict(num_qo_heads=40, num_kv_heads=8, num_tokens=8, max_seq_len=1024, dcp_world_size=1,
                kv_cache_dtype="fp8", q_dtype="torch.bfloat16", is_prefill=False)
    return shim.use_trtllm_attention(**{**args, **kw})


def test_automatic_case_follows_the_measurements(h200):
    assert call() is True                              # XQA measured fastest
    assert call(max_seq_len=65536) is False            # FA2 tensor-core decode measured fastest
    assert shim.fused_output_quant_supported(40, 8, 8, 1024, "fp8", False) is True
    assert shim.fused_output_quant_supported(40, 8, 8, 65536, "fp8", False) is False
    assert shim.should_quantize_query(40, 8, 1024, 1024, "fp8", True) is True


def test_vllm_semantics_case_by_case(h200):
    assert call(force_use_trtllm=False) is False                   # forced off wins over everything
    assert call(force_use_trtllm=False, has_spec=True) is False
    assert call(dcp_world_size=2) is False                          # DCP
    assert call(num_kv_heads=7) is False                            # heads not divisible
    assert call(max_seq_len=65536, has_spec=True) is True           # spec decode needs TRT-LLM decode
    assert call(max_seq_len=65536, q_dtype="torch.float8_e4m3fn") is True   # FP8 query
    assert call(max_seq_len=65536, has_sinks=True) is True          # sinks
    assert call(max_seq_len=65536, force_use_trtllm=True) is True   # forced on


def test_no_trtllm_kernel_on_the_platform_means_false(tmp_path):
    shim.configure(db=tmp_path / "none.db", device="cpu")
    assert call(force_use_trtllm=True) is False
    shim._dispatcher = None


def test_install_replaces_vllms_functions_in_place(h200, tmp_path, monkeypatch):
    root = tmp_path / "vllm"
    (root / "utils").mkdir(parents=True)
    (root / "v1" / "attention" / "backends").mkdir(parents=True)
    for d in (root, root / "utils", root / "v1", root / "v1" / "attention", root / "v1" / "attention" / "backends"):
        (d / "__init__.py").write_text("")
    (root / "utils" / "flashinfer.py").write_text("def use_trtllm_attention(*a, **k):\n    return 'vllm'\n")
    (root / "v1" / "attention" / "backends" / "flashinfer.py").write_text(textwrap.dedent("""
        from vllm.utils.flashinfer import use_trtllm_attention
        def pick(*a, **k):
            return use_trtllm_attention(*a, **k)
    """))
    monkeypatch.syspath_prepend(str(tmp_path))
    import vllm.v1.attention.backends.flashinfer as backend
    try:
        assert backend.pick(40, 8, 8, 1024, 1, "fp8", "torch.bfloat16", False) == "vllm"
        assert shim.install() == ["vllm.utils.flashinfer.use_trtllm_attention",
                                  "vllm.v1.attention.backends.flashinfer.use_trtllm_attention"]
        assert backend.pick(40, 8, 8, 1024, 1, "fp8", "torch.bfloat16", False) is True
        shim.uninstall()
        assert backend.pick(40, 8, 8, 1024, 1, "fp8", "torch.bfloat16", False) == "vllm"
    finally:
        for m in [m for m in sys.modules if m == "vllm" or m.startswith("vllm.")]:
            del sys.modules[m]


def test_install_without_vllm_says_how():
    with pytest.raises(ImportError, match="vLLM is not importable here"):
        shim.install()
