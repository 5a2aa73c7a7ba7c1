import math

from dispatcher.device import H200
from dispatcher.dispatch import Dispatcher
from dispatcher.model import fit_plane
from dispatcher.pipeline import Pipeline
from dispatcher.predictor import Predictor, PredictorConfig
from dispatcher.table import Table, Timing
from tests.conftest import small

SCOUT = dict(num_qo_heads=40, num_kv_heads=8, head_dim=128, kv_dtype="fp8", out_dtype="fp8")
XQA = Pipeline("trtllm-xqa", "bf16", "fp8", "fp8", tactic=(("enable_pdl", False),))
TC = Pipeline("fa2-tc", "bf16", "fp8", "bf16", out_quant=True, tactic=(("fixed_split_size", 0),))


def grid(time_of):
    pts = []
    for b in range(0, 8):
        for kv in range(7, 15):
            pts.append(((float(b), 0.0, float(kv)), time_of(2 ** b, 2 ** kv)))
    return pts


def test_unseen_shape_between_two_measured_ones():
    # time linear in batch x kv (bandwidth bound) plus a launch floor
    pts = [p for p in grid(lambda b, kv: 5 + b * kv / 1000) if p[0] != (3.0, 0.0, 10.0)]
    got = fit_plane(pts, (3.0, 0.0, 10.0)).us
    truth = 5 + 8 * 1024 / 1000
    assert abs(got - truth) / truth < 0.10     # neighbours are a factor of two away on each axis
    lo, hi = 5 + 8 * 512 / 1000, 5 + 8 * 2048 / 1000
    assert lo < got < hi


def test_predictions_are_monotone_where_the_data_is():
    pts = grid(lambda b, kv: 5 + b * kv / 1000)
    preds = [fit_plane(pts, (4.0, 0.0, kv + 0.5)).us for kv in range(7, 14)]
    assert all(a < b for a, b in zip(preds, preds[1:]))


def test_learned_decision_picks_the_pipeline_predicted_faster():
    # XQA grows slowly with KV, FA2-TC starts slower but wins at long KV: a crossover at kv 2^11
    xqa = lambda b, kv: 10 + b * kv / 200    # noqa: E731
    tc = lambda b, kv: 30 + b * kv / 400     # noqa: E731
    t = Table()
    for b in (1, 2, 4, 8):
        for kv in (128, 512, 2048, 8192, 32768):
            p = small(**SCOUT, batch_size=b, kv_len=kv)
            t.add(p, Timing(XQA, xqa(b, kv), 0.1, 0.04))
            t.add(p, Timing(TC, tc(b, kv), 0.1, 0.003))
    d = Dispatcher(t, H200)
    short = d.choose(small(**SCOUT, batch_size=2, kv_len=256))
    long = d.choose(small(**SCOUT, batch_size=2, kv_len=16384))
    assert short.source == long.source == "learned"
    assert short.kernel == "trtllm-xqa" and short.fused_out_quant
    assert long.kernel == "fa2-tc" and long.out_quant
    assert math.isclose(long.expected_us, tc(2, 16384), rel_tol=0.1)


def test_a_tight_accuracy_budget_excludes_the_xqa_fp8_kernel():
    t = Table()
    p = small(**SCOUT, batch_size=4, kv_len=1024)
    t.add(p, Timing(XQA, 10.0, 0.1, 0.045))     # the XQA FP8 kernel's measured error on the H200
    t.add(p, Timing(TC, 14.0, 0.1, 0.003))
    assert Dispatcher(t, H200).choose(p).kernel == "trtllm-xqa"
    tight = Dispatcher(t, H200, max_relerr=0.01).choose(p)
    assert tight.kernel == "fa2-tc" and "over the 0.01 relative-error budget: trtllm-xqa" in tight.reason


def test_past_the_measured_edge_a_loser_is_not_extrapolated_ahead():
    # FA2-TC closes in on XQA as the batch grows (1.5x, 1.3x, 1.1x slower at batch 1, 2, 4), but
    # is slower at every measured size: at batch 16 a plane through those ratios would put it ahead
    t = Table()
    for b, ratio in ((1, 1.5), (2, 1.3), (4, 1.1)):
        for kv in (1024, 2048, 4096):
            p = small(**SCOUT, batch_size=b, kv_len=kv)
            t.add(p, Timing(XQA, 100.0, 0.1, 0.003))
            t.add(p, Timing(TC, 100.0 * ratio, 0.1, 0.003))
    far = small(**SCOUT, batch_size=16, kv_len=2048)
    pred = {x.pipeline.id: x.median_us for x in Predictor().fit(t, H200).predict(far)}
    assert pred[TC.id] >= 1.09 * pred[XQA.id]       # no faster than measured nearby (1.1x)
    d = Dispatcher(t, H200).choose(far)
    assert d.source == "learned" and d.kernel == "trtllm-xqa"


def _row(p, pipe: Pipeline, us: float) -> dict:
    return {**p.to_dict(), **pipe.to_row(), "median_us": us, "spread_us": 0.5, "relerr": 0.003}


def test_a_tactic_measured_beside_a_grid_point_races_on_its_scale():
    # the grid point (batch 4, kv 60097, its cell's representative) and a tactic search at kv 60000
    # share one cell; at 60000 the searched split (512) merely ties the default, and 0.2% less work
    # makes both a little faster
    split = lambda n: Pipeline("fa2-tc", "bf16", "bf16", "bf16", tactic=(("fixed_split_size", n),))  # noqa: E731
    bf16 = dict(SCOUT, kv_dtype="bf16", out_dtype="bf16")
    grid, searched = small(**bf16, batch_size=4, kv_len=60097), small(**bf16, batch_size=4, kv_len=60000)
    assert searched.cell() == grid
    rows = [_row(grid, split(0), 250.0), _row(grid, split(1024), 275.0),
            _row(searched, split(0), 240.0), _row(searched, split(512), 244.0)]
    t = Table.from_rows(rows)
    got = {x.pipeline.id: x.median_us for x in t.timings(grid)}
    assert got[split(0).id] == 250.0 and got[split(1024).id] == 275.0      # the grid point's own
    assert math.isclose(got[split(512).id], 244.0 * 250 / 240)             # on the grid point's scale
    d = Dispatcher(t, H200).choose(searched)
    assert d.source == "measured" and d.pipeline == split(0).id


def twin_table() -> Table:
    """Page 16 and 32, batch 1-8 x KV 512-8192, XQA 4% ahead everywhere but at batch 2 / KV 2048: not
    measured with page 16, FA2-TC 1.3x faster there with page 32."""
    t = Table()
    for page in (16, 32):
        for b in (1, 2, 4, 8):
            for kv in (512, 1024, 2048, 4096, 8192):
                if (page, b, kv) == (16, 2, 2048):
                    continue
                twin_spot = (page, b, kv) == (32, 2, 2048)
                p = small(**SCOUT, page_size=page, batch_size=b, kv_len=kv)
                t.add(p, Timing(XQA, 130.0 if twin_spot else 100.0, 0.1, 0.04))
                t.add(p, Timing(TC, 100.0 if twin_spot else 104.0, 0.1, 0.003))
    return t


def test_a_shape_measured_with_another_page_size_steers_the_prediction():
    # page 16 everywhere but batch 2 / kv 2048: XQA 4% ahead at every neighbour. Page 32 shows the
    # same, except at batch 2 / kv 2048 itself, where FA2-TC is 1.3x faster: the page-16 decision
    # there follows the measured twin rather than the neighbours alone
    t = twin_table()
    here = small(**SCOUT, page_size=16, batch_size=2, kv_len=2048)
    d = Dispatcher(t, H200).choose(here)
    assert d.source == "learned" and d.kernel == "fa2-tc"
    alone = PredictorConfig(twin_weight=0.0)               # the neighbours alone: XQA
    assert Dispatcher(t, H200, predictor=alone).choose(here).kernel == "trtllm-xqa"


def test_a_twin_that_ranked_the_neighbours_differently_is_left_out():
    # page 32 has FA2-TC 1.3x ahead everywhere, page 16 has XQA 4% ahead at every neighbour: the
    # page size changes the ranking here, so the page-16 gap follows its own neighbours
    t = Table()
    for page in (16, 32):
        for b in (1, 2, 4, 8):
            for kv in (512, 1024, 2048, 4096, 8192):
                if (page, b, kv) == (16, 2, 2048):
                    continue
                p = small(**SCOUT, page_size=page, batch_size=b, kv_len=kv)
                t.add(p, Timing(XQA, 130.0 if page == 32 else 100.0, 0.1, 0.04))
                t.add(p, Timing(TC, 100.0 if page == 32 else 104.0, 0.1, 0.003))
    d = Dispatcher(t, H200).choose(small(**SCOUT, page_size=16, batch_size=2, kv_len=2048))
    assert d.source == "learned" and d.kernel == "trtllm-xqa"


def test_a_decode_shape_follows_its_own_batch_size_across_a_jump_between_batch_sizes():
    # as on the H200: up to batch 4 XQA falls behind FA2-TC as the KV grows (crossing at kv ~2^11),
    # from batch 8 its multi-block split makes it 1.7x faster at every KV length. Between two
    # measured KV lengths of batch 4 that FA2-TC wins, the batch-8 neighbour must not outvote them.
    def xqa_over_tc(b, kv):
        return 0.8 * 2 ** (0.08 * (math.log2(kv) - 7)) if b <= 4 else 0.6
    t = Table()
    for b in (1, 2, 4, 8, 16):
        for kv in (2 ** e for e in range(7, 16)):
            if (b, kv) == (4, 8192):
                continue
            p, base = small(**SCOUT, batch_size=b, kv_len=kv), 5 + b * kv / 1000
            t.add(p, Timing(TC, base, 0.01 * base, 0.003))
            t.add(p, Timing(XQA, base * xqa_over_tc(b, kv), 0.01 * base, 0.04))
    d = Dispatcher(t, H200).choose(small(**SCOUT, batch_size=4, kv_len=8192))
    assert d.source == "learned"
    assert d.kernel == "fa2-tc", d.reason     # measured there it would be 1.12x faster than XQA


def test_between_two_long_kv_lengths_a_decode_shape_reads_each_time_off_a_line_in_kv():
    # decode at long KV streams the cache: time = fixed cost + bytes / bandwidth, affine in KV. As on
    # the H200 at batch 1 (FP8 KV), XQA has the smaller fixed cost and FA2-TC the cheaper bytes, so
    # XQA falls from 0.92x FA2-TC's time at 32k to 1.09x at 128k; at 64k it is 1.02x, slower. The
    # log ratios, interpolated, put that crossing at 64k (a tie, so the rule's XQA would be kept).
    def tc(b, kv):
        return 17 + 0.0007 * b * kv

    def xqa(b, kv):
        return 9.3 + 0.000836 * b * kv
    t = Table()
    for b in (1, 2, 4):
        for kv in (2 ** e for e in range(10, 18)):
            if (b, kv) == (1, 65536):
                continue
            p = small(**SCOUT, batch_size=b, kv_len=kv)
            t.add(p, Timing(TC, tc(b, kv), 0.003 * tc(b, kv), 0.003))
            t.add(p, Timing(XQA, xqa(b, kv), 0.003 * xqa(b, kv), 0.04))
    d = Dispatcher(t, H200).choose(small(**SCOUT, batch_size=1, kv_len=65536))
    assert d.source == "learned"
    assert d.kernel == "fa2-tc", d.reason
    assert math.isclose(d.expected_us, tc(1, 65536), rel_tol=1e-6)     # the line through 32k and 128k


def test_a_model_that_remembers_answers_a_repeated_question_alike_and_a_refit_sees_new_rows():
    # the adaptive search's models remember their predictions (it asks the same sizes many times): a caller
    # changing the list it got does not change the next answer, and a model fitted on more rows answers anew
    t = Table()
    for b in (1, 4):
        for kv in (512, 4096):
            t.add(small(**SCOUT, batch_size=b, kv_len=kv), Timing(XQA, 10 + b * kv / 100, 0.1, 0.04))
    asked = small(**SCOUT, batch_size=2, kv_len=1500)
    model = Predictor().fit(t, H200, remember=True)
    first = model.predict(asked)
    first.clear()
    again = model.predict(asked)
    assert [x.median_us for x in again] == [x.median_us for x in Predictor().fit(t, H200).predict(asked)] != []
    t.add(small(**SCOUT, batch_size=2, kv_len=1448), Timing(XQA, 1000.0, 1.0, 0.04))     # a slow row nearby
    assert Predictor().fit(t, H200, remember=True).predict(asked)[0].median_us > 2 * again[0].median_us
