"""`tuner sweep --tiles`: the sizes where kernels change pace with the GPU, as the measured tile sets placed them."""
import shutil
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from dispatcher import device
from dispatcher.problem import AttentionProblem
from tests.conftest import in_process
from tuner.library import SweepRequest, SweepRequestError, fleet_problems, sweep_problems
from tuner.problem_files import read_problems

ROOT = Path(__file__).resolve().parents[1]
H200 = replace(device.H200, memory_bytes=141 << 30)        # the sweep's KV cap needs the GPU's memory
B200 = replace(device.B200, memory_bytes=180 << 30)
SETS = ("decode-tiles/decode-tiles.jsonl", "decode-tiles/decode-band.jsonl", "prefill-tiles/prefill-tiles.jsonl")


def added(dev, **kw) -> list[AttentionProblem]:
    """The problems --tiles adds to a llama4-scout sweep on `dev`, in order."""
    grid = set(sweep_problems(SweepRequest(**kw), dev))
    return [p for p in sweep_problems(SweepRequest(tiles=True, **kw), dev) if p not in grid]


def test_tiles_are_the_sizes_whose_measurements_were_scored():
    # the committed sets were written by benchmarks/decode_tiles.py and prefill_tiles.py for a 132-SM GPU, page 16;
    # measured as grid rows they are what benchmarks/results/h100-2026-12-07g-tiles/ and prefill-tiles/ report
    measured = [p for s in SETS for p in read_problems(str(ROOT / "benchmarks/results" / s))]
    tiles = added(H200, page_sizes=(16,))
    assert len(tiles) == len(set(tiles)) == 1024
    assert set(tiles) == set(measured)


def test_tiles_follow_the_gpus_sm_count():
    def band(dev):      # TP1's decode batches past one wave (8 KV heads)
        return sorted({p.batch_size for p in added(dev, page_sizes=(16,), tps=(1,), phases=("decode",))
                       if p.batch_size * p.num_kv_heads > dev.sm_count})
    assert band(H200) == [19, 23, 28]                   # 1.15, 1.4 and 1.7 waves of 132 SMs
    assert band(B200) == [21, 26, 31]                   # of 148


def test_tiles_come_after_each_configurations_grid_points():
    probs = sweep_problems(SweepRequest(tiles=True, page_sizes=(16, 32), tps=(1,), phases=("decode",),
                                       kv_dtypes=("fp8",), out_dtypes=("fp8",)), H200)
    grid = set(sweep_problems(SweepRequest(page_sizes=(16, 32), tps=(1,), phases=("decode",), kv_dtypes=("fp8",),
                                           out_dtypes=("fp8",)), H200))
    is_tile = [p not in grid for p in probs]
    half = len(probs) // 2                               # page 16's grid and tiles, then page 32's
    assert all(p.page_size == 16 for p in probs[:half]) and all(p.page_size == 32 for p in probs[half:])
    for part in (is_tile[:half], is_tile[half:]):
        first = part.index(True)
        assert 0 < first and all(part[first:]) and not any(part[:first])


def test_a_tile_already_on_the_grid_is_measured_once():
    from tuner.grid import QUICK, problems
    from tuner.models import preset
    grid = replace(QUICK, decode_batch=(1, 3), decode_kv=(272,))          # both tile sizes of TP1's first wave
    probs = problems(preset("llama4-scout"), [1], ["decode"], ["fp8"], ["fp8"], [16], grid, tiles_sms=132)
    assert len(probs) == len(set(probs)) == 42                             # 24 + 18 tile sizes, 2 of them the grid's


@pytest.mark.parametrize("script, args, committed", [
    ("decode_tiles.py", [], "decode-tiles/decode-tiles.jsonl"),
    ("decode_tiles.py", ["--waves", "1.15,1.4,1.7", "--kv-lens", "272,384,576,704,1400,2800"],
     "decode-tiles/decode-band.jsonl"),
    ("prefill_tiles.py", [], "prefill-tiles/prefill-tiles.jsonl"),
    ("prefill_tiles.py", ["--batches", "3,5,6,7,10,12,14", "--q-lens", "100,129,192,257,385"],
     "prefill-rows/prefill-rows.jsonl")])
def test_the_benchmark_writers_still_write_the_measured_sets(tmp_path, script, args, committed):
    out = tmp_path / "set.jsonl"
    subprocess.run([sys.executable, f"benchmarks/{script}", *args, "--out", str(out)], cwd=ROOT, check=True,
                   capture_output=True, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    assert read_problems(str(out)) == read_problems(str(ROOT / "benchmarks/results" / committed))


def test_tiles_without_an_sm_count_are_refused_by_name():
    cpu = device.describe("cpu")
    with pytest.raises(SweepRequestError) as e:
        sweep_problems(SweepRequest(tiles=True), cpu)
    assert e.value.field == "tiles" and "SM count" in str(e.value) and cpu.name in str(e.value)


def test_tiles_for_gpus_of_different_sm_counts_are_refused_by_name(tmp_path, monkeypatch):
    fleet = [replace(H200, index=0), replace(H200, index=1), replace(B200, index=2)]
    assert fleet_problems(SweepRequest(tiles=True), fleet[:2]) == sweep_problems(SweepRequest(tiles=True), H200)
    assert fleet_problems(SweepRequest(), fleet) == sweep_problems(SweepRequest(), H200)
    # tuner sweep --devices 0,1,2 on such a host: refused by name, with the two sweeps to run, and no database
    from typer.testing import CliRunner

    from tuner import fleet as fleet_module
    from tuner.cli.app import app
    monkeypatch.setattr(fleet_module, "parse_devices", lambda spec: fleet)
    db = tmp_path / "t.db"
    r = CliRunner().invoke(app, ["sweep", "--model", "llama4-scout", "--tiles", "--devices", "0,1,2", "--db", str(db)])
    assert r.exit_code == 2, r.output
    assert ("cuda:0, cuda:1 have 132 SMs; cuda:2 has 148 SMs: sweep them apart (--devices 0,1 and --devices 2), "
            "or leave out tiles (--tiles)") in " ".join(r.output.split())
    assert not db.exists()


def test_the_cli_refuses_tiles_on_the_cpu_and_beside_problems_files(tmp_path):
    def tuner(*args):
        return subprocess.run([sys.executable, "-m", "tuner", "sweep", "--db", str(tmp_path / "t.db"), *args],
                              cwd=ROOT, capture_output=True, text=True, timeout=120)
    done = tuner("--tiles", "--device", "cpu")
    assert done.returncode != 0 and "SM count" in done.stderr and "--tiles" in done.stderr
    done = tuner("--tiles", "--problems", str(ROOT / "benchmarks/results" / SETS[0]))
    assert done.returncode != 0 and "--tiles shapes a model's grid" in done.stderr
    assert not (tmp_path / "t.db").exists()              # refused before a database is made


def test_the_rest_api_names_the_tiles_field(swept_db, tmp_path):
    db = tmp_path / "d.db"
    shutil.copy(swept_db[0], db)
    with in_process(db, token="t") as c:
        auth = {"Authorization": "Bearer t"}
        r = c.post("/v1/sweeps", json={"model": "llama4-scout", "tiles": True}, headers=auth)
        (e,) = r.json()["detail"]                        # the daemon on the CPU: no SMs to place them by
        assert r.status_code == 422 and e["loc"] == ["body", "tiles"] and "SM count" in e["msg"]
        r = c.post("/v1/sweeps", json={"problems": [AttentionProblem(phase="decode", num_qo_heads=8, num_kv_heads=8,
                   head_dim=64, batch_size=1, kv_len=128).to_dict()], "tiles": True}, headers=auth)
        (e,) = r.json()["detail"]
        assert r.status_code == 422 and e["loc"] == ["body", "tiles"] and "as given" in e["msg"]
