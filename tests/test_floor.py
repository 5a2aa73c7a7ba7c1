"""The dominated floor (dispatcher/floor.py): a uniform decode batch is never read faster than a pipeline
ran a measured batch it dominates."""
import lzma
import sqlite3

import pytest

from dispatcher.dispatch import load
from dispatcher.floor import DominatedFloor
from dispatcher.predictor import Predictor, PredictorConfig
from dispatcher.table import Table, Timing
from tests.conftest import ROOT, small
from tests.test_model import SCOUT, TC, XQA
from tuner.analysis.evaluate import load_table
from tuner.search.adaptive import doubt

H100 = "NVIDIA H100 80GB HBM3"
SWEEP = ROOT / "benchmarks/results/h100-2026-12-07c-mixed-sweep"


def unpacked(tmp_path, name: str):
    db = tmp_path / f"{name}.db"
    db.write_bytes(lzma.decompress((SWEEP / f"{name}.db.xz").read_bytes()))
    return db


def test_an_adaptive_table_does_not_pick_a_plan_slower_than_it_ran_at_a_smaller_batch(tmp_path):
    # the H100's --mixed adaptive table (call 1): at 40/8 heads, FP8 KV and output, batch 8 x 2933 KV (off-grid
    # seed 6) its planes read FA2-TC's fixed split-KV plan at 22 us, though that plan took 53.8 us at batch
    # 4 x 2048; measured at 8 x 2933: 79.1 us, XQA 25.7 us (benchmarks/results/dominated-floor/)
    table, offgrid = unpacked(tmp_path, "mixed"), unpacked(tmp_path, "offgrid6")
    rows = sqlite3.connect(offgrid).execute(
        "select pipeline, median_us from measurements where batch_size = 8 and kv_len = 2933 and num_kv_heads = 8 "
        "and kv_dtype = 'fp8' and out_dtype = 'fp8' and status = 'ok'").fetchall()
    measured = dict(rows)
    p = small(**SCOUT, batch_size=8, kv_len=2933)
    chosen = load(table, H100).choose(p).pipeline
    assert measured[chosen] <= 1.05 * min(measured.values()), chosen
    before = load(table, H100, predictor=PredictorConfig(dominated_floor=0)).choose(p).pipeline
    assert "fixed_split_size=1024" in before and measured[before] > 3 * min(measured.values())


def floor_table() -> Table:
    t = Table()
    t.add(small(**SCOUT, batch_size=4, kv_len=2048), Timing(TC, 50.0, 1.0, 0.003))
    t.add(small(**SCOUT, batch_size=4, kv_len=2048), Timing(XQA, 15.0, 0.3, 0.04))
    t.add(small(**SCOUT, batch_size=16, kv_len=512), Timing(TC, 90.0, 1.0, 0.003))       # a larger batch
    t.add(small(**SCOUT, batch_size=4, kv_len=1024, max_kv_len=3072), Timing(TC, 70.0, 1.0, 0.003))  # longer
    return t


def test_the_floor_counts_only_batches_the_problem_dominates():
    floor = DominatedFloor(floor_table())
    assert floor.floors(small(**SCOUT, batch_size=8, kv_len=2900)) == {TC.id: 50.0, XQA.id: 15.0}
    assert floor.floors(small(**SCOUT, batch_size=8, kv_len=8192)) == {TC.id: 70.0, XQA.id: 15.0}
    assert floor.floors(small(**SCOUT, batch_size=2, kv_len=2048)) == {}      # batch 4 is larger
    assert floor.floors(small(**SCOUT, batch_size=8, kv_len=1024, max_kv_len=4096)) == {}   # mixed: shorter requests
    assert floor.floors(small(**SCOUT, phase="prefill", batch_size=8, q_len=64, kv_len=4096)) == {}


def test_a_raised_time_keeps_its_relative_spread_and_a_slower_one_is_left_alone():
    floor = DominatedFloor(floor_table())
    p = small(**SCOUT, batch_size=8, kv_len=2900)
    predicted = [Timing(TC, 25.0, 0.5, 0.003), Timing(XQA, 20.0, 0.4, 0.04)]
    raised = {t.pipeline.id: t for t in floor.raised(p, predicted, 1)}
    assert (raised[TC.id].median_us, raised[TC.id].spread_us) == pytest.approx((50.0, 1.0))
    assert raised[XQA.id].median_us == 20.0
    assert floor.raised(p, [Timing(TC, 25.0, 0.5, 0.003)], 0)[0].median_us == 25.0       # 0: no floor


def test_the_floor_setting_is_at_most_one():
    with pytest.raises(ValueError, match="dominated_floor=1.5 is over 1"):
        PredictorConfig.from_dict({"dominated_floor": 1.5})
    assert PredictorConfig().dominated_floor == 1.0


def test_the_adaptive_search_ranks_by_the_estimators_own_times_not_the_floor(tmp_path):
    # the floor moves decisions, not where the search measures next (replays of the search with the floor in
    # its ranking got worse: benchmarks/results/dominated-floor/)
    table, device = load_table(unpacked(tmp_path, "mixed"), H100)
    p = small(**SCOUT, batch_size=8, kv_len=2896)
    on = Predictor(PredictorConfig(dominated_floor=1)).fit(table, device)
    off = Predictor(PredictorConfig(dominated_floor=0)).fit(table, device)
    assert on.predict(p) != off.predict(p)          # the floor binds here
    assert doubt(p, on) == doubt(p, off)


def test_mixed_batches_are_predicted_as_without_the_floor(tmp_path):
    # their priors read uniform times unfloored (FittedModel.predicted): the rules were fitted so
    table, device = load_table(unpacked(tmp_path, "mixed"), H100)
    on = Predictor(PredictorConfig(dominated_floor=1)).fit(table, device)
    off = Predictor(PredictorConfig(dominated_floor=0)).fit(table, device)
    for batch, mean, longest in ((8, 1400, 2933), (73, 662, 7157), (12, 2000, 16146)):
        p = small(**SCOUT, batch_size=batch, kv_len=mean, max_kv_len=longest)
        assert on.predict(p) == off.predict(p)
