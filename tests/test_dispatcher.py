import subprocess
import sys

import pytest

from dispatcher import AttentionProblem, load
from dispatcher.device import H200
from dispatcher.dispatch import Dispatcher
from dispatcher.pipeline import Pipeline
from dispatcher.table import Table, Timing
from tests.conftest import ROOT, small


def test_measured_shape(swept_db):
    d = load(swept_db[0], "cpu")
    dec = d.choose(small(batch_size=4, kv_len=256))       # measured
    assert dec.source == "measured" and dec.kernel == "torch-sdpa" and dec.expected_us > 0
    assert dec.pipeline.startswith("torch-sdpa[backend=") and dec.device.startswith("CPU")
    assert "measured at batch_size=4 q_len=1 kv_len=256" in dec.reason
    near = d.choose(small(batch_size=4, kv_len=250))      # within 4.4% of it: the same cell
    assert near.source == "measured" and near.pipeline == dec.pipeline


def test_a_shape_between_measured_ones_is_not_called_measured(swept_db):
    # batch 3 x kv 200 rounds up to the measured batch 4 x kv 256; it was never measured itself
    dec = load(swept_db[0], "cpu").choose(small(batch_size=3, kv_len=200))
    assert dec.source == "learned" and "predicted at its cell, batch_size=3 q_len=1 kv_len=197," in dec.reason


def test_nearest_neighbour_in_the_same_family(swept_db):
    d = load(swept_db[0], "cpu")
    d.learned = False
    dec = d.choose(small(batch_size=64, kv_len=256))
    assert dec.source == "nearest" and "batch_size=4 q_len=1 kv_len=256" in dec.reason


def test_learned_prediction_between_measured_shapes(swept_db):
    dec = load(swept_db[0], "cpu").choose(small(batch_size=2, kv_len=128))   # between b 1..4, kv 64..256
    assert dec.source == "learned" and dec.expected_us > 0 and "predicted" in dec.reason


def test_rule_where_the_family_was_never_measured(swept_db):
    dec = load(swept_db[0], "cpu").choose(small(head_dim=128))
    assert dec.source == "rule" and dec.expected_us is None and "rule vllm-0.33" in dec.reason


def test_cpu_measurements_are_never_applied_to_a_gpu(swept_db):
    with pytest.raises(ValueError, match="device 'NVIDIA H200' is not in the database; it holds: CPU"):
        load(swept_db[0], "NVIDIA H200")


def fixture_table(entries):
    t = Table()
    for prob, pid_us in entries:
        for pipe, us in pid_us:
            t.add(prob.cell(), Timing(pipe, us, 1.0, 0.01))
    return t


SCOUT = dict(num_qo_heads=40, num_kv_heads=8, head_dim=128)
XQA = Pipeline("trtllm-xqa", "bf16", "fp8", "fp8", tactic=(("enable_pdl", False),))
FA2_CUDA_CORE = Pipeline("fa2", "bf16", "fp8", "bf16", out_quant=True, tactic=(("fixed_split_size", 0),))


def test_never_returns_an_ineligible_kernel():
    # a (corrupt) table says fa2 CUDA-core decode won for group size 5, which it cannot run
    p = small(**SCOUT, kv_dtype="fp8", out_dtype="fp8")
    d = Dispatcher(fixture_table([(p, [(FA2_CUDA_CORE, 10.0), (XQA, 50.0)])]), H200)
    assert d.choose(p).pipeline == XQA.id


def test_the_rules_choice_stands_within_half_a_percent_without_a_spread():
    p = small(**SCOUT, kv_dtype="fp8", out_dtype="bf16")
    rule_pick = Pipeline("trtllm-xqa", "bf16", "fp8", "bf16", tactic=(("enable_pdl", True),))
    other = Pipeline("fa2-tc", "bf16", "fp8", "bf16", tactic=(("fixed_split_size", 0),))
    d = Dispatcher(fixture_table([(p, [(rule_pick, 100.5), (other, 100.0)])]), H200)
    dec = d.choose(p)
    assert dec.pipeline == rule_pick.id and "tie within noise" in dec.reason
    d2 = Dispatcher(fixture_table([(p, [(rule_pick, 130.0), (other, 100.0)])]), H200)
    assert d2.choose(p).pipeline == other.id


PDL_ON = Pipeline("trtllm-xqa", "bf16", "bf16", "bf16", tactic=(("enable_pdl", True),))     # vLLM 0.33's
PDL_OFF = Pipeline("trtllm-xqa", "bf16", "bf16", "bf16", tactic=(("enable_pdl", False),))


def test_the_rule_stands_within_a_quarter_of_the_spread_not_all_of_it():
    # BF16 XQA at batch 1 on the H200: PDL off measured 3-13% faster than on (vLLM 0.33's choice) in
    # every cell, with an interquartile range of 4-9% per round; the median is far steadier than that
    p = small(**SCOUT, kv_dtype="bf16", out_dtype="bf16")

    def decision(on_us: float):
        t = Table()
        t.add(p.cell(), Timing(PDL_ON, on_us, 0.8, 0.003))
        t.add(p.cell(), Timing(PDL_OFF, 10.0, 0.8, 0.003))
        return Dispatcher(t, H200).choose(p)
    assert decision(10.5).pipeline == PDL_OFF.id    # 5% slower: within its spread (8%), beyond a quarter of it
    assert decision(10.15).pipeline == PDL_ON.id    # 1.5% slower: the rule's choice stands
    why = decision(10.5).reason
    assert "1.05x faster than vllm-0.33's choice trtllm-xqa[enable_pdl=true] 10.5 us (within the measured " \
           "spread, beyond the keep margin)" in why and "tie" not in why, why


def test_a_mixed_batch_read_from_uniform_ones_keeps_the_rule_within_its_wider_spread():
    # no mixed batch measured in the family: the prior's times are estimates, so the rule's choice stands
    # within ragged_keep times the usual margin, where a measured cell's would not
    from dispatcher.predictor import PredictorConfig
    t = Table()
    for b in (8, 16, 32):
        for kv in (1024, 2048, 4096, 8192, 16384):
            cell = small(**SCOUT, kv_dtype="bf16", out_dtype="bf16", batch_size=b, kv_len=kv).cell()
            us = 5.0 + b * kv / 4000
            t.add(cell, Timing(PDL_ON, 1.05 * us, 0.06 * us, 0.003))
            t.add(cell, Timing(PDL_OFF, us, 0.06 * us, 0.003))
    mixed = small(**SCOUT, kv_dtype="bf16", out_dtype="bf16", batch_size=16, kv_len=2048, max_kv_len=8192)
    assert Dispatcher(t, H200).choose(mixed).pipeline == PDL_ON.id
    assert Dispatcher(t, H200, predictor=PredictorConfig(ragged_keep=1)).choose(mixed).pipeline == PDL_OFF.id
    assert Dispatcher(t, H200).choose(mixed.with_sizes(max_kv_len=2048)).pipeline == PDL_OFF.id   # uniform


def test_import_dispatcher_is_light():
    code = ("import sys, dispatcher; "
            "print(sorted(m for m in ('torch','fastapi','optuna','flashinfer') if m in sys.modules))")
    assert subprocess.check_output([sys.executable, "-c", code], cwd=ROOT, text=True).strip() == "[]"


def test_choose_does_no_io_after_load(swept_db, monkeypatch):
    import builtins
    import sqlite3
    d = load(swept_db[0], "cpu")

    def refuse(*a, **k):
        raise AssertionError("I/O on the hot path")
    monkeypatch.setattr(sqlite3, "connect", refuse)
    monkeypatch.setattr(builtins, "open", refuse)
    for p in (small(), small(batch_size=3, kv_len=100), small(head_dim=128)):
        assert d.choose(p).kernel == "torch-sdpa"


def test_a_prefill_just_past_a_query_tile_is_read_from_shapes_past_one():
    # FA3 pays a whole 128-row tile for the 129th row, FA2 barely: measured at and just past multiples of 128
    fa3 = Pipeline("fa3", "bf16", "bf16", "bf16")
    fa2 = Pipeline("fa2", "bf16", "bf16", "bf16", tactic=(("fixed_split_size", 1024),))

    def pre(q):
        return small(phase="prefill", **SCOUT, batch_size=8, q_len=q, kv_len=q)
    t = fixture_table([(pre(q), [(fa3, -(-q // 128) * 12.8), (fa2, q * 0.13)])
                       for q in (64, 100, 128, 129, 192, 256, 257, 384, 512)])
    dec = Dispatcher(t, H200).choose(pre(140))
    assert dec.source == "learned" and dec.kernel == "fa2", dec.reason       # FA3 18% slower at 140 rows
    assert Dispatcher(t, H200).choose(pre(240)).kernel == "fa3"              # both in two tiles: FA3


def test_prefill_between_keep_lets_the_rule_stand_at_an_unmeasured_prefill_batch():
    # batch 6 lies between the measured rows 4 and 8: FA2 reads 4% faster than FA3 (vLLM 0.33's pick), beyond
    # the usual keep margin (a quarter of the 6% spread) but within 12 of them; measured batches keep the margin
    from dispatcher.predictor import PredictorConfig
    fa3 = Pipeline("fa3", "bf16", "bf16", "bf16")
    fa2 = Pipeline("fa2", "bf16", "bf16", "bf16", tactic=(("fixed_split_size", 1024),))
    t = Table()
    for b in (1, 2, 4, 8, 16):
        for q in (128, 256, 512):
            cell = small(**SCOUT, phase="prefill", batch_size=b, q_len=q, kv_len=q).cell()
            us = 3.0 + b * q / 50
            t.add(cell, Timing(fa3, us, 0.06 * us, 0.003))
            t.add(cell, Timing(fa2, 0.96 * us, 0.06 * us, 0.003))
    between = small(**SCOUT, phase="prefill", batch_size=6, q_len=256, kv_len=256)
    keep, off = PredictorConfig(), PredictorConfig(prefill_between_keep=0)
    assert keep.prefill_between_keep == 12 and Dispatcher(t, H200, predictor=off).choose(between).kernel == "fa2"
    kept = Dispatcher(t, H200).choose(between)
    assert kept.kernel == "fa3" and "a batch size never measured" in kept.reason, kept.reason
    # a measured batch size at an unmeasured length is predicted too, with the usual margin
    row = between.with_sizes(batch_size=8, q_len=384, kv_len=384)
    assert Dispatcher(t, H200, predictor=keep).choose(row).kernel == "fa2"
    def faster(share: float) -> Table:        # the same table with FA2 at `share` of FA3's time
        out = Table()
        for cell, timings in t.by_cell.items():
            for pid, tm in timings.items():
                out.add(cell, tm if pid == fa3.id else Timing(fa2, share / 0.96 * tm.median_us, tm.spread_us, 0.003))
        return out
    # 10% faster is within 12 margins (18%) but beyond 4 (6%); 30% faster is beyond 12: the rule does not stand
    assert Dispatcher(faster(0.9), H200).choose(between).kernel == "fa3"
    four = PredictorConfig(prefill_between_keep=4)
    assert Dispatcher(faster(0.9), H200, predictor=four).choose(between).kernel == "fa2"
    assert Dispatcher(faster(0.7), H200).choose(between).kernel == "fa2"


def test_an_estimate_beyond_the_measured_sizes_says_it_is_extrapolated():
    # a batch 4x past the shipped grid's largest read "from measured neighbours"; the note names the cell's
    # sizes, as the rest of the reason does (40000 new tokens are the cell of 39937)
    shipped = load(ROOT / "heuristics.db", "NVIDIA H200")
    far = AttentionProblem(phase="decode", num_qo_heads=40, num_kv_heads=8, batch_size=2000, kv_len=1000)
    dec = shipped.choose(far)
    assert dec.source == "learned" and "(extrapolated: batch_size 2000 over the 512 measured at most)" in dec.reason
    near = shipped.choose(far.with_sizes(batch_size=200))
    assert near.source == "learned" and "extrapolated" not in near.reason
    long_prefill = AttentionProblem(phase="prefill", num_qo_heads=40, num_kv_heads=8, batch_size=2, q_len=40000,
                                    kv_len=40000)
    why = shipped.choose(long_prefill).reason
    assert "(extrapolated: q_len 39937 over the 8192 measured at most; kv_len 39937 over the 32768" in why


def test_a_reload_decides_the_asked_problems_before_the_swap_not_on_the_next_choose(monkeypatch):
    """keep_fresh's swap_table: before, it emptied the caches, so each asked problem's next choose() decided
    its cell again on the hot path (~4 ms each here); now they are decided in swap_table from the new table."""
    p = small(**SCOUT, kv_dtype="fp8", out_dtype="bf16")
    xqa = Pipeline("trtllm-xqa", "bf16", "fp8", "bf16", tactic=(("enable_pdl", True),))
    fa2 = Pipeline("fa2-tc", "bf16", "fp8", "bf16", tactic=(("fixed_split_size", 0),))
    d = Dispatcher(fixture_table([(p, [(xqa, 10.0), (fa2, 30.0)])]), H200)
    assert d.choose(p).pipeline == xqa.id
    d.swap_table(fixture_table([(p, [(xqa, 30.0), (fa2, 10.0)])]))
    monkeypatch.setattr(d, "_decide", lambda *a, **k: pytest.fail("decided on the hot path after a reload"))
    dec = d.choose(p)
    assert dec.pipeline == fa2.id and dec.expected_us == 10.0 and d.table is d.decided.table


def test_a_reload_gives_rule_reasons_of_the_new_table():
    """A review: re-deciding in swap_table read the old table for the rule's reason, so a problem asked while the
    db held only another GPU's rows kept "holds no measurements of NVIDIA H200 ... (name that device)" after the
    H200's first rows came in."""
    d = Dispatcher(Table(), H200)
    d.elsewhere = ("NVIDIA H100 80GB HBM3",)
    asked = small(**SCOUT, batch_size=8, kv_len=4096)
    assert "holds no measurements of NVIDIA H200" in d.choose(asked).reason
    other = small(num_qo_heads=32, num_kv_heads=8, head_dim=128, batch_size=8, kv_len=4096)
    d.swap_table(fixture_table([(other, [(Pipeline("trtllm-xqa", "bf16", "bf16", "bf16",
                                                   tactic=(("enable_pdl", False),)), 50.0)])]))
    assert d.choose(asked).reason.startswith("no measurement of this shape family on NVIDIA H200")


def test_a_reload_decides_first_the_cells_holding_most_problems(monkeypatch):
    """Within its time (REDECIDE_S; 0 here: one cell), the cell most problems were asked of goes first, not
    the latest asked; among equals the earliest asked, as a batch size captured at start-up."""
    import dispatcher.dispatch as dispatch
    monkeypatch.setattr(dispatch, "REDECIDE_S", 0.0)
    hot = [small(**SCOUT, kv_dtype="fp8", out_dtype="bf16", batch_size=8, kv_len=k) for k in (2048, 2050, 2052)]
    rare = small(**SCOUT, kv_dtype="fp8", out_dtype="bf16", batch_size=3, kv_len=900)
    d = Dispatcher(Table(), H200)
    for p in (*hot, rare):
        d.choose(p)
    d.swap_table(Table())
    assert set(d.decided.asked) == set(hot)


def test_a_measured_winner_left_out_for_its_plan_is_named_in_the_reason():
    """The shipped db's 32 x 16k (longest 128k) FP8 cell: fa2-tc with a fixed split measured 2.23x faster than
    XQA, but a batch given by its statistics alone may need more chunks than FlashInfer's graph plan holds, so
    XQA is decided; the reason said only "XQA 1.03x faster than XQA with PDL", contradicting the db."""
    p = AttentionProblem(phase="decode", batch_size=32, kv_len=16384, max_kv_len=131072, kv_dtype="fp8",
                         out_dtype="bf16", **SCOUT)
    split = Pipeline("fa2-tc", "bf16", "fp8", "bf16", tactic=(("fixed_split_size", 1024),))
    xqa = Pipeline("trtllm-xqa", "bf16", "fp8", "bf16", tactic=(("enable_pdl", False),))
    d = Dispatcher(fixture_table([(p, [(split, 618.4), (xqa, 1381.3)])]), H200)
    dec = d.choose(p)
    assert dec.pipeline == xqa.id and "; the cell's fastest, fa2-tc[fixed_split_size=1024] 618.4 us, left out: " \
        "fixed_split_size=1024 needs about 48 KV chunks" in dec.reason and "seq_lens would count" in dec.reason
    # the layout measured, 39 chunks within the 41 held: the same problem (equal to p), asked with its lengths;
    # it was answered from p's cache entry, as a batch whose lengths may not fit would be from this one's
    lens = [131072] + [12684] * 31
    exact = AttentionProblem.from_seq_lens(seq_lens=lens, phase="decode", kv_dtype="fp8", out_dtype="bf16", **SCOUT)
    assert exact == p and d.choose(exact).pipeline == split.id and d.choose(p).pipeline == xqa.id


def test_the_left_out_note_is_said_for_each_problem_not_the_first_of_its_cell():
    """A review: the note was cached with the cell's decision, so a problem given its lengths was told
    "about 48 chunks ... seq_lens would count them exactly" from a problem asked before without them."""
    p = AttentionProblem(phase="decode", batch_size=32, kv_len=16384, max_kv_len=131072, kv_dtype="fp8",
                         out_dtype="bf16", **SCOUT)
    split = Pipeline("fa2-tc", "bf16", "fp8", "bf16", tactic=(("fixed_split_size", 1024),))
    xqa = Pipeline("trtllm-xqa", "bf16", "fp8", "bf16", tactic=(("enable_pdl", False),))
    d = Dispatcher(fixture_table([(p, [(split, 618.4), (xqa, 1381.3)])]), H200)
    assert "needs about 48 KV chunks" in d.choose(p).reason
    lens = [131072] + [16400] * 10 + [10915] * 21                   # 49 chunks: refused, counted exactly
    exact = d.choose(AttentionProblem.from_seq_lens(seq_lens=lens, phase="decode", kv_dtype="fp8",
                                                    out_dtype="bf16", **SCOUT))
    assert exact.pipeline == xqa.id and "needs 49 KV chunks" in exact.reason and "seq_lens would" not in exact.reason
