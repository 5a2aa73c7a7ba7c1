"""vLLM 0.33's real FlashInferImpl.forward on the H200 with and without the plugin (tests/gpu/vllm_forward.py):
the same results within the accuracy budget, BF16 and fused FP8 output, with times printed per step.

vLLM's Python tree comes from $SWITCHYARD_VLLM_TREE (a GPU host without PyPI: `python -m tests.vllm_wheel
pack .gpu/vllm.txz` here, unpacked there) or from its wheel (tests/vllm_wheel.py)."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from tests import vllm_wheel
from tests.conftest import ROOT
from tests.gpu.vllm_forward import FORWARD_MARK

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")]
CHECKS = ["check_bf16_steps_match_vllms_forward", "check_fp8_kv_fused_fp8_output_matches_vllms_forward_and_quant"]


def vllm_tree() -> Path:
    given = os.environ.get("SWITCHYARD_VLLM_TREE")
    if given:
        return Path(given)
    try:
        return vllm_wheel.obtain()
    except vllm_wheel.Unavailable as e:
        pytest.skip(f"vLLM {vllm_wheel.VERSION}'s Python code is not here: {e}; set SWITCHYARD_VLLM_TREE")


@pytest.fixture(scope="module")
def outcomes(device) -> dict[str, str]:
    done = subprocess.run([sys.executable, "-m", "tests.vllm_wheel", str(vllm_tree()), "tests.gpu.vllm_forward",
                           "--gpu"], cwd=ROOT, capture_output=True, text=True, timeout=900)
    for line in done.stdout.splitlines():
        if line.startswith(FORWARD_MARK):
            print(line)
    lines = [ln for ln in done.stdout.splitlines() if ln.startswith(vllm_wheel.RESULT_MARK)]
    assert lines, f"the forward subprocess failed (rc {done.returncode}):\n{done.stderr[-4000:]}"
    return json.loads(lines[-1][len(vllm_wheel.RESULT_MARK):])


@pytest.mark.parametrize("check", CHECKS)
def test_vllm_forward_with_the_plugin(outcomes, check):
    assert outcomes.get(check) == "ok", outcomes.get(check, "not run")
