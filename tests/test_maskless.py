"""A tactic that takes no attention mask (kernels.toml's `maskless`: torch SDPA's flash backend on CUDA) cannot
serve causal prefill, a sliding window or a mixed-length batch: the registry says why, and the sweep stores it
as unsupported without running it (it was 650 'failed' rows of every --mixed sweep on the GPU)."""
import dataclasses
import sqlite3

import pytest

from dispatcher.device import H200
from dispatcher.problem import AttentionProblem
from dispatcher.registry import RegistryError, load_registry, mask_reasons, tactic_reasons
from tests.conftest import small
from tuner.store import Store
from tuner.sweep import run_sweep
from tuner.timing import TimingConfig
from tuner.timing.wall import WallTimer

SDPA = load_registry()["torch-sdpa"]
GEOMETRY = dict(num_qo_heads=40, num_kv_heads=8, head_dim=128, page_size=16)


@pytest.mark.parametrize("problem", [
    AttentionProblem.from_seq_lens(seq_lens=[500] * 7 + [16000], phase="decode", **GEOMETRY),
    AttentionProblem(phase="prefill", batch_size=2, q_len=512, kv_len=2048, **GEOMETRY),
    AttentionProblem(phase="decode", batch_size=8, kv_len=4096, window_left=1024, **GEOMETRY),
])
def test_sdpa_flash_on_cuda_cannot_take_the_mask_a_problem_needs_and_says_so(problem):
    why = mask_reasons(SDPA, {"backend": "flash"}, problem, H200)
    assert why == ["torch-sdpa backend=flash on cuda takes no attention mask; this problem needs one (causal "
                   "prefill, a sliding window or requests of mixed lengths): another setting of the kernel serves it"]
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


def test_a_sweep_stores_a_maskless_setting_unsupported_with_why_and_never_runs_it(db_path, cpu):
    # on the CPU SDPA's flash backend takes a mask; declared maskless here, the sweep must not run it
    registry = load_registry()
    flash_maskless = (("cpu", (("backend", ("flash",)),)),)
    registry["torch-sdpa"] = dataclasses.replace(registry["torch-sdpa"], maskless=flash_maskless)
    prefill, uniform = small(phase="prefill", batch_size=1, q_len=16, kv_len=64), small()
    timer = WallTimer(TimingConfig(rounds=3, round_s=0.001))
    s = Store(db_path)
    first = run_sweep([prefill, uniform], cpu, s, timer, registry=registry)
    again = run_sweep([prefill, uniform], cpu, s, timer, registry=registry)
    s.close()
    rows = sqlite3.connect(db_path).execute(
        "select phase, pipeline, status, error, median_us from measurements order by phase, pipeline").fetchall()
    assert [r[:3] for r in rows] == [("decode", "torch-sdpa[backend=flash]", "ok"),
                                     ("decode", "torch-sdpa[backend=math]", "ok"),
                                     ("prefill", "torch-sdpa[backend=flash]", "unsupported"),
                                     ("prefill", "torch-sdpa[backend=math]", "ok")]
    assert rows[2][3].startswith("torch-sdpa backend=flash on cpu takes no attention mask") and rows[2][4] is None
    assert first.count("unsupported") == 1 and first.count("ok") == 3 and first.count("failed") == 0
    assert again.measured == 0 and all(o.resumed for o in again.outcomes)
