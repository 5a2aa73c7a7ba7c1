"""Per-problem tactic search (tuner/tactics.py, `tuner sweep --tactics optuna`)."""
import json
import sqlite3
import subprocess
import sys

import pytest

from dispatcher import load, load_registry
from dispatcher.pipeline import Pipeline
from dispatcher.registry import RegistryError
from tuner.search.tactics import canonical, tune
from tuner.store import result_row

SPACE = load_registry()["fa2-tc"].tune_space("cuda")     # 8 split sizes x disable_split_kv
GRID_KNOBS = {"fixed_split_size"}
BASE = Pipeline("fa2-tc", "bf16", "fp8", "bf16", tactic=(("fixed_split_size", 0),))


def fake_kernel(best_split: int):
    """A measurement stand-in: time grows with the distance from the best split size."""
    calls = []

    def measure(pipes):
        calls.append([p.id for p in pipes])
        rows = []
        for p in pipes:
            t = p.tactic_dict()
            split = t.get("fixed_split_size", 0)
            us = 500.0 if t.get("disable_split_kv") else 100.0 + abs((split or 4096) - best_split) / 8
            rows.append(result_row(p, "ok", median_us=us, min_us=us, max_us=us, spread_us=0.0, reps=10, relerr=0.01))
        return rows
    return measure, calls


def test_canonical_drops_what_no_longer_matters():
    default = {"fixed_split_size": 0, "disable_split_kv": False}
    assert canonical(default, SPACE, GRID_KNOBS) == (("fixed_split_size", 0),)
    # no split at all: the split size is irrelevant, so all 8 such settings are one pipeline
    assert canonical({"fixed_split_size": 512, "disable_split_kv": True}, SPACE, GRID_KNOBS) == \
        (("disable_split_kv", True), ("fixed_split_size", 0))


def test_grid_search_finds_the_best_split_and_never_measures_a_setting_twice():
    measure, calls = fake_kernel(best_split=256)
    res = tune(BASE, SPACE, GRID_KNOBS, measure, trials=32)
    first = json.loads(res.trials[0]["params"])
    assert first == {"fixed_split_size": 0, "disable_split_kv": False}      # the default is trial 0
    searched = [c[0] for c in calls if len(c) == 1]
    assert len(searched) == len(set(searched)) == 9                           # 8 splits + "no split"
    assert res.best == "fa2-tc[fixed_split_size=256]"
    assert calls[-1][0] == res.default and len(calls[-1]) == 3                # confirmed interleaved with the default
    assert len(res.trials) == 17 and sum(t["remeasured"] for t in res.trials) == 9


def test_sampled_search_respects_its_trial_budget_and_reuses_known_times():
    measure, calls = fake_kernel(best_split=1024)
    known = {"fa2-tc[fixed_split_size=0]": 600.0, "fa2-tc[fixed_split_size=1024]": 100.0}
    res = tune(BASE, SPACE, GRID_KNOBS, measure, trials=6, seed=3, known=known)
    assert len(res.trials) == 6
    measured = {pid for c in calls for pid in c}
    assert "fa2-tc[fixed_split_size=1024]" not in [c[0] for c in calls if len(c) == 1]   # known: not re-timed
    assert res.trials[0]["pipeline"] == "fa2-tc[fixed_split_size=0]" and res.trials[0]["remeasured"] == 0
    assert res.best is not None and measured


def test_a_setting_the_problem_cannot_plan_is_kept_as_refused_and_never_measured():
    # batch 32 x 128k at 2 KV heads: splits of 1024 pages or fewer need more chunks than FlashInfer's
    # CUDA-graph plan holds on the H200 (registry.tactic_reasons)
    from dispatcher.device import H200
    from dispatcher.registry import tactic_reasons
    from tests.conftest import small
    spec = load_registry()["fa2-tc"]
    p = small(num_qo_heads=10, num_kv_heads=2, head_dim=128, kv_dtype="fp8", batch_size=32, kv_len=131072)
    measure, calls = fake_kernel(best_split=256)
    res = tune(BASE, SPACE, GRID_KNOBS, measure, trials=32,
               refused=lambda pipe: tactic_reasons(spec, pipe.tactic_dict(), p, H200))
    timed = {pid for c in calls for pid in c}
    refused = {t["pipeline"] for t in res.trials if t["status"].startswith("refused: fixed_split_size=")}
    assert "fa2-tc[fixed_split_size=256]" in refused and "fa2-tc[fixed_split_size=2048]" not in refused
    assert not refused & timed and res.best not in refused
    assert res.best == "fa2-tc[fixed_split_size=2048]"      # the nearest to 256 that plans


def test_a_tune_space_must_start_at_the_kernels_default(tmp_path):
    bad = tmp_path / "k.toml"
    bad.write_text('[[kernel]]\nid = "fa2-tc"\nfamily = "flashattention"\nphases = ["decode"]\n'
                   'device_kinds = ["cuda"]\ncombos = ["bf16/bf16/bf16"]\n'
                   'tactics.cuda.fixed_split_size = [0, 1024]\ntune.cuda.fixed_split_size = [1024, 0]\n')
    with pytest.raises(RegistryError, match="must start with the kernel's default 0"):
        load_registry(extra=bad)


def test_cpu_sweep_with_optuna_tactics_keeps_every_trial_and_dispatch_carries_the_tactic(tmp_path):
    probs = tmp_path / "p.jsonl"
    probs.write_text("\n".join(json.dumps(d) for d in (
        {"phase": "decode", "num_qo_heads": 8, "num_kv_heads": 2, "head_dim": 64, "page_size": 16, "batch_size": 2,
         "kv_len": 256},
        {"phase": "decode", "num_qo_heads": 8, "num_kv_heads": 2, "head_dim": 64, "page_size": 16, "batch_size": 4,
         "kv_len": 512})))
    db = tmp_path / "h.db"
    cmd = [sys.executable, "-m", "tuner", "sweep", "--problems", str(probs), "--db", str(db), "--tactics", "optuna"]
    subprocess.run(cmd, check=True, capture_output=True)
    c = sqlite3.connect(db)
    trials = c.execute("select problem_key, number, pipeline, remeasured from tactic_trials order by 1, 2").fetchall()
    assert len(trials) == 6                                  # 2 problems x (default + a 2-point grid)
    assert {t[2] for t in trials} == {"torch-sdpa[backend=flash]", "torch-sdpa[backend=math]"}
    assert all(t[2] == "torch-sdpa[backend=flash]" for t in trials if t[1] == 0)
    winners = dict(c.execute("select problem_key, pipeline from winners"))
    d = load(db, "cpu")
    from dispatcher import AttentionProblem
    p = AttentionProblem(phase="decode", num_qo_heads=8, num_kv_heads=2, head_dim=64, page_size=16, batch_size=2,
                         kv_len=256)
    dec = d.choose(p)
    assert dec.source == "measured" and dec.pipeline == winners[p.key()]
    assert dict(dec.tactic)["backend"] in ("flash", "math")
    again = subprocess.run(cmd, check=True, capture_output=True, text=True)
    assert "0 pipelines measured" in again.stdout.replace("\n", " ")    # resumed: the search is not repeated
