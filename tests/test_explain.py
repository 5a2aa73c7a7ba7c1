"""Why a decision, in full (dispatcher/explain.py): the Python call, `tuner decide --explain` and
GET /v1/decision?explain=true."""
import json
import subprocess
import sys

from dispatcher import AttentionProblem
from dispatcher.device import H200
from dispatcher.dispatch import Dispatcher
from dispatcher.pipeline import Pipeline
from dispatcher.table import Table, Timing
from tests.conftest import ROOT, SHIPPED, in_process

SCOUT = dict(num_qo_heads=40, num_kv_heads=8, head_dim=128)
ONE_LONG = dict(phase="decode", batch_size=32, kv_len=16384, max_kv_len=131072, kv_dtype="fp8", out_dtype="bf16",
                **SCOUT)
SPLIT = Pipeline("fa2-tc", "bf16", "fp8", "bf16", tactic=(("fixed_split_size", 1024),))
XQA = Pipeline("trtllm-xqa", "bf16", "fp8", "bf16", tactic=(("enable_pdl", False),))
XQA_PDL = Pipeline("trtllm-xqa", "bf16", "fp8", "bf16", tactic=(("enable_pdl", True),))
FA3 = Pipeline("fa3", "fp8", "fp8", "bf16", q_quant=True)


def table_of(p, timings):
    t = Table()
    for pipe, us, relerr in timings:
        t.add(p.cell(), Timing(pipe, us, 1.0, relerr))
    return t


def test_explain_shows_the_measured_times_and_why_each_faster_one_lost():
    """The cell's fastest (a fixed split the batch's plan may not hold) and an FP8 path over the accuracy
    budget are listed with their times and why they lost; kernels that cannot run it say why."""
    p = AttentionProblem(**ONE_LONG)
    d = Dispatcher(table_of(p, [(SPLIT, 618.4, 0.003), (FA3, 700.0, 0.5), (XQA, 1381.3, 0.04),
                                (XQA_PDL, 1390.0, 0.04)]), H200)
    e = d.explain(p)
    assert e.decision == d.choose(p) and e.timings.startswith("measured at batch_size=32")
    rows = {c.pipeline: c for c in e.considered}
    assert [c.pipeline for c in e.considered][:4] == [SPLIT.id, FA3.id, XQA.id, XQA_PDL.id]   # fastest first
    assert rows[SPLIT.id].us == 618.4 and rows[SPLIT.id].note.startswith("left out: fixed_split_size=1024 needs "
                                                                         "about 48 KV chunks")
    assert rows[FA3.id].note == "over the 0.08 relative-error budget (0.5)"
    assert rows[XQA.id].note == "chosen" and rows[XQA.id].us == e.decision.expected_us
    assert rows[XQA_PDL.id].rule and e.rule == d.rule               # vLLM 0.33's XQA with PDL
    assert "needs SM100" in e.ineligible["trtllm-gen"][0] and "trtllm-xqa" not in e.ineligible
    assert all(c.us is None for c in e.considered[4:])            # the rest were never timed here


def test_explain_off_grid_lists_the_predicted_times_the_decision_ranked():
    """Between grid points the times are the model's at the problem's cell; the chosen one is the fastest
    accurate one or the rule's within its keep margin."""
    d = Dispatcher(table_of(AttentionProblem(**{**ONE_LONG, "max_kv_len": 16384}),
                            [(XQA, 300.0, 0.04), (SPLIT, 330.0, 0.003), (XQA_PDL, 302.0, 0.04)]), H200)
    p = AttentionProblem(**{**ONE_LONG, "batch_size": 24, "max_kv_len": 16384})
    e = d.explain(p)
    assert e.decision.source == "learned" and e.timings == "predicted at batch_size=24 q_len=1 kv_len=16384"
    timed = [c for c in e.considered if c.us is not None]
    assert {c.pipeline for c in timed} == {XQA.id, SPLIT.id, XQA_PDL.id}
    chosen = next(c for c in timed if c.note == "chosen")
    assert chosen.us == e.decision.expected_us and chosen.pipeline in (timed[0].pipeline, XQA_PDL.id)


def test_tuner_decide_explain_on_the_shipped_db():
    """The shipped H200 db's one-long FP8 cell: the table shows the measured split 2.2x faster than the chosen
    XQA, left out, and the JSON carries the same rows."""
    flags = ["decide", "--device", "NVIDIA H200", "--db", str(SHIPPED), "--phase", "decode", "--num-qo-heads", "40",
             "--num-kv-heads", "8", "--batch-size", "32", "--kv-len", "16384", "--max-kv-len", "131072",
             "--kv-dtype", "fp8", "--explain"]
    env = {"COLUMNS": "200", "PATH": "/usr/bin:/bin"}
    shown = subprocess.run([sys.executable, "-m", "tuner", *flags], cwd=ROOT, capture_output=True, text=True, env=env)
    assert shown.returncode == 0, shown.stderr
    assert "pipelines considered; times measured at batch_size=32" in shown.stdout
    split_row = next(line for line in shown.stdout.splitlines() if "│ fa2-tc[fixed_split_size=1024]" in line)
    assert "0.45x" in split_row and "left out: fixed_split_size=1024" in split_row
    assert "trtllm-gen cannot serve it: needs SM100" in shown.stdout
    js = subprocess.run([sys.executable, "-m", "tuner", *flags, "--json"], cwd=ROOT, capture_output=True, text=True)
    body = json.loads(js.stdout)
    rows = {c["pipeline"]: c for c in body["explain"]["considered"]}
    assert rows[body["pipeline"]]["note"] == "chosen" and rows[body["pipeline"]]["us"] == body["expected_us"]


def test_rest_explain_only_when_asked(tmp_path):
    served = tmp_path / "served.db"
    served.write_bytes(SHIPPED.read_bytes())
    q = {k: str(v) for k, v in ONE_LONG.items()} | {"device": "NVIDIA H200"}
    with in_process(db=served) as client:
        plain = client.get("/v1/decision", params=q).json()
        explained = client.get("/v1/decision", params={**q, "explain": "true"}).json()
    assert "explain" not in plain and {k: v for k, v in explained.items() if k != "explain"} == plain
    rows = explained["explain"]["considered"]
    assert rows[0]["pipeline"] == SPLIT.id and rows[0]["note"].startswith("left out:")
    assert explained["explain"]["ineligible"]["trtllm-gen"] == ["needs SM100, SM103; NVIDIA H200 is SM90"]
