"""Screening in the adaptive search (tuner/search/screen.py): pipelines far slower than the fastest at the
nearest measured shapes are not measured, stored as screened with why, and measured by a later grid sweep."""
import random
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from dispatcher.device import describe
from dispatcher.pipeline import Pipeline, candidates
from dispatcher.predictor import Predictor
from dispatcher.registry import load_registry
from dispatcher.rules import RULES, rule_pick
from dispatcher.table import Table, Timing
from tests.conftest import small
from tuner.analysis.evaluate import load_table
from tuner.options import SweepOptions
from tuner.search.screen import ScreenConfig, screen_for
from tuner.store import Store
from tuner.sweep import run_sweep
from tuner.timing import TimingConfig
from tuner.timing.wall import WallTimer

FAST = Pipeline("torch-sdpa", "bf16", "bf16", "bf16", tactic=(("backend", "flash"),))
SLOW = Pipeline("torch-sdpa", "bf16", "bf16", "bf16", tactic=(("backend", "math"),))
MID = Pipeline("torch-sdpa", "bf16", "bf16", "bf16", tactic=(("backend", "efficient"),))
SHIPPED = Path(__file__).resolve().parent.parent / "heuristics.db"


def family(slow_factor: float, failed_at: tuple[int, ...] = (), even_at=None) -> Table:
    """Batch 1-32 x KV 256-8192: SLOW `slow_factor` x FAST everywhere (absent, as failed, at `failed_at`
    batch sizes; as fast at the cell `even_at`), MID 1.5x."""
    t = Table()
    for b in (1, 2, 4, 8, 16, 32):
        for kv in (256, 1024, 4096, 8192):
            c = small(batch_size=b, kv_len=kv).cell()
            us = 5 + b * kv / 1000
            t.add(c, Timing(FAST, us, 0.01 * us, 0.001))
            t.add(c, Timing(MID, 1.5 * us, 0.02 * us, 0.001))
            if b not in failed_at:
                t.add(c, Timing(SLOW, (1.0 if c == even_at else slow_factor) * us, 0.01 * us, 0.001))
    return t


def test_a_pipeline_far_slower_at_every_nearest_measured_shape_is_screened_with_why():
    model = Predictor().fit(family(4.0), None)
    p = small(batch_size=6, kv_len=2048)                 # between measured shapes
    why = ScreenConfig().reasons(p, [FAST, MID, SLOW], model)
    assert set(why) == {SLOW.id}                           # 1.5x (MID) is measured, 4x is not
    assert why[SLOW.id].startswith("screened: 4.0x the fastest or slower at the 4 nearest measured (or screened)")
    assert "--screen 0" in why[SLOW.id]
    assert ScreenConfig(slower=5).reasons(p, [FAST, MID, SLOW], model) == {}


def test_a_failure_nearby_or_too_few_measured_shapes_screens_nothing():
    # failed at batch 4 and 8 (the nearest): no evidence of speed there, so it is measured
    assert ScreenConfig().reasons(small(batch_size=6, kv_len=2048), [SLOW], Predictor().fit(family(4.0, (4, 8)),
                                                                                             None)) == {}
    three = Table()
    full = family(4.0)
    for c in list(full.by_cell)[:3]:
        for t in full.timings(c):
            three.add(c, t)
    assert ScreenConfig().reasons(small(batch_size=6, kv_len=2048), [SLOW], Predictor().fit(three, None)) == {}


def test_a_measured_shape_is_not_its_own_neighbour():
    p = small(batch_size=8, kv_len=1024)                  # measured, SLOW as fast as FAST there
    model = Predictor().fit(family(4.0, even_at=p.cell()), None)
    assert set(ScreenConfig().reasons(p, [SLOW], model)) == {SLOW.id}     # its neighbours are the others


def test_a_pipeline_screened_nearby_counts_as_that_far_behind_there():
    model = Predictor().fit(family(4.0, failed_at=(4,)), None)
    p = small(batch_size=6, kv_len=2048)
    assert ScreenConfig().reasons(p, [SLOW], model) == {}          # no timing at batch 4: no evidence
    left_out = {(c, SLOW.id): 2.0 for c in model.table.by_cell if c.batch_size == 4}
    why = ScreenConfig().reasons(p, [SLOW], model, left_out)
    assert why[SLOW.id].startswith("screened: 2.0x the fastest or slower at the 4 nearest measured (or screened)")


def test_a_resumed_search_counts_what_the_stopped_one_screened(cpu):
    model = Predictor().fit(family(4.0, failed_at=(4,)), None)
    p = small(batch_size=6, kv_len=2048)
    pipes = [FAST, MID, SLOW]
    fresh = screen_for(ScreenConfig(), lambda: model, cpu, load_registry())
    earlier = [(c, SLOW.id) for c in model.table.by_cell if c.batch_size == 4]     # as Store.screened gives them
    resumed = screen_for(ScreenConfig(), lambda: model, cpu, load_registry(), earlier)
    assert fresh(p, pipes, {SLOW.id}) == {}                  # batch 4 holds no timing of it: no evidence
    assert resumed(p, pipes, {SLOW.id})[SLOW.id].startswith("screened: 2.0x the fastest or slower")


def test_a_rerun_adaptive_sweep_hands_its_screen_what_the_stored_search_screened(db_path, cpu, monkeypatch):
    import tuner.search.screen as screen_module
    from tuner.library import run_problems
    grid = [small(batch_size=b, kv_len=kv) for b in (1, 2, 4) for kv in (64, 128, 256, 512)]
    math_sdpa = next(pp.id for pp in candidates(load_registry(), grid[0], cpu) if "math" in pp.id)
    s = Store(db_path)                  # an earlier search left math SDPA out at the first point
    run_sweep(grid[:1], cpu, s, WallTimer(TimingConfig(rounds=3, round_s=0.001)),
              screen=lambda p, pipes, fresh: {math_sdpa: "screened: a test's reason"} if math_sdpa in fresh else {})
    s.close()
    handed, real = [], screen_module.screened_fits
    monkeypatch.setattr(screen_module, "screened_fits", lambda *a, **kw: (handed.append(list(a[4])), real(*a))[1])
    run_problems(grid, cpu, db_path, "wall", SweepOptions(), say=lambda m: None, search="adaptive", budget=0.5)
    assert [(p.key(), pid) for p, pid in handed[0]] == [(grid[0].key(), math_sdpa)]


def test_bad_settings_name_the_value():
    with pytest.raises(ValueError, match="screen factor 1 must be above 1"):
        ScreenConfig(slower=1)
    r = subprocess.run([sys.executable, "-m", "tuner", "sweep", "--search", "adaptive", "--screen", "0.5",
                        "--device", "cpu", "--db", "/nonexistent/x.db"], capture_output=True, text=True)
    assert r.returncode == 2 and "--screen 0.5 is out of range" in r.stderr
    r = subprocess.run([sys.executable, "-m", "tuner", "sweep", "--screen", "2", "--device", "cpu",
                        "--db", "/nonexistent/x.db"], capture_output=True, text=True)
    assert r.returncode == 2 and "--screen has no effect here: it goes with --search adaptive" in r.stderr
    r = subprocess.run([sys.executable, "-m", "tuner", "evaluate", "--db", str(SHIPPED), "--screen", "2"],
                       capture_output=True, text=True)
    assert r.returncode != 0 and "--screen replays the adaptive search's screen; give --adaptive too" in r.stderr


@pytest.mark.skipif(not SHIPPED.exists(), reason="the shipped heuristics.db")
def test_on_the_h200_grid_torch_sdpa_is_screened_and_no_rule_pick_is():
    full, dev = load_table(SHIPPED, "NVIDIA H200")
    rnd = random.Random(0)
    kept = [c for c in full.by_cell if rnd.random() < 1 / 3]      # as an adaptive search's third
    model = Predictor().fit(full.subset(kept), dev)
    registry = load_registry()
    screen = screen_for(ScreenConfig(), lambda: model, dev, registry)
    held = [c for c in full.by_cell if c not in set(kept)]
    kinds, spared = set(), 0
    for c in held:
        pipes = candidates(registry, c, dev)
        why = screen(c, pipes, {pp.id for pp in pipes})
        kinds |= {pid.split("[")[0] for pid in why}
        picks = {pick.id for r in RULES if (pick := rule_pick(r, c, dev, registry, pipes)[0]) is not None}
        assert not picks & set(why)
        spared += bool(picks & set(ScreenConfig().reasons(c, pipes, model)))
        best = min(t.median_us for t in full.by_cell[c].values())
        # what it screens would not have won here: never within 1.1x of the measured fastest
        assert all(full.by_cell[c][pid].median_us > 1.1 * best for pid in why if pid in full.by_cell[c])
    assert "torch-sdpa" in kinds and spared      # a rule's pick far behind nearby (FA2 at prefill 1 x 99) is measured


def test_a_screened_pipeline_is_stored_with_why_and_measured_by_a_later_grid_sweep(db_path, cpu):
    timer = WallTimer(TimingConfig(rounds=3, round_s=0.001))
    probs = [small(), small(batch_size=4)]
    math_sdpa = {pp.id for pp in candidates(load_registry(), probs[0], cpu) if "math" in pp.id}
    assert math_sdpa

    def screen(p, pipes, fresh):
        return {pp.id: "screened: a test's reason" for pp in pipes if pp.id in math_sdpa & fresh}
    s = Store(db_path)
    first = run_sweep(probs, cpu, s, timer, screen=screen)
    resumed = run_sweep(probs, cpu, s, timer, screen=screen)
    conn = sqlite3.connect(db_path)
    marks = ",".join("?" * len(math_sdpa))
    stored = conn.execute(f"select status, error, median_us from measurements where pipeline in ({marks})",
                          sorted(math_sdpa)).fetchall()
    assert stored == [("screened", "screened: a test's reason", None)] * 2
    assert first.count("screened") == 2 and first.measured == 2        # the flash pipeline only
    assert resumed.measured == 0 and resumed.count("screened") == 0 and all(o.resumed for o in resumed.outcomes)
    assert {w for (w,) in conn.execute("select pipeline from winners")} <= {pp.id for pp in candidates(
        load_registry(), probs[0], cpu)} - math_sdpa
    env = s.environment(cpu, timer.mode)
    assert not s.measured_pipelines(env, probs[0]) & math_sdpa     # --devices workers measure them too
    assert sorted((q.key(), pid) for q, pid in s.screened(env)) == sorted(  # what a resumed search remembers
        (q.key(), pid) for q in probs for pid in math_sdpa)
    grid = run_sweep(probs, cpu, s, timer)              # no screen: what was screened is measured now
    s.close()
    assert grid.measured == 2 and grid.count("ok") == 2
    assert conn.execute("select count(*) from measurements where status = 'screened'").fetchone() == (0,)


def test_a_failed_pipeline_is_measured_again_with_retry_failed_not_screened_over(db_path, cpu):
    timer = WallTimer(TimingConfig(rounds=3, round_s=0.001))
    p = small()
    s = Store(db_path)
    run_sweep([p], cpu, s, timer, SweepOptions(max_relerr=1e-9))     # every pipeline over budget: inaccurate
    every = {pp.id for pp in candidates(load_registry(), p, cpu)}
    again = run_sweep([p], cpu, s, timer, SweepOptions(retry_failed=True),
                      screen=lambda q, pipes, fresh: {pid: "screened: a test's reason" for pid in fresh})
    s.close()
    assert again.count("screened") == 0 and again.count("ok") == len(every)


def test_a_measurement_and_a_screened_row_meet_in_an_import_the_measurement_stays(tmp_path, cpu):
    from tuner.ray_sweep import measured_keys
    from tuner.transfer import export_jsonl, import_jsonl
    timer = WallTimer(TimingConfig(rounds=3, round_s=0.001))
    p = small()
    math_sdpa = {pp.id for pp in candidates(load_registry(), p, cpu) if "math" in pp.id}
    grid_db, adaptive_db = tmp_path / "grid.db", tmp_path / "adaptive.db"
    for db, screen in ((grid_db, None), (adaptive_db, lambda q, pipes, fresh: {
            pid: "screened: a test's reason" for pid in fresh & math_sdpa})):   # the adaptive one is newer
        s = Store(db)
        run_sweep([p], cpu, s, timer, screen=screen)
        s.close()
    assert measured_keys(adaptive_db) == {} and len(measured_keys(grid_db)) == 1    # --ray measures it again

    def screened_rows(db):
        return sqlite3.connect(db).execute("select count(*) from measurements where status = 'screened'").fetchone()
    into_grid, into_adaptive = tmp_path / "a.jsonl", tmp_path / "g.jsonl"
    export_jsonl(adaptive_db, into_grid)
    export_jsonl(grid_db, into_adaptive)
    assert import_jsonl(grid_db, into_grid, keep_newer=False)["kept_measured"] == len(math_sdpa)
    assert screened_rows(grid_db) == (0,)
    got = import_jsonl(adaptive_db, into_adaptive)          # the stored screened rows are newer: replaced anyway
    assert got["replaced"] >= len(math_sdpa) and screened_rows(adaptive_db) == (0,)


def test_the_screen_counts_what_it_left_out_as_that_far_behind():
    p = small(batch_size=6, kv_len=2048)
    full = Predictor().fit(family(4.0), None)
    nearest = full.neighbours(p)[0]
    table = family(4.0)
    del table.by_cell[nearest][SLOW.id]                  # not measured at p's nearest shape
    model = Predictor().fit(table, None)
    screen = screen_for(ScreenConfig(), lambda: model, describe("cpu"), load_registry())
    pipes = [FAST, SLOW]                # on the CPU every rule picks the first SDPA pipeline: FAST, spared
    assert screen(p, pipes, {SLOW.id}) == {}                     # no evidence there
    assert set(screen(nearest, pipes, {SLOW.id})) == {SLOW.id}   # screened there from its own neighbours
    assert set(screen(p, pipes, {SLOW.id})) == {SLOW.id}         # now counted 2x behind there
    assert screen(p, pipes, set()) == {}                          # only pipelines it may leave out


@pytest.mark.skipif(not SHIPPED.exists(), reason="the shipped heuristics.db")
def test_the_replay_says_what_the_screen_left_out_by_kernel():
    from tuner.analysis.evaluate import evaluate_adaptive
    r = evaluate_adaptive(SHIPPED, "NVIDIA H200", 1 / 3, screen=2)
    by_kernel = r["screened_by_kernel"]
    assert r["screened"] == sum(by_kernel.values()) > r["revealed"] / 5         # 29% in run.txt
    assert max(by_kernel, key=by_kernel.get) == "torch-sdpa"
    assert r["screened_closest"] > 1.2       # nothing it left out was close to winning where it did
