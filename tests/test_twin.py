"""A GPU with no measurements of its own in a database decides from a twin of its architecture (the same
compute capability and SM count), saying so and never calling it measured. Real measurements: the shipped
H200 heuristics.db and the H100's of the same points (benchmarks/results/h100-2026-12-06-grid/)."""
import json
import lzma
import shutil
from dataclasses import replace

import pytest

from dispatcher import load
from dispatcher.device import DeviceInfo
from dispatcher.live import keep_fresh
from dispatcher.problem import AttentionProblem
from tests.conftest import ROOT, in_process
from tuner.store import Store
from tuner.transfer import export_jsonl, export_vllm_json, import_jsonl

H100 = DeviceInfo(name="NVIDIA H100 80GB HBM3", kind="cuda", compute_capability=(9, 0), sm_count=132)
H20 = DeviceInfo(name="NVIDIA H20", kind="cuda", compute_capability=(9, 0), sm_count=78)
SCOUT = dict(num_qo_heads=40, num_kv_heads=8, head_dim=128, page_size=16)
FP8 = dict(SCOUT, phase="decode", q_len=1, kv_dtype="fp8", out_dtype="fp8")
ASKED = [AttentionProblem(**FP8, batch_size=64, kv_len=4096),                     # a grid point
         AttentionProblem(**FP8, batch_size=50, kv_len=3000),                     # between grid points
         AttentionProblem(**FP8, batch_size=64, kv_len=2048, max_kv_len=32768),   # a mixed batch
         AttentionProblem(**SCOUT, phase="prefill", batch_size=4, q_len=777, kv_len=777)]


@pytest.fixture(scope="module")
def h100_rows(tmp_path_factory):
    """The H100's measurements of the shipped grid's points: their database, and its export lines."""
    d = tmp_path_factory.mktemp("h100")
    (d / "h100grid.db").write_bytes(lzma.decompress((ROOT / "benchmarks/results/h100-2026-12-06-grid/h100grid.db.xz")
                                                    .read_bytes()))
    export_jsonl(d / "h100grid.db", d / "all.jsonl")
    return d / "h100grid.db", [json.loads(line) for line in (d / "all.jsonl").read_text().splitlines()]


def shipped_with(tmp_path, device: DeviceInfo):
    """The shipped database, plus an environment of `device` that has measured nothing yet."""
    db = tmp_path / "heuristics.db"
    shutil.copy(ROOT / "heuristics.db", db)
    s = Store(db)
    s.environment(device, "graph")
    s.close()
    return db


def add(db, lines, tmp_path, keep=lambda m: True):
    f = tmp_path / "part.jsonl"
    f.write_text("".join(json.dumps(item) + "\n" for item in lines if keep(item["measurement"])))
    import_jsonl(db, f)


def in_family(p: AttentionProblem, cells: int | None = None, pages=(16, 32), near: tuple[int, int] | None = None,
              kv_not: int = 0):
    """Measurements of p's shape family at these page sizes: all, or the first `cells` batch sizes x KV lengths
    (those within an octave of `near`'s batch and KV only: misses where traffic was), none at KV `kv_not`."""
    taken: list[tuple[int, int, int]] = []

    def keep(m):
        same = (m["phase"], m["num_qo_heads"], m["kv_dtype"], m["out_dtype"]) == \
            (p.phase, p.num_qo_heads, p.kv_dtype, p.out_dtype) and m["page_size"] in pages
        at = (m["page_size"], m["batch_size"], m["kv_len"])
        if near and not (near[0] / 2 <= at[1] <= near[0] * 2 and near[1] / 2 <= at[2] <= near[1] * 2):
            return False
        if at[2] == kv_not:
            return False
        if not same or (cells is not None and at not in taken and len(taken) >= cells):
            return False
        if at not in taken:
            taken.append(at)
        return True
    return keep


def test_a_gpu_without_measurements_decides_as_its_twin_does_and_says_so(tmp_path):
    db = shipped_with(tmp_path, H100)
    h100, h200 = load(db, H100.name), load(db, "NVIDIA H200")
    assert h100.lent is not None and h100.lent.twin.name == "NVIDIA H200"
    for p in ASKED:
        mine, twin = h100.choose(p), h200.choose(p)
        assert mine.pipeline == twin.pipeline and mine.device == H100.name
        assert mine.source != "measured"                    # measured on the H200 is not measured here
        assert "on NVIDIA H200 (same SM90 and 132 SMs" in mine.reason
    assert h200.choose(ASKED[0]).source == "measured"


def test_another_architecture_or_borrow_off_decides_by_rule(tmp_path, monkeypatch):
    db = shipped_with(tmp_path, H20)                        # SM90, but 78 SMs: not the H200's twin
    dec = load(db, H20.name).choose(ASKED[0])
    assert dec.source == "rule" and "holds no measurements of NVIDIA H20" in dec.reason
    db = shipped_with(tmp_path, H100)
    assert load(db, H100.name, borrow=False).choose(ASKED[0]).source == "rule"
    monkeypatch.setenv("SWITCHYARD_BORROW", "0")
    assert load(db, H100.name).choose(ASKED[0]).source == "rule"
    monkeypatch.setenv("SWITCHYARD_BORROW", "maybe")
    with pytest.raises(ValueError, match="SWITCHYARD_BORROW='maybe' is not a yes or no; set it to 0"):
        load(db, H100.name)


def test_a_family_swept_here_uses_its_own_measurements(tmp_path, h100_rows):
    h100_db, lines = h100_rows
    db = shipped_with(tmp_path, H100)
    add(db, lines, tmp_path, in_family(ASKED[0]))           # FP8 decode, both page sizes, swept on the H100
    own = load(db, H100.name)
    for p in ASKED[:3]:
        assert "on NVIDIA H200" not in own.choose(p).reason
    grid = own.choose(ASKED[0])
    assert grid.source == "measured" and grid.pipeline == load(h100_db, H100.name).choose(ASKED[0]).pipeline
    assert "on NVIDIA H200" in own.choose(ASKED[3]).reason  # prefill: still the H200's


def test_a_lent_cell_at_another_page_size_is_named_in_predictions(tmp_path, h100_rows):
    db = shipped_with(tmp_path, H100)
    add(db, h100_rows[1], tmp_path, in_family(ASKED[0], pages=(16,), kv_not=8192))  # page 32 stays the H200's
    d = load(db, H100.name)
    assert ASKED[0].family() not in d.lent.families
    assert "NVIDIA H200" not in d.choose(ASKED[0]).reason                        # measured here
    assert "NVIDIA H200" not in d.choose(ASKED[1]).reason   # no H200 cell at its sizes on page 32
    # a shape the H200 measured on page 32 but the H100 not on 16: the page-size estimator reads the H200's
    dec = d.choose(replace(ASKED[0], kv_len=8192, max_kv_len=8192))
    assert dec.source == "learned" and "with page-size ratios from NVIDIA H200" in dec.reason


def test_a_few_misses_elsewhere_never_take_a_swept_family(tmp_path, h100_rows):
    # the H100's misses written into the H200's database do not lend the H200's own family from the H100
    db = shipped_with(tmp_path, H100)
    add(db, h100_rows[1], tmp_path, in_family(ASKED[0], cells=3, pages=(16,), near=(64, 4096)))
    h200 = load(db, "NVIDIA H200")
    assert h200.lent is None and h200.choose(ASKED[0]).source == "measured"


@pytest.mark.parametrize("cells", [2, 9])     # fewer than k_nearest; more, but only where traffic was
def test_a_few_measured_shapes_stand_beside_the_twins_family(tmp_path, h100_rows, cells):
    db = shipped_with(tmp_path, H100)
    add(db, h100_rows[1], tmp_path, in_family(ASKED[0], cells=cells, pages=(16,), near=(64, 4096)))
    d, twin = load(db, H100.name), load(db, "NVIDIA H200")
    mine = [c for c in d.lent.own if c.family() == ASKED[0].family()]
    assert len(mine) == cells and ASKED[0].family() in d.lent.families
    for cell in mine:                                       # the H100's own cells answer for themselves
        dec = d.choose(cell)
        assert dec.source == "measured" and "on NVIDIA H200" not in dec.reason
    assert "on NVIDIA H200" in d.choose(ASKED[1]).reason    # the rest of the family is still lent,
    got, want = d.model.predict(ASKED[1]), twin.model.predict(ASKED[1])
    assert got and {t.pipeline.id: t.median_us for t in got} == {t.pipeline.id: t.median_us for t in want}  # unmixed
    if cells == 9:                                          # a shape in a measured cell, not its representative
        assert d.choose(AttentionProblem(**FP8, batch_size=64, kv_len=4100)).source == "measured"


def test_lent_cells_are_not_reported_or_exported_as_this_devices(tmp_path, h100_rows):
    db = shipped_with(tmp_path, H100)
    add(db, h100_rows[1], tmp_path, in_family(ASKED[0], cells=2, pages=(16,)))
    with in_process(db=db) as client:
        fams = client.get("/v1/coverage", params={"device": H100.name}).json()["families"]
    fp8 = next(f for f in fams if (f["phase"], f["num_qo_heads"], f["page_size"], f["kv_dtype"], f["out_dtype"])
               == ("decode", 40, 16, "fp8", "fp8"))
    assert fp8["measured_cells"] == 2 and fp8["lent_cells"] > 100 and fp8["lent_from"] == "NVIDIA H200"
    (path,) = export_vllm_json(db, tmp_path / "vj", H100.name)     # the H100's own two cells, not the H200's
    assert sum(len(cells) for cells in json.loads(path.read_text())["configs"].values()) == 2


def test_a_refresh_stops_lending_a_family_once_it_is_swept_here(tmp_path, h100_rows):
    db = shipped_with(tmp_path, H100)
    d = load(db, H100.name)
    live = keep_fresh(d, every_s=3600, record_misses=False)
    try:
        assert "on NVIDIA H200" in d.choose(ASKED[0]).reason
        add(db, h100_rows[1], tmp_path, in_family(ASKED[0]))
        assert live.tick()
        assert d.choose(ASKED[0]).source == "measured" and "on NVIDIA H200" not in d.choose(ASKED[0]).reason
    finally:
        live.stop()


def test_a_known_gpu_never_measured_can_be_asked_about_through_its_twin(tmp_path):
    """From a laptop: the shipped H200 db asked as an H100 would ask (no H100 environment in it) answers
    from the H200's measurements and says so; a GPU with no twin here, or a name Switchyard does not know,
    is refused with what would work."""
    db = tmp_path / "heuristics.db"
    shutil.copy(ROOT / "heuristics.db", db)
    h100, h200 = load(db, "NVIDIA H100 80GB HBM3"), load(db, "NVIDIA H200")
    mine, twin = h100.choose(ASKED[1]), h200.choose(ASKED[1])
    assert mine.pipeline == twin.pipeline and mine.device == "NVIDIA H100 80GB HBM3"
    assert "on NVIDIA H200 (same SM90 and 132 SMs" in mine.reason
    with pytest.raises(ValueError, match=r"'NVIDIA B200' is not in the database; it holds: NVIDIA H200 \(NVIDIA "
                                         r"B200 could be asked about with a GPU of SM100 and 148 SMs measured here\)"):
        load(db, "NVIDIA B200")
    with pytest.raises(ValueError, match="'NVIDIA H100' is not in the database; it holds: NVIDIA H200; or a GPU whose "
                                         "twin it holds: NVIDIA H100 80GB HBM3"):
        load(db, "NVIDIA H100")
