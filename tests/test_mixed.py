"""Mixed-length batches: the problem's mean and longest request, their validation, the layouts a sweep
measures, decisions that follow each kernel's ragged cost, and the field through CLI, REST and store."""
import dataclasses
import json
import lzma
import sqlite3

import pytest

from dispatcher import AttentionProblem
from dispatcher.device import H200
from dispatcher.dispatch import Dispatcher, load
from dispatcher.pipeline import Pipeline
from dispatcher.problem import ProblemError
from dispatcher.table import Table, Timing
from tests.conftest import ROOT
from tuner.grid import FULL, MIXED, sizes
from tuner.lengths import lengths

TP4 = dict(phase="decode", num_qo_heads=10, num_kv_heads=2, head_dim=128, page_size=16, kv_dtype="fp8",
           out_dtype="bf16")
XQA = Pipeline("trtllm-xqa", "bf16", "fp8", "bf16", tactic=(("enable_pdl", True),))
TC = Pipeline("fa2-tc", "bf16", "fp8", "bf16", tactic=(("fixed_split_size", 0),))


def test_max_kv_len_defaults_to_kv_len_and_out_of_range_names_the_field():
    p = AttentionProblem(**TP4, batch_size=4, kv_len=1000)
    assert p.max_kv_len == 1000 and p.skew == 1.0 and "longest" not in p.describe()
    assert p.key() == AttentionProblem(**TP4, batch_size=4, kv_len=1000, max_kv_len=1000).key()
    with pytest.raises(ProblemError) as e:
        AttentionProblem(**TP4, batch_size=4, kv_len=1000, max_kv_len=999)
    assert e.value.field == "max_kv_len"
    assert str(e.value).startswith("max_kv_len 999 is out of range for batch_size 4 x kv_len 1000; the longest "
                                   "request holds from kv_len (the mean) to 3997 tokens")
    with pytest.raises(ProblemError, match="max_kv_len 3998 is out of range"):
        AttentionProblem(**TP4, batch_size=4, kv_len=1000, max_kv_len=3998)
    top = AttentionProblem(**TP4, batch_size=4, kv_len=1000, max_kv_len=3997)     # the others at q_len each
    assert top.skew == pytest.approx(3.997) and "longest 3997" in top.describe()


def test_from_seq_lens_takes_the_batch_statistics_and_refuses_a_second_source():
    p = AttentionProblem.from_seq_lens(seq_lens=[32768] + [1600] * 63, **{k: v for k, v in TP4.items()})
    assert (p.batch_size, p.kv_len, p.max_kv_len) == (64, 2087, 32768)
    assert p.seq_lens == (32768,) + (1600,) * 63
    assert p == dataclasses.replace(p, seq_lens=None)          # the lengths are not the problem's identity
    with pytest.raises(ProblemError, match="kv_len comes from seq_lens; leave it out"):
        AttentionProblem.from_seq_lens(seq_lens=[10, 20], kv_len=15, **TP4)
    with pytest.raises(ProblemError, match="seq_lens is empty"):
        AttentionProblem.from_seq_lens(seq_lens=[], **TP4)
    back = AttentionProblem.from_dict(json.loads(json.dumps(p.to_dict())))
    assert back == p and back.seq_lens == p.seq_lens
    with pytest.raises(ProblemError, match="max_kv_len 5000 disagrees with seq_lens"):
        AttentionProblem.from_dict({**p.to_dict(), "max_kv_len": 5000})


@pytest.mark.parametrize("b,kv,top", [(2, 100, 199), (8, 700, 4200), (64, 2100, 32768), (256, 500, 16000),
                                      (3, 17, 40), (1, 1000, 1000)])
@pytest.mark.parametrize("layout", ["one-long", "spread"])
def test_both_layouts_keep_the_batch_statistics(b, kv, top, layout):
    p = AttentionProblem(**TP4, batch_size=b, kv_len=kv, max_kv_len=top)
    lens = lengths(p, layout)
    assert len(lens) == b and sum(lens) == b * kv and max(lens) == top and min(lens) >= p.q_len
    if layout == "one-long" and b > 2:
        assert max(lens[1:]) - min(lens[1:]) <= 1          # the others as equal as the mean allows


def test_the_mixed_grid_adds_a_skew_axis_within_what_each_batch_allows():
    uniform, mixed = sizes("decode", FULL), sizes("decode", MIXED)
    assert set(uniform) < set(mixed) and len(mixed) == 360
    assert sizes("decode", MIXED, "bf16") == uniform    # a BF16 cache's mixed batches are not modelled: not measured
    for b, _, kv, top in mixed:
        assert top in {kv * s for s in (1, 2, 4, 8, 16, 32)} and top <= 131072 and top <= b * kv - (b - 1)
    assert (64, 1, 2048, 65536) in mixed and (2, 1, 2048, 4096) not in mixed     # batch 2 cannot be 2x skewed


def uniform_table() -> Table:
    """The issue's H200 times of uniform batches (FP8 KV, 10/2 heads): XQA wins at both lengths; one
    request alone at 32k takes XQA about what the issue's mixed batch did (326 us)."""
    t = Table()
    for kv, x, tc in ((2048, 25, 20), (4096, 45, 30), (16384, 160, 90), (32768, 300, 170)):
        p = AttentionProblem(**TP4, batch_size=1, kv_len=kv)
        t.add(p, Timing(XQA, x, 1.0, 0.04))
        t.add(p, Timing(TC, tc, 1.0, 0.003))
    for b in (32, 64, 128):
        for kv, x, tc in ((2048, 30, 46), (4096, 55, 80), (16384, 180, 210), (32768, 351, 404)):
            p = AttentionProblem(**TP4, batch_size=b, kv_len=kv)
            t.add(p, Timing(XQA, x * b / 64, 1.0, 0.04))
            t.add(p, Timing(TC, tc * b / 64, 1.0, 0.003))
    return t


def test_one_long_request_flips_the_decision_that_a_max_or_mean_key_gets_wrong():
    d = Dispatcher(uniform_table(), H200)
    mixed = d.choose(AttentionProblem(**TP4, batch_size=64, kv_len=2100, max_kv_len=32768))
    # XQA's time follows its longest request (~300 us alone + the rest), FA2-TC's the total (~46 us)
    assert mixed.kernel == "fa2-tc" and mixed.source == "learned", mixed.reason
    assert "max_kv_len=32768" in mixed.reason and "longest request" in mixed.reason
    assert d.choose(AttentionProblem(**TP4, batch_size=64, kv_len=32768)).kernel == "trtllm-xqa"   # max key
    assert d.choose(AttentionProblem(**TP4, batch_size=64, kv_len=2100)).kernel == "trtllm-xqa"    # mean key


def test_measured_mixed_batches_outrank_the_prior():
    t = uniform_table()
    measured = AttentionProblem(**TP4, batch_size=64, kv_len=2048, max_kv_len=32768)
    t.add(measured, Timing(XQA, 40.0, 1.0, 0.04))        # a family with mixed batches measured: the model reads them
    t.add(measured, Timing(TC, 60.0, 1.0, 0.003))
    dec = Dispatcher(t, H200).choose(measured)
    assert dec.kernel == "trtllm-xqa" and dec.source == "measured"


def test_measured_mixed_batches_correct_the_prior_nearby_and_leave_uniform_batches_alone():
    # a measured mixed batch where FA2-TC took 10x what the prior said (and XQA what it said): a nearby
    # unmeasured one gets the same correction, so XQA wins it where the prior alone chose FA2-TC
    from dispatcher.predictor import Predictor, PredictorConfig
    t = uniform_table()
    near = AttentionProblem(**TP4, batch_size=64, kv_len=2100, max_kv_len=32768)
    prior = {x.pipeline.id: x.median_us for x in Predictor().fit(t, H200).predict(near)}
    measured = AttentionProblem(**TP4, batch_size=64, kv_len=2048, max_kv_len=30000)
    at = {x.pipeline.id: x.median_us for x in Predictor().fit(t, H200).predict(measured)}
    t.add(measured, Timing(XQA, at[XQA.id], 1.0, 0.04))
    t.add(measured, Timing(TC, 10 * at[TC.id], 1.0, 0.003))
    model = Predictor().fit(t, H200)
    got = {x.pipeline.id: x.median_us for x in model.predict(near)}
    assert got[XQA.id] == pytest.approx(prior[XQA.id]) and got[TC.id] == pytest.approx(10 * prior[TC.id])
    dec = Dispatcher(t, H200).choose(near)
    assert Dispatcher(uniform_table(), H200).choose(near).kernel == "fa2-tc"
    assert dec.kernel == "trtllm-xqa" and "scaled by its error at the 1 nearest measured mixed batches" in dec.reason
    # uniform batches of that family are read from its uniform cells only; mixed_residual_k=0 reads every
    # measured cell as a plane's point, as before
    flat = AttentionProblem(**TP4, batch_size=48, kv_len=3000)
    alone = {x.pipeline.id: x.median_us for x in Predictor().fit(uniform_table(), H200).predict(flat)}
    assert {x.pipeline.id: x.median_us for x in model.predict(flat)} == pytest.approx(alone)
    planes = Predictor(PredictorConfig(mixed_residual_k=0)).fit(t, H200)
    assert not planes.uses_ragged_prior(near) and model.uses_ragged_prior(near)


def test_a_bf16_cache_s_measured_mixed_batches_stay_out_of_the_model_yet_count_as_measured():
    # as corrections they made every H200 and H100 set worse (benchmarks/results/bf16-mixed-corrections/): a
    # nearby batch is the prior's, as if none were measured; the one measured is still decided as measured
    from dispatcher.predictor import Predictor, PredictorConfig
    t, bf16 = Table(), dict(TP4, kv_dtype="bf16")
    xqa, tc = (dataclasses.replace(x, kv_dtype="bf16") for x in (XQA, TC))
    for c in (u := uniform_table()).by_cell:     # the same times, within BF16's error budget
        for x in u.timings(c):
            pipe = xqa if x.pipeline == XQA else tc
            t.add(dataclasses.replace(c, kv_dtype="bf16"), Timing(pipe, x.median_us, 1.0, 0.01))
    near = AttentionProblem(**bf16, batch_size=64, kv_len=2100, max_kv_len=32768)
    measured = AttentionProblem(**bf16, batch_size=64, kv_len=2048, max_kv_len=30000).cell()
    prior = Dispatcher(t, H200).choose(near)
    at = {x.pipeline.id: x.median_us for x in Predictor().fit(t, H200).predict(measured)}
    t.add(measured, Timing(xqa, at[xqa.id], 1.0, 0.01))
    t.add(measured, Timing(tc, 10 * at[tc.id], 1.0, 0.003))   # FA2-TC took 10x what the prior said
    assert prior.kernel == "fa2-tc" and Dispatcher(t, H200).choose(near).kernel == "fa2-tc"
    assert Dispatcher(t, H200).choose(measured).source == "measured"
    old = Dispatcher(t, H200, predictor=PredictorConfig(mixed_residual_16bit_kv=1)).choose(near)
    assert old.kernel == "trtllm-xqa" and "scaled by its error" in old.reason
    alone = Table()                    # a family measured mixed only keeps them: nothing else to read from
    for x in t.timings(measured):
        alone.add(measured, x)
    assert Dispatcher(alone, H200).choose(near).source in ("learned", "nearest")


def test_the_correction_keeps_what_the_mixed_batches_measured_about_accuracy_and_names_only_its_own():
    near = AttentionProblem(**TP4, batch_size=64, kv_len=2100, max_kv_len=32768)
    m = AttentionProblem(**TP4, batch_size=64, kv_len=2048, max_kv_len=30000)
    t = uniform_table()
    t.add(m, Timing(XQA, 20.0, 1.0, 0.9))               # fast there, but over FP8's error budget
    t.add(m, Timing(TC, 60.0, 1.0, 0.003))
    dec = Dispatcher(t, H200).choose(near)
    assert dec.kernel == "fa2-tc" and "over the 0.08 relative-error budget: trtllm-xqa" in dec.reason, dec.reason
    only_tc = uniform_table()                           # a correction for FA2-TC alone: XQA's prior stands
    only_tc.add(m, Timing(TC, 4000.0, 1.0, 0.003))
    dec = Dispatcher(only_tc, H200).choose(near)
    assert dec.kernel == "trtllm-xqa" and "scaled by its error" not in dec.reason, dec.reason


def test_a_family_measured_only_in_mixed_batches_keeps_its_planes():
    from dispatcher.predictor import Predictor
    t = Table()
    for b in (16, 32, 64):
        for kv in (1024, 4096):
            p = AttentionProblem(**TP4, batch_size=b, kv_len=kv, max_kv_len=8 * kv)
            t.add(p, Timing(XQA, b * kv / 100, 1.0, 0.04))
            t.add(p, Timing(TC, b * kv / 200, 1.0, 0.003))
    model = Predictor().fit(t, H200)
    for q in (AttentionProblem(**TP4, batch_size=24, kv_len=2048, max_kv_len=16384),
              AttentionProblem(**TP4, batch_size=24, kv_len=2048)):
        assert {x.pipeline.id for x in model.predict(q)} == {XQA.id, TC.id}


def test_the_cli_and_rest_take_max_kv_len(tmp_path):
    from tests.conftest import cli_and_rest
    q = dict(phase="decode", num_qo_heads=10, num_kv_heads=2, head_dim=128, kv_dtype="fp8", batch_size=64,
             kv_len=2100)
    r = cli_and_rest(tmp_path, q, "max_kv_len", 32768, 10)
    assert r["cli_ok"][0] == 0, r["cli_ok"]
    assert "max_kv_len=32768" in r["cli_ok"][1]["reason"] or r["cli_ok"][1]["source"] == "rule"
    assert r["cli_bad"][0] != 0 and "max_kv_len 10 is out of range" in r["cli_bad"][1]
    assert r["rest_ok"].status_code == 200, r["rest_ok"].text
    assert r["rest_bad"].status_code == 422 and "max_kv_len 10 is out of range" in r["rest_bad"].text


def test_a_cpu_sweep_measures_a_mixed_batch_per_request_and_stores_its_lengths(tmp_path):
    p = AttentionProblem.from_seq_lens(seq_lens=[300, 40, 50, 60], phase="decode", num_qo_heads=8, num_kv_heads=2,
                                       head_dim=64, page_size=16)
    from tests.conftest import cpu_sweep_of
    db = cpu_sweep_of(tmp_path, p)
    rows = sqlite3.connect(db).execute("select status, relerr, max_kv_len, kv_len, lengths from measurements")
    rows = rows.fetchall()
    assert rows and all(s == "ok" for s, *_ in rows), rows        # every output checked per request
    assert {(m, k, ln) for _, _, m, k, ln in rows} == {(300, 113, "[300, 40, 50, 60]")}


def test_an_old_database_opens_as_uniform_batches_and_migrates(tmp_path):
    old = tmp_path / "old.db"          # the H200 grid shipped before schema 4
    old.write_bytes(lzma.decompress((ROOT / "benchmarks/results/h200-2026-12-04c/callC-warm-grid.db.xz").read_bytes()))
    con = sqlite3.connect(old)
    assert con.execute("select value from meta").fetchone()[0] == "3"
    con.close()
    d = load(old, "NVIDIA H200")
    assert d.choose(AttentionProblem(**TP4, batch_size=64, kv_len=2048, max_kv_len=32768)).source == "learned"
    from tuner.store import Store
    Store(old).close()
    con = sqlite3.connect(old)
    assert con.execute("select value from meta").fetchone()[0] == "6"
    assert con.execute("select count(*) from measurements where max_kv_len != kv_len").fetchone()[0] == 0
    assert con.execute("select count(*) from measurements where kv_balance is not null").fetchone()[0] == 0
    assert con.execute("select count(*) from measurements where alone is not null").fetchone()[0] == 0   # a grid


def test_a_fixed_split_plan_pays_for_the_longest_request_in_every_request():
    # in CUDA-graph mode FlashInfer pads each request to the longest one's chunk count: measured on the
    # H200 at batch 19, mean 1252, longest 14741: 209 us against 37 us for the default plan
    t = uniform_table()
    split = Pipeline("fa2-tc", "bf16", "fp8", "bf16", tactic=(("fixed_split_size", 1024),))
    for b in (1, 32, 64, 128):
        for kv in (2048, 4096, 16384, 32768):
            t.add(AttentionProblem(**TP4, batch_size=b, kv_len=kv), Timing(split, kv * b / 5000, 1.0, 0.003))
    uniform = Dispatcher(t, H200).choose(AttentionProblem(**TP4, batch_size=64, kv_len=2048))
    assert uniform.pipeline == split.id                   # the fastest at the mean
    mixed = Dispatcher(t, H200).choose(AttentionProblem(**TP4, batch_size=64, kv_len=2100, max_kv_len=32768))
    assert mixed.pipeline == TC.id, mixed.reason


def scout_table(kv_dtype: str) -> tuple[Table, dict]:
    """40/8 heads, batch 1-64 x 2k-32k: FA2-TC's default plan cheaper per token than XQA, dearer per call."""
    scout = dict(TP4, num_qo_heads=40, num_kv_heads=8, kv_dtype=kv_dtype)
    xqa, tc = (Pipeline(k, "bf16", kv_dtype, "bf16", tactic=knob) for k, knob in
               (("trtllm-xqa", (("enable_pdl", True),)), ("fa2-tc", (("fixed_split_size", 0),))))
    t = Table()
    for b in (1, 8, 16, 32, 64):
        for kv in (2048, 4096, 16384, 32768):
            p = AttentionProblem(**scout, batch_size=b, kv_len=kv)
            t.add(p, Timing(xqa, 5 + b * kv / 3000, 0.5, 0.04 if kv_dtype == "fp8" else 0.003))
            t.add(p, Timing(tc, 8 + b * kv / 4000, 0.5, 0.003))
    return t, scout


def test_a_large_batch_runs_its_longest_request_unsplit_in_the_default_fa2_plan():
    # batch 64 x 8 KV heads is ~4 waves of the H200's 132 SMs: FlashInfer's planner splits no request,
    # so the 32k request costs FA2-TC what a one-wave batch at 32k does (measured at batch 77-144 with
    # one 35-56k request: the default plan 1.8-2.4x slower than it is at the mean); BF16 XQA's costs it
    # about as that request alone, after the rest
    t, scout = scout_table("bf16")
    d = Dispatcher(t, H200)
    assert d.choose(AttentionProblem(**scout, batch_size=64, kv_len=2048)).kernel == "fa2-tc"     # uniform
    mixed = d.choose(AttentionProblem(**scout, batch_size=64, kv_len=2100, max_kv_len=32768))
    assert mixed.kernel == "trtllm-xqa", mixed.reason
    small = d.choose(AttentionProblem(**scout, batch_size=8, kv_len=2100, max_kv_len=16000))  # < 2 waves: split
    assert small.kernel == "fa2-tc", small.reason


def test_fp8_xqa_runs_the_longest_request_unsplit_in_a_batch_at_any_wave_count():
    # FP8 XQA splits a request alone 12 ways but none in a batch past half a wave: its longest request
    # costs one wave at that length, as FA2-TC's does, not the request alone (benchmarks/results/fp8-mixed-prior/)
    from dispatcher.predictor import PredictorConfig
    t, scout = scout_table("fp8")
    mixed = AttentionProblem(**scout, batch_size=64, kv_len=2100, max_kv_len=32768)
    assert Dispatcher(t, H200).choose(mixed).kernel == "fa2-tc"
    old = Dispatcher(t, H200, predictor=PredictorConfig(fp8_longest_alone=1)).choose(mixed)
    assert old.kernel == "trtllm-xqa", old.reason


def partial_wave_table(kv_dtype: str) -> tuple[Table, Pipeline, Pipeline]:
    """10/2 heads, batch 96 (1.45 waves of the H200's 132 SMs): FA2-TC 8% ahead of XQA at the mean,
    XQA's one wave at the longest length 185 us."""
    xqa = Pipeline("trtllm-xqa", "bf16", kv_dtype, "bf16", tactic=(("enable_pdl", True),))
    tc = Pipeline("fa2-tc", "bf16", kv_dtype, "bf16", tactic=(("fixed_split_size", 0),))
    t = Table()
    for b, kv, x, c in ((96, 8192, 180, 165), (66, 16384, 185, 200), (96, 16384, 350, 330), (64, 8192, 120, 110),
                        (64, 16384, 230, 220)):
        p = AttentionProblem(**dict(TP4, kv_dtype=kv_dtype), batch_size=b, kv_len=kv)
        t.add(p, Timing(xqa, x, 1.0, 0.04))
        t.add(p, Timing(tc, c, 1.0, 0.003))
    return t, xqa, tc


def test_fp8_mixed_batches_past_one_wave_price_the_balanced_plan_by_how_the_tokens_spread():
    # FA2-TC's default plan past one wave (FP8 KV) costs the batch at the mean with one long request
    # but up to 2.2x with few long requests among many short (H200 and H100, benchmarks/results/waves/):
    # the same batch size, mean and longest decide differently
    from dispatcher.predictor import PredictorConfig
    t, xqa, tc = partial_wave_table("fp8")
    one_long = AttentionProblem(**TP4, batch_size=96, kv_len=8192, max_kv_len=16384)
    spread_out = AttentionProblem.from_seq_lens(seq_lens=lengths(one_long, "spread"), **TP4)
    assert (spread_out.batch_size, spread_out.kv_len, spread_out.max_kv_len) == (96, 8192, 16384)
    assert one_long.kv_balance == 0 and 0.7 < spread_out.kv_balance < 0.8
    d = Dispatcher(t, H200)
    assert d.choose(one_long).pipeline == tc.id
    assert d.choose(spread_out).pipeline == xqa.id
    assert "kv_balance=0.7" in d.choose(spread_out).reason
    assert Dispatcher(t, H200, predictor=PredictorConfig(fp8_unbalanced=0.0)).choose(spread_out).pipeline == tc.id
    below = AttentionProblem.from_seq_lens(seq_lens=lengths(one_long.with_sizes(batch_size=64), "spread"), **TP4)
    assert {x.pipeline.id: x.median_us for x in d.model.ragged_prior(below.cell())}[tc.id] == 110  # 0.97 waves
    t, xqa, tc = partial_wave_table("bf16")
    bf16 = AttentionProblem.from_seq_lens(seq_lens=spread_out.seq_lens, **dict(TP4, kv_dtype="bf16"))
    assert Dispatcher(t, H200).choose(bf16).pipeline == tc.id


def test_the_vllm_checks_one_long_fp8_step_goes_to_xqa_not_a_fixed_split():
    # tests/gpu/vllm_forward.py's step "one long: 31 x 500 + 16000" (40/8, FP8 KV and output): vLLM's XQA then
    # quant 179-181 us; the fixed split of 1024 pages the plugin chose 333 us on an H200 and 367-370 on H100s
    # (benchmarks/results/h200-2026-12-05-mixedsweep/, h100-2026-12-05/call3, h100-2026-12-05b); XQA writing
    # FP8 itself 164-166 us (h200-2026-12-06/callB, callD, when the plugin chose it)
    from dispatcher.integrations.vllm.answers import STEP_KNOBS, vllm_registry
    from dispatcher.predictor import PredictorConfig
    p = AttentionProblem.from_seq_lens(seq_lens=[500] * 31 + [16000], phase="decode", num_qo_heads=40, num_kv_heads=8,
                                       head_dim=128, page_size=16, kv_dtype="fp8", out_dtype="fp8")

    def plugin(**settings):           # what the vLLM plugin's per-step dispatcher decides from
        return load(ROOT / "heuristics.db", "NVIDIA H200", registry=vllm_registry(STEP_KNOBS),
                    predictor=PredictorConfig(**settings))
    d = plugin()
    dec = d.choose(p)
    assert dec.kernel == "trtllm-xqa" and dec.fused_out_quant, dec.reason
    split = {t.pipeline.id: t.median_us for t in d.model.predict(p) if "fixed_split_size=1024" in t.pipeline.id}
    assert min(split.values()) > 300           # one wave of 16000-token chunks, not the mean batch's 125 us
    assert min(t.median_us for t in plugin(fp8_fixed_chunks=0).model.predict(p)
               if "fixed_split_size=1024" in t.pipeline.id) < 300
    assert "fixed_split_size=1024" in plugin(fp8_longest_alone=1, fp8_fixed_chunks=0,
                                              mixed_residual_std=0).choose(p).pipeline


def test_corrections_that_disagree_nearby_read_the_pipeline_slower():
    from dispatcher.mixed_residual import Residuals
    near = [AttentionProblem(**TP4, batch_size=64, kv_len=2048, max_kv_len=n) for n in (16384, 32768)]
    prior = {c: [Timing(XQA, 100.0, 1.0, 0.04), Timing(TC, 100.0, 1.0, 0.003)] for c in near}
    measured = {near[0]: {XQA.id: Timing(XQA, 200.0, 1.0, 0.04), TC.id: Timing(TC, 100.0, 1.0, 0.003)},
                near[1]: {XQA.id: Timing(XQA, 50.0, 1.0, 0.04), TC.id: Timing(TC, 100.0, 1.0, 0.003)}}
    r = Residuals(lambda c: prior[c], lambda c: measured[c])
    base = [Timing(XQA, 100.0, 1.0, 0.04), Timing(TC, 100.0, 1.0, 0.003)]
    flat = {t.pipeline.id: t.median_us for t in r.corrected(base, near, 4, std_weight=0.0)}
    assert flat == pytest.approx({XQA.id: 100.0, TC.id: 100.0})       # off by 2x and by 0.5x: no net correction
    wary = {t.pipeline.id: t.median_us for t in r.corrected(base, near, 4, std_weight=0.5)}
    assert wary[XQA.id] == pytest.approx(100 * 2 ** 0.5) and wary[TC.id] == pytest.approx(100.0)
    # where a pipeline's prior fits (`wary` false for it), its disagreeing corrections cancel out as with no std
    scoped = r.corrected(base, near, 4, std_weight=0.5, wary=lambda pipe: pipe.kernel != XQA.kernel)
    assert {t.pipeline.id: t.median_us for t in scoped} == pytest.approx({XQA.id: 100.0, TC.id: 100.0})


def measured_h200_batch(tmp_path, name: str, batch: int, geometry: dict) -> tuple[AttentionProblem, dict[str, float]]:
    """The FP8-KV, BF16-out batch of `batch` requests in H200 mixed set `name` (benchmarks/results/h200-2026-12-06/),
    as its lengths give it, and each pipeline's measured time there."""
    db = tmp_path / f"{name}.db"
    db.write_bytes(lzma.decompress((ROOT / f"benchmarks/results/h200-2026-12-06/{name}.db.xz").read_bytes()))
    rows = sqlite3.connect(db).execute(
        "select lengths, pipeline, median_us from measurements where batch_size = ? and num_kv_heads = ? "
        "and kv_dtype = 'fp8' and out_dtype = 'bf16' and status = 'ok'", [batch, geometry["num_kv_heads"]]).fetchall()
    return AttentionProblem.from_seq_lens(seq_lens=json.loads(rows[0][0]), **geometry), {p: us for _, p, us in rows}


def test_a_fixed_split_is_not_read_slower_for_corrections_that_disagree(tmp_path):
    # mixed seed 1's batch of 59 (40/8, FP8 KV, BF16 out; mean 6001, longest 40766), measured on the H200: FA2-TC
    # with a fixed split 480 us, XQA 612-616. With the standard deviation term on every pipeline, the fixed
    # split read slower than XQA and XQA was chosen, 1.28x (benchmarks/results/mixed-std-scope/)
    from dispatcher.predictor import PredictorConfig
    p, measured = measured_h200_batch(tmp_path, "mixed1", 59, dict(TP4, num_qo_heads=40, num_kv_heads=8))
    assert (p.batch_size, p.kv_len, p.max_kv_len) == (59, 6001, 40766)
    chosen = load(ROOT / "heuristics.db", "NVIDIA H200").choose(p).pipeline
    assert measured[chosen] <= 1.05 * min(measured.values()), chosen
    everywhere = PredictorConfig(mixed_residual_std_waves=0, mixed_residual_std_scope=0)
    before = load(ROOT / "heuristics.db", "NVIDIA H200", predictor=everywhere).choose(p).pipeline
    assert before.startswith("trtllm-xqa") and measured[before] > 1.25 * min(measured.values())


def test_a_default_plan_whose_nearby_corrections_disagree_is_not_chosen_on_one_of_them(tmp_path):
    # mixed seed 2's batch of 139 (10/2, FP8 KV; mean 3618, longest 38935), measured on the H200: FA2-TC with
    # a fixed split 383 us, XQA 397, FA2-TC's own plan 685. That plan's prior is off by 0.4-1.9x at nearby
    # measured batches; taking their mean factor alone chose it (benchmarks/results/fp8-mixed-prior/)
    from dispatcher.predictor import PredictorConfig
    p, measured = measured_h200_batch(tmp_path, "mixed2", 139, TP4)
    assert (p.batch_size, p.kv_len, p.max_kv_len) == (139, 3618, 38935)
    chosen = load(ROOT / "heuristics.db", "NVIDIA H200").choose(p).pipeline
    assert measured[chosen] <= 1.05 * min(measured.values()), chosen
    naive = load(ROOT / "heuristics.db", "NVIDIA H200", predictor=PredictorConfig(mixed_residual_std=0)).choose(p)
    assert naive.pipeline == "fa2-tc[fixed_split_size=0]" and measured[naive.pipeline] > 1.7 * min(measured.values())


def test_the_corrections_spread_counts_for_a_balanced_plan_from_one_wave():
    """PredictorConfig.mixed_residual_std_waves / _scope: which pipelines' corrections read slower where the nearest
    measured mixed batches disagree (benchmarks/results/mixed-std-scope/)."""
    from dispatcher.predictor import Predictor, PredictorConfig
    table = Table.from_rows([])
    fixed = Pipeline("fa2-tc", "bf16", "fp8", "bf16", tactic=(("fixed_split_size", 1024),))
    geometry = dict(TP4, num_qo_heads=40, num_kv_heads=8)

    def counted(batch, device=H200, **settings):
        p = AttentionProblem(**geometry, batch_size=batch, kv_len=2048, max_kv_len=6144)
        counts = Predictor(PredictorConfig(**settings)).fit(table, device).counts_spread(p)
        return {pipe.kernel + ("-fixed" if pipe is fixed else ""): counts(pipe) for pipe in (XQA, TC, fixed)}
    assert counted(16) == {"trtllm-xqa": False, "fa2-tc": False, "fa2-tc-fixed": False}     # 128 CTAs on 132 SMs
    assert counted(17) == {"trtllm-xqa": False, "fa2-tc": True, "fa2-tc-fixed": False}      # 136: past one wave
    assert counted(17, mixed_residual_std_scope=1) == {"trtllm-xqa": False, "fa2-tc": True, "fa2-tc-fixed": True}
    assert all(counted(16, mixed_residual_std_waves=0, mixed_residual_std_scope=0).values())   # the rule before
    unknown = dataclasses.replace(H200, sm_count=0)        # no SM count: no wave threshold to hold it back
    assert counted(4, device=unknown) == {"trtllm-xqa": False, "fa2-tc": True, "fa2-tc-fixed": False}
    with pytest.raises(ValueError, match="mixed_residual_std_scope=3 is over 2"):
        PredictorConfig.from_dict({"mixed_residual_std_scope": 3})


def test_a_16bit_batch_near_two_waves_is_priced_at_the_piece_flashinfers_plan_cuts():
    # the vLLM forward check's BF16 one-long step (31 x 500 + one 16000, 40/8 heads), timed on the H200: FA2-TC's
    # own plan 129.7-130 us, XQA 184.5-185, the fixed split of 1024 pages 212 (benchmarks/results/h200-2026-12-06/
    # callB, callD, h200-2026-12-05-mixedsweep/gpu-tests.log). At 1.94 waves the plan still cuts the long request
    # in two (33 chunks held); read as unsplit, the default plan was priced 243 us and the fixed split chosen
    from dispatcher.predictor import PredictorConfig
    p = AttentionProblem.from_seq_lens(phase="decode", num_qo_heads=40, num_kv_heads=8, seq_lens=[500] * 31 + [16000],
                                       kv_dtype="bf16", out_dtype="bf16")
    shipped = load(ROOT / "heuristics.db", "NVIDIA H200")
    assert shipped.choose(p).pipeline == "fa2-tc[fixed_split_size=0]"
    priced = {t.pipeline.id: t.median_us for t in shipped.model.ragged_prior(p)}
    assert 110 < priced["fa2-tc[fixed_split_size=0]"] < 150 < priced["fa2-tc[fixed_split_size=1024]"]
    unsplit = load(ROOT / "heuristics.db", "NVIDIA H200", predictor=PredictorConfig(planned_chunks=0))
    assert unsplit.choose(p).pipeline == "fa2-tc[fixed_split_size=1024]"
    # one more short request and the plan cuts nothing: as before
    q = p.with_sizes(batch_size=33, kv_len=(31 * 500 + 16000 + 500) // 33, max_kv_len=16000)
    assert shipped.choose(q).pipeline == unsplit.choose(q).pipeline
