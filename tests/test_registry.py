import pytest

from dispatcher import ineligibility_reasons, load_registry
from dispatcher.device import B200, H200
from dispatcher.pipeline import candidates, pipelines_for
from dispatcher.registry import RegistryError
from tests.conftest import small

SCOUT = dict(num_qo_heads=40, num_kv_heads=8, head_dim=128, page_size=16)
REG = load_registry()
IDS = {"trtllm-xqa", "trtllm-gen", "trtllm-fmha-v2", "fa2", "fa2-tc", "fa3", "cudnn", "torch-sdpa"}


def test_every_public_kernel_is_declared_with_its_capabilities():
    assert IDS <= set(REG)
    for spec in REG.values():
        assert spec.family in ("trtllm", "flashattention", "reference") and spec.phases and spec.combos
        assert spec.entry_point and spec.notes


def test_fa2_cuda_core_decode_rejects_group_5():
    reasons = ineligibility_reasons(REG["fa2"], small(**SCOUT), H200)
    assert reasons == ["GQA group size 5 (40/8 heads) not supported in decode (supports [1, 2, 3, 4, 8])"]
    assert ineligibility_reasons(REG["fa2"], small(**SCOUT, phase="prefill", q_len=64, kv_len=128), H200) == []


def test_fa3_fp8_kv_needs_a_q_quant_pipeline():
    p = small(**SCOUT, phase="prefill", q_len=64, kv_len=128, kv_dtype="fp8")
    (pipe,) = pipelines_for(REG["fa3"], p, H200)
    assert pipe.q_quant and pipe.q_dtype == "fp8" and pipe.id == "fa3+q-quant"


def test_xqa_fused_fp8_out_needs_fp8_kv():
    fused = lambda p: {x.fused_out_quant for x in pipelines_for(REG["trtllm-xqa"], p, H200)}  # noqa: E731
    assert fused(small(**SCOUT, kv_dtype="fp8", out_dtype="fp8")) == {True, False}
    assert fused(small(**SCOUT, kv_dtype="bf16", out_dtype="fp8")) == {False}


def test_trtllm_gen_only_on_sm100():
    p = small(**SCOUT)
    assert ineligibility_reasons(REG["trtllm-gen"], p, H200) == ["needs SM100, SM103; NVIDIA H200 is SM90"]
    assert ineligibility_reasons(REG["trtllm-gen"], p, B200) == []
    assert ineligibility_reasons(REG["trtllm-xqa"], p, B200) == ["needs SM90, SM120, SM121; NVIDIA B200 is SM100"]


def test_cpu_gets_only_torch_sdpa(cpu):
    assert {c.kernel for c in candidates(REG, small(), cpu)} == {"torch-sdpa"}
    assert "does not run on cpu (runs on cuda)" in ineligibility_reasons(REG["trtllm-xqa"], small(), cpu)


def test_user_file_overrides_and_adds(tmp_path):
    f = tmp_path / "mine.toml"
    f.write_text('[[kernel]]\nid = "fa3"\nhead_dims = [256]\n\n'
                 '[[kernel]]\nid = "my-attn"\nfamily = "reference"\nphases = ["decode"]\n'
                 'device_kinds = ["cpu"]\ncombos = ["bf16/bf16/bf16"]\n')
    reg = load_registry(str(f))
    assert reg["fa3"].head_dims == (256,) and reg["fa3"].compute_capabilities == (90,)
    assert "my-attn" in reg
    f.write_text('[[kernel]]\nid = "x"\nfamily = "magic"\nphases = ["decode"]\ndevice_kinds = ["cpu"]\ncombos = []\n')
    with pytest.raises(RegistryError, match="family 'magic' is not one of trtllm, flashattention, reference"):
        load_registry(str(f))
