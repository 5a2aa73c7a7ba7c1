"""Shapes measured alone (`tuner sweep --problems`, the daemon's problems and misses: schema 6's `alone`) are
no input of the grid's estimators; they scale the model's times near them by its error there
(PredictorConfig.alone_k, benchmarks/results/alone/)."""
import lzma
import sqlite3

from dispatcher.device import H200, describe
from dispatcher.dispatch import Dispatcher
from dispatcher.measurements import read_rows
from dispatcher.predictor import PredictorConfig
from dispatcher.problem import AttentionProblem
from dispatcher.resolve import device_of
from dispatcher.table import Table, Timing
from tests.conftest import ROOT, SHIPPED, cpu_sweep_of, small
from tests.test_cli import tuner
from tests.test_model import SCOUT, TC, XQA
from tests.test_offgrid import crossing_table
from tuner.library import overview, run_problems
from tuner.options import SweepOptions

RESULTS = ROOT / "benchmarks/results"


def offgrid_rows(tmp_path, name: str, device) -> list:
    db = tmp_path / f"{name.replace('/', '-')}.db"
    db.write_bytes(lzma.decompress((RESULTS / f"{name}.db.xz").read_bytes()))
    return read_rows(db, device, "graph")


def test_serving_shapes_measured_alone_do_not_pull_a_decision_across_a_wave_step(tmp_path):
    # the shipped H200 grid plus off-grid seed 2's 600 shapes. Read as grid points (as before schema 6), its
    # single shapes at batch 17 and 20 became the batch rows either side of 18, just past XQA's wave step, read
    # at 305 KV from planes below the step, and 40/8 BF16 batch 18 x 305 KV went to XQA: 19.6 us measured
    # (off-grid seed 1), FA2-TC's fixed split 15.4 us. As corrections they leave the grid's step in place.
    dev = device_of(SHIPPED, "NVIDIA H200")
    seed2 = [{**dict(r), "alone": 1} for r in offgrid_rows(tmp_path, "h200-2026-12-06/offgrid2", dev)]
    table = Table.from_rows(read_rows(SHIPPED, dev, "graph") + seed2)
    p = AttentionProblem(phase="decode", num_qo_heads=40, num_kv_heads=8, head_dim=128, page_size=16, batch_size=18,
                         kv_len=305, q_len=1, kv_dtype="bf16", out_dtype="bf16")
    seed1 = offgrid_rows(tmp_path, "h200-2026-12-05/offgrid-seed1", dev)
    measured = {r["pipeline"]: r["median_us"] for r in seed1 if r["problem_key"] == p.key()}
    fastest = min(measured.values())
    chosen = Dispatcher(table, dev).choose(p)
    assert chosen.source == "learned" and measured[chosen.pipeline] <= 1.05 * fastest, chosen.reason
    as_grid_points = Dispatcher(table, dev, predictor=PredictorConfig(alone_k=0)).choose(p).pipeline
    assert as_grid_points.startswith("trtllm-xqa") and measured[as_grid_points] > 1.2 * fastest


def alone_row(p: AttentionProblem, timing: Timing, alone: int = 1) -> dict:
    return {**p.to_dict(), **timing.pipeline.to_row(), "median_us": timing.median_us, "spread_us": timing.spread_us,
            "relerr": timing.relerr, "alone": alone}


def grid_rows(table: Table) -> list[dict]:
    """A table's timings as the store's rows of a grid sweep."""
    return [alone_row(c, t, alone=0) for c, ts in table.by_cell.items() for t in ts.values()]


def test_a_shape_measured_alone_scales_its_neighbours_and_not_far_shapes():
    # the crossing grid (XQA ahead below batch x kv = 5000) and one shape measured alone at batch 2 x 3000 KV,
    # where XQA took twice what the grid's planes read there (FA2-TC as read)
    grid = crossing_table()
    there = small(**SCOUT, batch_size=2, kv_len=3000)
    plain = Dispatcher(grid, H200)
    read = {t.pipeline.id: t for t in plain.model.predict(there)}
    rows = [alone_row(there, Timing(XQA, 2 * read[XQA.id].median_us, 0.1, 0.04)),
            alone_row(there, Timing(TC, read[TC.id].median_us, 0.1, 0.003))]
    table = Table.from_rows(grid_rows(grid) + rows)
    assert table.alone == {there.cell()}
    d = Dispatcher(table, H200)
    assert d.choose(there).source == "measured" and d.choose(there).kernel == "fa2-tc"
    near = small(**SCOUT, batch_size=2, kv_len=2300)           # 0.38 octaves away: XQA ahead on the grid alone
    assert plain.choose(near).kernel == "trtllm-xqa"
    got = d.choose(near)
    assert got.kernel == "fa2-tc" and "scaled by the error at the nearest shape measured alone" in got.reason
    far = small(**SCOUT, batch_size=8, kv_len=512)             # more than alone_radius away: as on the grid
    assert d.choose(far).pipeline == plain.choose(far).pipeline and d.model.alone_corrections(far) == 0
    assert d.choose(far).expected_us == plain.choose(far).expected_us


def test_a_problem_list_is_stored_as_measured_alone_and_a_grid_sweep_is_not(tmp_path):
    p = small(head_dim=16)
    listed = cpu_sweep_of(tmp_path, p)                  # tuner sweep --problems
    assert sqlite3.connect(listed).execute("select distinct alone from measurements").fetchall() == [(1,)]
    swept = tmp_path / "grid.db"                        # what a grid sweep passes: SweepOptions' default
    run_problems([p], describe("cpu"), swept, "wall", SweepOptions(), say=lambda m: None)
    assert sqlite3.connect(swept).execute("select distinct alone from measurements").fetchall() == [(0,)]
    assert Table.from_rows(read_rows(listed, describe("cpu"), "wall")).alone == {p.cell()}
    assert Table.from_rows(read_rows(swept, describe("cpu"), "wall")).alone == set()
    # tuner show (and GET /v1/environments) counts them
    assert [e["shapes_measured_alone"] for e in overview(listed)["environments"]] == [1]
    assert [e["shapes_measured_alone"] for e in overview(swept)["environments"]] == [0]


def test_import_as_grid_makes_shapes_measured_alone_grid_points(tmp_path):
    listed = cpu_sweep_of(tmp_path, small(head_dim=16))
    export = tmp_path / "listed.jsonl"
    assert tuner("export", "--db", str(listed), "--out", str(export)).returncode == 0
    for flag, alone in (([], {(1,)}), (["--as-grid"], {(0,)})):
        into = tmp_path / f"into{len(flag)}.db"
        r = tuner("import", str(export), "--db", str(into), *flag)
        assert r.returncode == 0, r.stderr
        assert set(sqlite3.connect(into).execute("select distinct alone from measurements")) == alone
        assert ("as grid points" in r.stdout) == bool(flag)
        assert [e["shapes_measured_alone"] for e in overview(into)["environments"]] == [0 if flag else 1]


def test_a_cell_a_grid_measured_too_is_the_grids():
    grid = crossing_table()
    at = small(**SCOUT, batch_size=4, kv_len=4000)             # in the grid's cell of 4 x 4096
    rows = [alone_row(at, Timing(XQA, 30.0, 0.1, 0.04))]
    rows += grid_rows(grid)
    assert at.cell() == small(**SCOUT, batch_size=4, kv_len=4096).cell()
    assert Table.from_rows(rows).alone == set()


def test_a_table_that_borrows_a_twins_family_keeps_its_cells_measured_alone(monkeypatch):
    # a serving host whose twin GPU (same compute capability and SMs) swept more of another family
    import dispatcher.measurements as measurements
    from dispatcher.device import named
    there = small(**SCOUT, batch_size=2, kv_len=3000)
    grid = crossing_table()
    own = Table.from_rows(grid_rows(grid) + [alone_row(there, Timing(XQA, 10.0, 0.1, 0.04))])
    elsewhere = small(head_dim=64, batch_size=4, kv_len=512)
    twin = Table.from_rows([alone_row(elsewhere, Timing(TC, 5.0, 0.1, 0.003), alone=0)])
    monkeypatch.setattr(measurements, "read_table", lambda db, dev, mode: own if dev is H200 else twin)
    monkeypatch.setattr(measurements, "twin_of", lambda db, dev, mode: named("twin", (9, 0), 132))
    table = measurements.table_for("any.db", H200, "graph")
    assert table.lent is not None and elsewhere.family() in table.lent.families
    assert table.alone == {there.cell()}
