"""A tactic that takes no attention mask (kernels.toml's `maskless`: torch SDPA's flash backend on CUDA) cannot
serve causal prefill, a sliding window or a mixed-length batch: the registry says why, and every sweep's worker
stores it as unsupported without running it (before, 650 of the 760 failed rows of one whole --mixed sweep on an
H100: benchmarks/results/h100-2026-12-07b-mixed-sweep/)."""
import json
import os
import sqlite3
import subprocess
import sys
import time

import pytest

from dispatcher.device import H200, describe
from dispatcher.pipeline import candidates
from dispatcher.problem import AttentionProblem
from dispatcher.registry import BUILTIN, RegistryError, load_registry, mask_reasons, tactic_reasons
from tests.conftest import ROOT, small
from tuner.options import SweepOptions
from tuner.store import Store
from tuner.sweep import run_sweep
from tuner.timing import TimingConfig
from tuner.timing.wall import WallTimer

SDPA = load_registry()["torch-sdpa"]
GEOMETRY = dict(num_qo_heads=40, num_kv_heads=8, head_dim=128, page_size=16)


def flash_maskless_on_cpu(tmp_path):
    """A user's kernels.toml declaring SDPA's flash backend maskless on the CPU too (there it takes a mask, so
    the CPU tests can see what the sweep does with such a setting): tmp_path/kernels.toml."""
    builtin = BUILTIN.read_text()
    (tmp_path / "kernels.toml").write_text(builtin[builtin.index('[[kernel]]\nid = "torch-sdpa"'):]
                                           + '\nmaskless.cpu.backend = ["flash"]\n')


@pytest.mark.parametrize(("problem", "need"), [
    (AttentionProblem.from_seq_lens(seq_lens=[500] * 7 + [16000], phase="decode", **GEOMETRY),
     "a batch of requests of mixed lengths"),
    # the mean rounds up to the longest: still mixed lengths
    (AttentionProblem.from_seq_lens(seq_lens=[1000, 1001, 1001, 1001], phase="decode", **GEOMETRY),
     "a batch of requests of mixed lengths"),
    (AttentionProblem(phase="prefill", batch_size=2, q_len=512, kv_len=2048, **GEOMETRY),
     "causal attention over 512 new tokens"),
    (AttentionProblem(phase="decode", batch_size=8, kv_len=4096, window_left=1024, **GEOMETRY),
     "a sliding window (1024 tokens)"),
])
def test_sdpa_flash_on_cuda_cannot_take_the_mask_a_problem_needs_and_says_which_settings_can(problem, need):
    why = mask_reasons(SDPA, {"backend": "flash"}, problem, H200)
    assert why == [f"torch-sdpa backend=flash on cuda takes no attention mask, and {need} needs one; "
                   "backend=efficient, backend=cudnn take one"]
    assert tactic_reasons(SDPA, {"backend": "flash"}, problem, H200) == why      # the dispatcher leaves it out
    assert mask_reasons(SDPA, {"backend": "efficient"}, problem, H200) == []


def test_a_uniform_decode_batch_needs_no_mask():
    uniform = AttentionProblem(phase="decode", batch_size=8, kv_len=4096, **GEOMETRY)
    assert mask_reasons(SDPA, {"backend": "flash"}, uniform, H200) == []


def test_a_kernel_file_naming_a_setting_the_kernel_lacks_as_maskless_is_refused(tmp_path):
    bad = tmp_path / "kernels.toml"
    bad.write_text('[[kernel]]\nid = "mine"\nfamily = "reference"\nphases = ["decode"]\ndevice_kinds = ["cpu"]\n'
                   'combos = ["bf16/bf16/bf16"]\ntactics.cpu.backend = ["flash", "math"]\n'
                   'maskless.cpu.backend = ["flahs"]\n')
    with pytest.raises(RegistryError, match=r"maskless.cpu.backend names 'flahs', not one of tactics.cpu.backend "
                                            r"\['flash', 'math'\]"):
        load_registry(extra=str(bad))


def test_a_sweep_stores_a_maskless_setting_unsupported_with_why_and_never_runs_it(tmp_path):
    # on the CPU SDPA's flash backend takes a mask; declared maskless in a user's kernel file (read by the sweep's
    # worker process too), the sweep must not run it
    flash_maskless_on_cpu(tmp_path)
    prefill, uniform = small(phase="prefill", batch_size=1, q_len=16, kv_len=64), small()
    (tmp_path / "problems.jsonl").write_text("".join(json.dumps(p.to_dict()) + "\n" for p in (prefill, uniform)))
    db = tmp_path / "h.db"

    def sweep(*extra):
        r = subprocess.run([sys.executable, "-m", "tuner", "sweep", "--problems", str(tmp_path / "problems.jsonl"),
                            "--device", "cpu", "--db", str(db), *extra], cwd=ROOT, capture_output=True, text=True,
                           env={**os.environ, "SWITCHYARD_KERNELS": str(tmp_path / "kernels.toml")}, timeout=600)
        assert r.returncode == 0, r.stderr
        return " ".join(r.stdout.split())
    first, again = sweep(), sweep("--retry-failed")
    rows = sqlite3.connect(db).execute(
        "select phase, pipeline, status, error, median_us from measurements order by phase, pipeline").fetchall()
    assert [r[:3] for r in rows] == [("decode", "torch-sdpa[backend=flash]", "ok"),
                                     ("decode", "torch-sdpa[backend=math]", "ok"),
                                     ("prefill", "torch-sdpa[backend=flash]", "unsupported"),
                                     ("prefill", "torch-sdpa[backend=math]", "ok")]
    assert rows[2][3] == ("torch-sdpa backend=flash on cpu takes no attention mask, and causal attention over 16 "
                          "new tokens needs one; backend=math takes one") and rows[2][4] is None
    assert ("3 pipelines measured (3 ok, 0 inaccurate, 0 failed), 1 unsupported (not run; the store says why)"
            in first)
    assert "0 pipelines measured" in again and "2 problems already measured" in again   # not tried again, even so


def test_the_adaptive_screen_never_files_a_maskless_setting_as_screened(tmp_path, db_path, cpu, monkeypatch):
    flash_maskless_on_cpu(tmp_path)
    monkeypatch.setenv("SWITCHYARD_KERNELS", str(tmp_path / "kernels.toml"))
    prefill = small(phase="prefill", batch_size=1, q_len=16, kv_len=64)
    s = Store(db_path)
    run_sweep([prefill], cpu, s, WallTimer(TimingConfig(rounds=3, round_s=0.001)), registry=load_registry(),
              screen=lambda p, pipes, fresh: {pid: "screened: a test's reason" for pid in fresh})
    s.close()
    assert sqlite3.connect(db_path).execute("select pipeline, status from measurements order by pipeline").fetchall() \
        == [("torch-sdpa[backend=flash]", "unsupported"), ("torch-sdpa[backend=math]", "screened")]


def test_a_rest_sweep_job_counts_as_measured_only_what_ran(tmp_path, monkeypatch):
    """GET /v1/sweeps/{id}: `measured` counts the pipelines run, as the CLI's summary does; the unsupported
    maskless setting is in `counts`, not in `measured`."""
    from tests.conftest import in_process
    flash_maskless_on_cpu(tmp_path)
    monkeypatch.setenv("SWITCHYARD_KERNELS", str(tmp_path / "kernels.toml"))
    prefill = small(phase="prefill", batch_size=1, q_len=16, kv_len=64)
    with in_process(tmp_path / "h.db", token="t") as c:
        job = c.post("/v1/sweeps", json={"problems": [prefill.to_dict()]}, headers={"Authorization": "Bearer t"})
        job = job.json()
        deadline = time.time() + 120
        while (done := c.get(f"/v1/sweeps/{job['id']}").json())["state"] in ("queued", "running"):
            assert time.time() < deadline, done
            time.sleep(0.2)
    assert done["state"] == "done" and done["counts"] == {"ok": 1, "unsupported": 1}, done
    assert done["measured"] == 1


def test_default_tactics_take_the_first_setting_that_takes_the_mask_a_problem_needs(tmp_path):
    """--tactics default: a masked problem gets SDPA's first backend that takes a mask (math on the CPU here,
    efficient on CUDA), not a default that could only be stored unsupported; a maskless problem keeps flash."""
    flash_maskless_on_cpu(tmp_path)
    reg = load_registry(extra=str(tmp_path / "kernels.toml"))
    cpu = describe("cpu")
    prefill = small(phase="prefill", batch_size=1, q_len=16, kv_len=64)
    assert [pp.id for pp in candidates(reg, prefill, cpu, all_tactics=False)] == ["torch-sdpa[backend=math]"]
    assert [pp.id for pp in candidates(reg, small(), cpu, all_tactics=False)] == ["torch-sdpa[backend=flash]"]
    cuda = [pp.id for pp in candidates(load_registry(), prefill, H200, all_tactics=False) if "sdpa" in pp.id]
    assert cuda == ["torch-sdpa[backend=efficient]"]


def test_a_sweep_given_a_registry_in_code_keeps_its_maskless_settings_unrun(tmp_path, db_path, cpu):
    """run_sweep(registry=...) without $SWITCHYARD_KERNELS: the registry passed is the one whose maskless
    settings are stored unsupported (in this process; a worker process reads its own)."""
    flash_maskless_on_cpu(tmp_path)
    prefill = small(phase="prefill", batch_size=1, q_len=16, kv_len=64)
    s = Store(db_path)
    run_sweep([prefill], cpu, s, WallTimer(TimingConfig(rounds=3, round_s=0.001)),
              registry=load_registry(extra=str(tmp_path / "kernels.toml")))
    s.close()
    assert sqlite3.connect(db_path).execute("select pipeline, status from measurements order by pipeline").fetchall() \
        == [("torch-sdpa[backend=flash]", "unsupported"), ("torch-sdpa[backend=math]", "ok")]


def test_an_optuna_search_starts_from_the_setting_that_takes_the_mask(tmp_path, db_path, cpu, monkeypatch):
    """--tactics optuna on a masked problem: SDPA's search starts from math (the default that takes the mask) and
    keeps flash as a refused trial with the reason, rather than searching nothing."""
    flash_maskless_on_cpu(tmp_path)
    monkeypatch.setenv("SWITCHYARD_KERNELS", str(tmp_path / "kernels.toml"))
    prefill = small(phase="prefill", batch_size=1, q_len=16, kv_len=64)
    s = Store(db_path)
    run_sweep([prefill], cpu, s, WallTimer(TimingConfig(rounds=3, round_s=0.001)), SweepOptions(tactics="optuna"),
              registry=load_registry())
    s.close()
    trials = sqlite3.connect(db_path).execute("select base, pipeline, status from tactic_trials").fetchall()
    assert {base for base, _, _ in trials} == {"torch-sdpa[backend=math]"}
    assert {(pid, status.split(":")[0]) for _, pid, status in trials} == {
        ("torch-sdpa[backend=math]", "ok"), ("torch-sdpa[backend=flash]", "refused")}
