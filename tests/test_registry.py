import dataclasses

import pytest

from dispatcher import AttentionProblem, ineligibility_reasons, load_registry
from dispatcher.device import B200, H200
from dispatcher.pipeline import candidates, pipelines_for
from dispatcher.registry import RegistryError, graph_split_chunks, planned_chunk, tactic_reasons
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


@pytest.mark.parametrize("kernel, kv, batch, heads, longest, splits", [
    ("trtllm-xqa", "fp8", 8, 8, 131072, 2),      # csrc/xqa/mha_sm90.cu: round(396 // 64 x 0.25) = round(1.5)
    ("trtllm-xqa", "fp8", 10, 8, 131072, 1),     # round(4 x 0.25)
    ("trtllm-xqa", "fp8", 5, 8, 131072, 2),      # round(9 x 0.25)
    ("trtllm-xqa", "fp8", 1, 8, 200, 4),         # 12 wanted, but a 200-token request has 4 tiles of 64
    ("fa2-tc", "bf16", 64, 2, 65536, 2),         # FlashInfer's graph plan: at most 264 // 2 chunks in all
    ("fa2-tc", "fp8", 53, 2, 65536, 2),
    ("fa2-tc", "bf16", 68, 2, 65536, 1),
])
def test_kernels_split_a_decode_batch_as_their_launchers_do(kernel, kv, batch, heads, longest, splits):
    assert REG[kernel].split_rule(kv).splits(batch, heads, longest, 132) == splits


def test_bf16_kernels_past_one_wave_run_a_second_cta_beside_the_first():
    # mha.cu (BF16 XQA) on SM90: floor(SMs / (batch x KV heads)) CTAs per request and head, 256-token
    # tiles, two CTAs resident per SM; batch 17 of 8 KV heads is 136 CTAs, so some SM runs two
    xqa = REG["trtllm-xqa"].split_rule("bf16")
    assert (xqa.waves, xqa.compute_capability) == ("resident", 90)
    assert [xqa.splits(b, 8, 131072, 132) for b in (1, 4, 16, 17)] == [16, 4, 1, 1]
    assert xqa.splits(1, 8, 300, 132) == 2                      # two 256-token tiles
    assert xqa.busiest_sm(17, 8, 131072, 132) == 2 * xqa.busiest_sm(16, 8, 131072, 132)
    assert not xqa.applies_to(120) and REG["fa2-tc"].split_rule("bf16").applies_to(120)
    # cuDNN never splits a request: one CTA per request and head at any batch
    assert {REG["cudnn"].split_rule("bf16").splits(b, 8, 131072, 132) for b in (1, 16, 64)} == {1}


def test_fa2_tc_past_one_wave_pays_a_whole_second_one():
    # batch 68 of 2 KV heads: one chunk per request, 136 CTAs on 132 SMs; measured 331 us per request and
    # 1k tokens against 185 at batch 64 (2 chunks each, 256 CTAs)
    rule = REG["fa2-tc"].split_rule("fp8")
    per_request = {b: rule.work_per_sm(b, 2, 34011, 132) / b for b in (64, 68)}
    assert per_request[68] / per_request[64] == pytest.approx(64 / 34)


def test_xqa_batch_41_of_2_kv_heads_is_as_much_work_per_sm_as_batch_64():
    # one CTA per request and head either way (measured FP8 98k: 993 us at 41, ~1048 at 64, ~530 at 32)
    rule = REG["trtllm-xqa"].split_rule("fp8")
    work = {b: rule.work_per_sm(b, 2, 98022, 132) for b in (32, 41, 64)}
    assert work[41] == work[64] == 1.0 and work[32] == 0.5


def test_a_bad_split_rule_names_the_kernel_and_the_field(tmp_path):
    extra = tmp_path / "kernels.toml"
    extra.write_text('[[kernel]]\nid = "trtllm-xqa"\nsplit_kv.fp8 = {sm_multiple = 3, factr = 0.25}\n')
    with pytest.raises(RegistryError, match=r"kernel 'trtllm-xqa' in .*: split_kv.fp8: 'factr' is not a field; "
                                            r"the fields are compute_capability, factor, sm_multiple, tile, waves"):
        load_registry(str(extra))
    for bad, why in [('waves = "both"', "waves = 'both' must be one of 'whole', 'shared', 'resident'"),
                     ('sm_multiple = "3"', "sm_multiple = '3' must be a whole number, 0 .never splits. or more"),
                     ("compute_capability = 9", "compute_capability = 9 must be 0 .any. or one of the kernel's "
                                                "compute_capabilities 90, 120, 121 .90 for SM90.")]:
        extra.write_text(f'[[kernel]]\nid = "trtllm-xqa"\nsplit_kv.fp8 = {{tile = 64, {bad}}}\n')
        with pytest.raises(RegistryError, match=r"kernel 'trtllm-xqa' in .*: split_kv.fp8: " + why):
            load_registry(str(extra))


@pytest.mark.parametrize("heads, batch, kv, refused", [
    (8, 4, 131072, False),     # 4 x 8 chunks of 1024 pages, within 2 x 132 // 8 = 33
    (8, 8, 131072, True),      # 64 chunks: refused on the H200 (heuristics.db)
    (2, 16, 131072, False),    # 128 of 132
    (2, 32, 131072, True),     # 256: refused
    (2, 256, 2048, False),     # one chunk each: the plan pads to the batch's own query tiles
])
def test_a_fixed_split_is_refused_where_flashinfers_graph_plan_refuses_it(heads, batch, kv, refused):
    p = small(phase="decode", num_qo_heads=5 * heads, num_kv_heads=heads, head_dim=128, batch_size=batch, kv_len=kv)
    why = tactic_reasons(REG["fa2-tc"], {"fixed_split_size": 1024}, p, H200)
    assert bool(why) == refused
    if refused:
        assert why[0].startswith("fixed_split_size=1024 needs ") and "use fixed_split_size 0" in why[0]
    # the sweep still measures it (the store keeps FlashInfer's refusal); the dispatcher leaves it out
    assert (("fixed_split_size", 1024),) in {pipe.tactic for pipe in pipelines_for(REG["fa2-tc"], p, H200)}


def test_a_sliding_window_plans_only_the_pages_it_reads():
    # FlashInfer counts min(ceil((window + query tile) / page), pages) pages per request
    p = small(phase="decode", num_qo_heads=40, num_kv_heads=8, head_dim=128, batch_size=64, kv_len=32768)
    assert graph_split_chunks(p, 32, 264)[0] == 64 * 64
    assert graph_split_chunks(dataclasses.replace(p, window_left=127), 32, 264)[0] == 64


def test_a_mixed_batch_is_counted_exactly_from_its_lengths_and_kept_clear_of_the_limit_without_them():
    # 8 KV heads: 33 chunks held. One request of 4 chunks (64k tokens) and 14 of 2 (24k tokens each)
    fa2_tc, fixed = REG["fa2-tc"], {"fixed_split_size": 1024}
    exact = AttentionProblem.from_seq_lens(seq_lens=[64228] + [24000] * 14, phase="decode", num_qo_heads=40,
                                           num_kv_heads=8, head_dim=128, page_size=16)
    assert graph_split_chunks(exact, 1024, 264) == (4 + 28, 33)
    assert tactic_reasons(fa2_tc, fixed, exact, H200) == []
    # the same statistics without the lengths: estimated 32 of 33, inside the margin kept for estimates
    guess = exact.with_sizes(max_kv_len=exact.max_kv_len)
    assert guess.seq_lens is None and graph_split_chunks(guess, 1024, 264) == (32, 33)
    assert tactic_reasons(fa2_tc, fixed, guess, H200)[0].startswith("fixed_split_size=1024 needs about 32 ")


def test_flashinfers_own_plan_cuts_a_long_request_while_its_chunks_fit_twice_the_sms():
    # PrefillBinarySearchKVChunkSize at 8 KV heads on 132 SMs: 33 chunks held, 128 tokens per chunk at least
    def one_long(short: int, **kw) -> AttentionProblem:
        return AttentionProblem.from_seq_lens(seq_lens=[500] * short + [16000], phase="decode", num_qo_heads=40,
                                              num_kv_heads=8, head_dim=128, page_size=16, **kw)
    assert planned_chunk(one_long(31), 264) == 8000           # two spare chunks: cut in two
    assert planned_chunk(one_long(32), 264) == 16000          # none spare: it runs whole
    assert planned_chunk(one_long(16), 264) == 944            # 59 pages: 17 chunks for it, one each for the others
    # the statistics alone: the sweep's layout of mean, longest and kv_balance (one long request, or eight)
    guess = one_long(31).with_sizes(max_kv_len=16000)
    assert guess.seq_lens is None and planned_chunk(guess, 264) == 8000
    eight = AttentionProblem.from_seq_lens(seq_lens=[500] * 24 + [16000] * 8, phase="decode", num_qo_heads=40,
                                           num_kv_heads=8, head_dim=128, page_size=16)
    assert eight.kv_balance and planned_chunk(eight.with_sizes(max_kv_len=16000), 264) == 16000
