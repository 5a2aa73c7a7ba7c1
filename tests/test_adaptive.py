"""Adaptive sampling (tuner/adaptive.py, `tuner sweep --search adaptive`, `tuner evaluate --adaptive`)."""
import json
import math
import os
import subprocess
import sys

from dispatcher.pipeline import Pipeline
from dispatcher.table import Table, Timing
from tests.conftest import small
from tuner.search import adaptive
from tuner.search.adaptive import adaptive_sweep, allocate, farthest_first, midpoint

A = Pipeline("torch-sdpa", "bf16", "bf16", "bf16", tactic=(("backend", "flash"),))
B = Pipeline("torch-sdpa", "bf16", "bf16", "bf16", tactic=(("backend", "math"),))
GRID = [small(batch_size=b, kv_len=kv) for b in (1, 2, 4, 8, 16, 32) for kv in (64, 128, 256, 512, 1024, 2048)]


def synthetic(p):
    """A wins below batch x kv = 6000, B above: one crossover line through the grid."""
    work = p.batch_size * p.kv_len
    return {A: 10 + work / 100, B: 40 + work / 200}


def recorder(table: Table, calls: list | None = None):
    """A measure() that times each problem by `synthetic` into `table` (and logs each batch in `calls`)."""
    def measure(ps):
        if calls is not None:
            calls.append(list(ps))
        for p in ps:
            for pipe, us in synthetic(p).items():
                table.add(p.cell(), Timing(pipe, us, 0.01 * us, 0.001))
    return measure


def run(fraction):
    table, calls = Table(), []
    return adaptive_sweep(GRID, recorder(table, calls), lambda: table, fraction), calls, table


def test_coarse_points_span_the_grid_corners_first():
    pts = farthest_first(GRID, 4)
    assert pts[0] == min(GRID, key=lambda p: (p.batch_size, p.kv_len))
    assert pts[1] == max(GRID, key=lambda p: (p.batch_size, p.kv_len))
    assert len(set(pts)) == 4


def test_refinement_spends_the_budget_near_the_crossover_and_never_measures_twice():
    chosen, calls, _ = run(1 / 3)
    assert len(chosen) == math.ceil(len(GRID) / 3) == len(set(chosen))
    refined = [p for c in calls[2:] for p in c]          # after the two coarse passes
    near = [p for p in refined if 0.25 <= p.batch_size * p.kv_len / 4096 <= 4]
    assert len(near) >= len(refined) * 0.7, [(p.batch_size, p.kv_len) for p in refined]


def test_a_resumed_search_counts_what_is_measured():
    chosen, _, table = run(1 / 3)
    again = []
    out = adaptive_sweep(GRID, lambda ps: again.extend(ps), lambda: table, 1 / 3)
    assert again == [] and set(out) == set(chosen)


def test_evaluate_replays_an_adaptive_search_beside_a_random_sample(swept_db):
    r = subprocess.run([sys.executable, "-m", "tuner", "evaluate", "--db", str(swept_db[0]), "--device", "cpu",
                        "--adaptive", "0.5", "--json"], capture_output=True, text=True, check=True)
    res = json.loads(r.stdout)
    assert res["measured"] < res["cells"] and set(res) >= {"adaptive", "random"}
    assert all(v["regret_geomean"] >= 1.0 for v in res["adaptive"].values())
    # the pooled figure over every held-out shape, beside the per-configuration count against 1.02
    pooled = res["adaptive_overall"]
    assert pooled["n"] == sum(v["n"] for v in res["adaptive"].values()) and pooled["configs"] == len(res["adaptive"])
    gms = [v["regret_geomean"] for v in res["adaptive"].values()]
    # between the configurations' figures (to rounding: one configuration's pooled and own gm are summed apart)
    assert min(gms) * (1 - 1e-12) <= pooled["regret_geomean"] <= max(gms) * (1 + 1e-12)
    assert pooled["configs_within_target"] == sum(v["regret_geomean"] <= 1.02 for v in res["adaptive"].values())
    assert res["random_overall"]["n"] == sum(v["n"] for v in res["random"].values())
    # without --json a table and the pooled lines, as every other evaluation prints (it was ~4,700 JSON lines)
    text = subprocess.run([sys.executable, "-m", "tuner", "evaluate", "--db", str(swept_db[0]), "--device", "cpu",
                           "--adaptive", "0.5"], capture_output=True, text=True, check=True).stdout
    assert not text.lstrip().startswith("{") and f"adaptive: regret gm {pooled['regret_geomean']:.4f} over " \
        f"{pooled['n']}" in text and "random: regret gm" in text, text
    bad = subprocess.run([sys.executable, "-m", "tuner", "evaluate", "--db", str(swept_db[0]), "--adaptive", "1.5"],
                         capture_output=True, text=True)
    assert bad.returncode == 2 and "budget fraction 1.5 is out of range" in bad.stderr


def test_the_budget_favours_small_families_and_is_never_exceeded():
    decode, prefill = {("decode", i): 91 for i in range(16)}, {("prefill", i): 22 for i in range(16)}
    share = allocate(decode | prefill, 608)                   # a third of the llama4-scout grid
    assert sum(share.values()) == 608
    assert all(share[f] / 22 > 1.5 * share[d] / 91 for f in prefill for d in decode)   # a larger share
    assert allocate({"tiny": 2, "big": 100}, 50) == {"tiny": 2, "big": 48}         # capped, rest moves on


def test_the_budget_split_is_the_same_on_every_run():
    # the rounding's last points go to the first families listed, not to wherever a set's hash order put them
    fams = {("decode", f"{kv}/fp8") for kv in "abcdefg"}
    fams = dict.fromkeys(sorted(fams), 10)
    assert list(allocate(fams, 25).values()) == [4, 4, 4, 4, 3, 3, 3]
    code = ("from tuner.search.adaptive import allocate; "
            "print(allocate({('decode', f'{kv}/fp8'): 10 for kv in 'abcdefg'}, 25))")
    runs = {subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                           env={**os.environ, "PYTHONHASHSEED": str(seed)}).stdout for seed in range(4)}
    assert len(runs) == 1, runs


def test_a_small_family_beside_a_large_one_gets_enough_points_to_fit():
    big = GRID + [small(batch_size=b, kv_len=kv) for b in (64, 128, 256) for kv in (64, 128, 256, 512, 1024, 2048)]
    few = [small(phase="prefill", q_len=q, kv_len=q, batch_size=b) for b in (1, 4) for q in (64, 128, 256)]
    table = Table()

    measure = recorder(table)
    chosen = adaptive_sweep(big + few, measure, lambda: table, 1 / 3)
    assert len(chosen) <= math.ceil(len(big + few) / 3)
    assert sum(p.phase == "prefill" for p in chosen) >= 3       # a third of 6 would be 2


def test_a_search_stopped_early_says_so_and_measures_nothing_more():
    table, calls, said = Table(), [], []

    measure = recorder(table, calls)
    out = adaptive_sweep(GRID, measure, lambda: table, 1 / 3, said.append, stopped=lambda: len(calls) >= 2)
    assert len(calls) == 2 and out == calls[0] + calls[1]    # the two coarse passes, then stop
    assert len(said) == 1 and "stopped early" in said[0] and "again to resume" in said[0]


def test_the_rest_of_the_coarse_points_comes_after_a_fit_the_screen_can_read():
    # the screen (tuner/search/screen.py) reads the latest fit: without one before the coarse phase ends,
    # it could leave nothing out of half the points the search measures
    fams = [GRID, [small(kv_dtype="fp8", out_dtype="fp8", batch_size=p.batch_size, kv_len=p.kv_len) for p in GRID]]
    table, events = Table(), []
    record = recorder(table)

    def measure(ps):
        events.append(len(ps))
        record(ps)

    def fit(t):
        events.append("fit")
        return adaptive.default_fit(t)
    adaptive_sweep([p for f in fams for p in f], measure, lambda: table, 1 / 3, fit=fit)
    assert events[:6] == [4, 4, "fit", 2, 2, "fit"]


def test_a_search_cut_by_a_deadline_has_sampled_every_family():
    # --max-minutes on a large grid (the --mixed axis): every configuration gets its coarse points before
    # any is refined, so a cut search leaves none unmeasured (it used to measure the first families fully)
    fams = [GRID] + [[small(kv_dtype="fp8", out_dtype=o, batch_size=p.batch_size, kv_len=p.kv_len) for p in GRID]
                     for o in ("bf16", "fp8")]
    table, calls = Table(), []

    measure = recorder(table, calls)
    out = adaptive_sweep([p for f in fams for p in f], measure, lambda: table, 1 / 3, stopped=lambda: len(calls) >= 7)
    # each family's 6 coarse points in two passes (4, then 2: FIRST_COARSE), then the first refinement
    assert [len(c) for c in calls] == [4, 4, 4, 2, 2, 2, 4]
    assert all(any(p in out for p in f) for f in fams) and len(out) == 22
    again = []                                               # resumed: the rest of each family's budget
    grid = [p for f in fams for p in f]
    rest = adaptive_sweep(grid, lambda ps: (again.extend(ps), measure(ps)), lambda: table, 1 / 3)
    assert len(rest) == 36 == len(set(rest)) and len(again) == 14 and not set(again) & set(out)


def test_an_adaptive_sweep_runs_all_its_batches_in_one_worker(tmp_path, cpu, monkeypatch):
    # each refinement batch is a sweep of its own; a worker each cost the H200 run 173 of its 268 s
    from tuner.isolation import IsolatedMeasurer
    from tuner.library import run_problems
    from tuner.options import SweepOptions
    starts, real_start = [], IsolatedMeasurer._start
    monkeypatch.setattr(IsolatedMeasurer, "_start", lambda self: (starts.append(1), real_start(self)))
    grid = [small(batch_size=b, kv_len=kv) for b in (1, 2, 4) for kv in (64, 128, 256, 512)]
    report = run_problems(grid, cpu, tmp_path / "a.db", "wall", SweepOptions(isolate=True), say=lambda m: None,
                          search="adaptive", budget=0.5)
    assert len(report.outcomes) == 6 and report.count("ok") > 0
    assert len(starts) == 1


def test_with_between_it_measures_off_the_grid_where_neighbours_disagree():
    # the crossover (batch x kv = 6000) lies between grid points; with `between` the search may
    # measure the cell halfway (log scale) between two measured neighbours whose winners differ
    table = Table()
    chosen = adaptive_sweep(GRID, recorder(table), lambda: table, 1 / 2, between=True)
    off = [p for p in chosen if p not in GRID]
    assert off, "no shape off the grid was measured"
    for p in off:
        assert p.cell() == p and 0.25 <= p.batch_size * p.kv_len / 6000 <= 4    # on the lattice, at the crossover
    assert len(chosen) <= math.ceil(len(GRID) / 2) and len(set(chosen)) == len(chosen)


def test_a_rerun_of_a_finished_search_measures_nothing_and_says_each_family():
    # the off-lattice midpoints it measured count on resume too; a family done by its coarse pass is
    # reported like the others
    from tuner.library import adaptive_total
    one = [small(phase="prefill", q_len=64, kv_len=64, batch_size=1)]
    table, said = Table(), []

    measure = recorder(table)
    first = adaptive_sweep(GRID + one, measure, lambda: table, 1 / 2, said.append, between=True)
    assert len(first) == adaptive_total(GRID + one, 1 / 2) == math.ceil(37 / 2)
    assert any(p not in GRID + one for p in first)             # it measured off the lattice
    again, said = [], []
    adaptive_sweep(GRID + one, lambda ps: (again.extend(ps), measure(ps)), lambda: table, 1 / 2, said.append,
                   between=True)
    assert again == [] and len(said) == 2 and any("1 of 1 points of prefill" in m for m in said)


def test_a_batch_cut_by_the_deadline_is_not_counted_as_measured():
    table, said = Table(), []

    def measure(ps):                     # the deadline falls after the third point of the coarse batch
        for p in ps[:3]:
            for pipe, us in synthetic(p).items():
                table.add(p.cell(), Timing(pipe, us, 0.01 * us, 0.001))
    adaptive_sweep(GRID, measure, lambda: table, 1 / 3, said.append, stopped=lambda: True)
    assert said == ["adaptive: stopped early while sampling coarsely, 3 points measured in 1 families; "
                    "run the same command again to resume"]


def test_a_midpoint_lies_between_its_ends_across_a_query_tile():
    def pre(q):
        return small(phase="prefill", batch_size=4, q_len=q, kv_len=8192)
    assert midpoint(pre(129), pre(140)) is None          # 129 and 140 are neighbouring cells: nothing between
    mid = midpoint(pre(1921), pre(2048))
    assert mid is None or 1921 < mid.q_len < 2048
