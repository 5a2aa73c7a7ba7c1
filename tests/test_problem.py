import pytest

from dispatcher import AttentionProblem, ProblemError
from dispatcher.cells import size_cell
from tests.conftest import small


def test_heads_not_divisible_names_both_values():
    with pytest.raises(ProblemError) as e:
        small(num_qo_heads=40, num_kv_heads=7)
    assert str(e.value) == ("num_qo_heads 40 is not divisible by num_kv_heads 7; "
                            "GQA needs a whole number of query heads per KV head")
    assert e.value.field == "num_qo_heads"


@pytest.mark.parametrize("field,value,fragment", [
    ("phase", "train", "phase 'train' is not supported; use one of decode, prefill"),
    ("kv_dtype", "fp4", "kv_dtype 'fp4' is not supported; use one of bf16, fp16, fp8"),
    ("batch_size", 0, "batch_size 0 is out of range"),
    ("kv_len", "many", "kv_len 'many' is not an integer"),
    ("q_len", 4, "q_len 4 is invalid for decode"),
])
def test_invalid_field_is_named(field, value, fragment):
    with pytest.raises(ProblemError) as e:
        small(**{field: value})
    assert e.value.field == field and fragment in str(e.value)


def test_frozen_hashable_and_aliases():
    a = small(kv_dtype="float8_e4m3fn", out_dtype="bfloat16")
    assert a.kv_dtype == "fp8" and a.out_dtype == "bf16"
    assert hash(a) == hash(small(kv_dtype="fp8")) and a == small(kv_dtype="fp8")
    assert small(phase="DECODE", kv_dtype="FP8") == small(kv_dtype="fp8")       # as dtypes are: any case
    with pytest.raises(AttributeError):
        a.batch_size = 3


def test_a_cell_keeps_the_batch_and_snaps_lengths_to_an_eighth_of_an_octave():
    p = small(batch_size=12, kv_len=1900)
    c = p.cell()
    assert (c.batch_size, c.kv_len) == (12, 1878)              # not the power-of-two bucket (16, 2048)
    assert c.cell() is c and small(kv_len=2048).cell().kv_len == 2048
    assert p.cell_key() != small(batch_size=13, kv_len=1900).cell_key()    # every batch size is its own
    # a cell spans 2^(1/16) either side of its representative, 4.4%: 1800 is in it, 1790 is not
    assert small(batch_size=12, kv_len=1800).cell_key() == p.cell_key() != small(batch_size=12, kv_len=1790).cell_key()


def test_a_cell_at_the_longest_request_the_batch_allows_is_its_own_cell():
    # batch 21 of mean 33937: the longest request can hold 712657 tokens, past its cell's representative
    # at the snapped mean (688108 there); the representative must not move again when asked for its cell
    p = small(batch_size=21, kv_len=33937, max_kv_len=712657)
    c = p.cell()
    assert (c.kv_len, c.max_kv_len) == (32768, 679917)
    assert c.cell() is c


def test_no_cell_straddles_a_query_tile():
    # 130 query rows run a second, nearly empty 128-row tile: not decided (or stored) as 128 rows
    def pre(q):
        return small(phase="prefill", batch_size=5, q_len=q, kv_len=q)
    assert size_cell(130) == size_cell(128) and pre(130).cell_key() != pre(128).cell_key()
    assert pre(130).cell().q_len == 129 and pre(132).cell_key() == pre(129).cell_key()
    assert pre(126).cell().q_len == 128 and pre(129).cell() == pre(129)
    assert small(kv_len=1900).cell_key() == small(kv_len=1878).cell_key()      # decode: q_len 1, one tile


def test_from_dict_rejects_unknown_and_missing_fields():
    with pytest.raises(ProblemError, match="unknown field 'heads'"):
        AttentionProblem.from_dict({**small().to_dict(), "heads": 3})
    d = small().to_dict()
    del d["kv_len"]
    with pytest.raises(ProblemError, match="kv_len is required"):
        AttentionProblem.from_dict(d)
    assert AttentionProblem.from_dict(small().to_dict()) == small()


def test_prefill_query_cannot_exceed_kv():
    with pytest.raises(ProblemError, match="q_len 512 exceeds kv_len 256"):
        small(phase="prefill", q_len=512, kv_len=256)


def test_a_sweep_takes_phases_and_dtypes_spelled_as_a_problems_are():
    from tuner.library import SweepRequest
    r = SweepRequest(phases=("DECODE",), kv_dtypes=("FP8", "bfloat16"), out_dtypes=("BF16",))
    assert (r.phases, r.kv_dtypes, r.out_dtypes) == (("decode",), ("fp8", "bf16"), ("bf16",))
    with pytest.raises(ValueError, match="phase 'train' is not supported; use decode, prefill"):
        SweepRequest(phases=("Train",))


def test_python_refuses_a_prefill_without_q_len_as_rest_and_the_cli_do():
    """Before: AttentionProblem(phase="prefill", ...) without q_len was decided as one new token per request."""
    with pytest.raises(ProblemError, match=r"q_len is required for prefill \(the new tokens per request; 1 for one\)"):
        AttentionProblem(phase="prefill", num_qo_heads=40, num_kv_heads=8, batch_size=2, kv_len=1900)
    with pytest.raises(ProblemError, match="q_len is required for prefill"):
        AttentionProblem.from_seq_lens(phase="prefill", num_qo_heads=40, num_kv_heads=8, seq_lens=[1900, 300])
    one = AttentionProblem(phase="prefill", num_qo_heads=40, num_kv_heads=8, batch_size=2, kv_len=1900, q_len=1)
    assert one.q_len == 1 and AttentionProblem(phase="decode", num_qo_heads=40, num_kv_heads=8, batch_size=2,
                                               kv_len=1900).q_len == 1


def test_an_fp16_models_query_is_fp16_unless_given():
    """Before: q_dtype defaulted to bf16, so an fp16 model's problem (kv and out fp16) named no kernel at all."""
    scout = dict(phase="decode", num_qo_heads=40, num_kv_heads=8, batch_size=4, kv_len=1900)
    assert AttentionProblem(**scout, kv_dtype="fp16", out_dtype="fp16").q_dtype == "fp16"
    assert AttentionProblem(**scout, kv_dtype="fp8", out_dtype="float16").q_dtype == "fp16"    # FP8 KV, fp16 model
    assert AttentionProblem(**scout, kv_dtype="fp8", out_dtype="fp8").q_dtype == "bf16"
    assert AttentionProblem(**scout, kv_dtype="fp16", out_dtype="fp16", q_dtype="bf16").q_dtype == "bf16"
    assert AttentionProblem(**scout).to_dict()["q_dtype"] == "bf16"


def test_a_q_len_of_false_is_not_taken_for_unset():
    with pytest.raises(ProblemError, match="q_len False is not an integer"):
        AttentionProblem(phase="decode", num_qo_heads=40, num_kv_heads=8, batch_size=2, kv_len=100, q_len=False)


def test_from_seq_lens_derives_what_the_full_check_accepts():
    """from_seq_lens no longer checks the lengths twice (79 -> 32 us for 128 requests here): what it derives
    must pass the check a problem given sizes and seq_lens gets, for any lengths."""
    import dataclasses
    import random
    rng = random.Random(7)
    for _ in range(400):
        n, q = rng.randint(1, 64), rng.choice([1, 1, 16, 200])
        lens = [rng.randint(q, rng.choice([q + 5, 3000, 70000])) for _ in range(n)]
        phase = "decode" if q == 1 else "prefill"
        p = AttentionProblem.from_seq_lens(phase=phase, num_qo_heads=40, num_kv_heads=8, q_len=q, seq_lens=lens)
        again = dataclasses.replace(p, seq_lens=tuple(lens))        # checked in full: sizes, mean, balance
        assert again == p and again.kv_balance == p.kv_balance and type(p.seq_lens) is tuple
