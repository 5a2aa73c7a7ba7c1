"""Why a decision, in full (Dispatcher.explain): the Python call, `tuner decide --explain` and
GET /v1/decision?explain=true. The rows are what the decision ranked, so they never contradict it."""
import json
import shutil
import subprocess
import sys

import pytest

from dispatcher import AttentionProblem, load
from dispatcher.device import H200, DeviceInfo
from dispatcher.dispatch import Dispatcher
from dispatcher.pipeline import Pipeline
from dispatcher.table import Table, Timing
from tests.conftest import ROOT, SHIPPED, in_process

SCOUT = dict(num_qo_heads=40, num_kv_heads=8, head_dim=128)
ONE_LONG = dict(phase="decode", batch_size=32, kv_len=16384, max_kv_len=131072, kv_dtype="fp8", out_dtype="bf16",
                **SCOUT)
SPLIT = Pipeline("fa2-tc", "bf16", "fp8", "bf16", tactic=(("fixed_split_size", 1024),))
XQA = Pipeline("trtllm-xqa", "bf16", "fp8", "bf16", tactic=(("enable_pdl", False),))
XQA_PDL = Pipeline("trtllm-xqa", "bf16", "fp8", "bf16", tactic=(("enable_pdl", True),))    # vLLM 0.33's pick
FA3 = Pipeline("fa3", "fp8", "fp8", "bf16", q_quant=True)


def table_of(*cells):
    t = Table()
    for p, timings in cells:
        for pipe, us, relerr, *spread in timings:
            t.add(p.cell(), Timing(pipe, us, spread[0] if spread else 1.0, relerr))
    return t


def rows_of(e):
    return {c.pipeline: c for c in e.considered}


def test_explain_shows_the_measured_times_and_why_each_faster_one_lost():
    """The cell's fastest (a fixed split the batch's plan may not hold) and an FP8 path over the accuracy
    budget are listed with their times and why they lost; kernels that cannot run it say why."""
    p = AttentionProblem(**ONE_LONG)
    d = Dispatcher(table_of((p, [(SPLIT, 618.4, 0.003), (FA3, 700.0, 0.5), (XQA, 1381.3, 0.04),
                                 (XQA_PDL, 1423.1, 0.04)])), H200)
    e = d.explain(p)
    assert e.decision == d.choose(p) and e.timings.startswith("measured at batch_size=32")
    rows = rows_of(e)
    assert [c.pipeline for c in e.considered][:4] == [SPLIT.id, FA3.id, XQA.id, XQA_PDL.id]   # fastest first
    assert rows[SPLIT.id].us == 618.4 and rows[SPLIT.id].note.startswith("left out: fixed_split_size=1024 needs "
                                                                         "about 48 KV chunks")
    assert rows[FA3.id].note == "over the 0.08 relative-error budget (0.5)"
    assert rows[XQA.id].note == "chosen" and rows[XQA.id].us == e.decision.expected_us
    assert rows[XQA_PDL.id].rule_pick and e.rule == d.rule
    assert "needs SM100" in e.ineligible["trtllm-gen"][0] and "trtllm-xqa" not in e.ineligible
    assert all(c.us is None and c.note == "not measured in this cell" for c in e.considered[4:]
               if not c.note.startswith("left out"))


def test_a_faster_pipeline_behind_the_kept_rule_says_so():
    """Within its keep margin the rule's pick stands though another measured faster: both rows say it."""
    p = AttentionProblem(**{**ONE_LONG, "max_kv_len": 16384})
    d = Dispatcher(table_of((p, [(XQA, 300.0, 0.04, 8.0), (XQA_PDL, 301.0, 0.04, 8.0)])), H200)
    rows = rows_of(d.explain(p))
    assert rows[XQA_PDL.id].note == "chosen; the rule's pick, kept within the keep margin"
    assert rows[XQA.id].note == "faster, within the keep margin of the rule's pick, which stands"


def test_with_the_cell_unusable_the_times_are_the_ones_ranked():
    """A budget every pipeline of the measured cell misses but the nearest shape's meets: the times, the
    chosen row and the title are the nearest shape's, as the decision's."""
    p, near = AttentionProblem(**{**ONE_LONG, "max_kv_len": 16384}), AttentionProblem(**{**ONE_LONG, "batch_size": 16,
                                                                                           "max_kv_len": 16384})
    d = Dispatcher(table_of((p, [(XQA, 300.0, 0.04), (SPLIT, 400.0, 0.04)]),
                            (near, [(XQA, 150.0, 0.04), (SPLIT, 180.0, 0.002)])), H200, max_relerr=0.01, learned=False)
    e = d.explain(p)
    assert e.decision.source == "nearest" and e.timings.startswith("nearest measured shape batch_size=16")
    assert rows_of(e)[SPLIT.id].note == "chosen" and rows_of(e)[SPLIT.id].us == 180.0 == e.decision.expected_us
    assert rows_of(e)[XQA.id].note == "over the 0.01 relative-error budget (0.04)"


def test_every_pipeline_over_budget_shows_their_times_and_the_rule():
    p = AttentionProblem(**{**ONE_LONG, "max_kv_len": 16384})
    d = Dispatcher(table_of((p, [(XQA, 300.0, 0.04), (XQA_PDL, 310.0, 0.04)])), H200, max_relerr=0.01, learned=False)
    e = d.explain(p)
    assert e.decision.source == "rule" and e.timings.startswith("every pipeline measured here is over the 0.01")
    assert rows_of(e)[XQA.id].us == 300.0 and rows_of(e)[XQA.id].note.startswith("over the 0.01")
    assert rows_of(e)[XQA_PDL.id].note == "chosen" and rows_of(e)[XQA_PDL.id].rule_pick


def test_a_twins_times_are_named_as_the_twins(tmp_path):
    """A GPU deciding from its twin's measurements: the times are the H200's, and the title says so."""
    h100 = DeviceInfo(name="NVIDIA H100 80GB HBM3", kind="cuda", compute_capability=(9, 0), sm_count=132)
    from tuner.store import Store
    db = tmp_path / "heuristics.db"
    shutil.copy(SHIPPED, db)
    s = Store(db)
    s.environment(h100, "graph")
    s.close()
    e = load(db, h100.name).explain(AttentionProblem(**{**ONE_LONG, "batch_size": 64, "kv_len": 4096,
                                                        "max_kv_len": 4096, "out_dtype": "fp8"}))
    assert e.decision.source == "learned" and "on NVIDIA H200 (same SM90" in e.timings


@pytest.fixture(scope="module")
def decide_explained():
    flags = ["decide", "--device", "NVIDIA H200", "--db", str(SHIPPED), "--phase", "decode", "--num-qo-heads", "40",
             "--num-kv-heads", "8", "--batch-size", "32", "--kv-len", "16384", "--max-kv-len", "131072",
             "--kv-dtype", "fp8", "--explain"]
    env = {"COLUMNS": "200", "PATH": "/usr/bin:/bin"}
    return [subprocess.run([sys.executable, "-m", "tuner", *flags, *more], cwd=ROOT, capture_output=True, text=True,
                           env=env) for more in ([], ["--json"])]


def test_tuner_decide_explain_on_the_shipped_db(decide_explained):
    """The shipped H200 db's one-long FP8 cell: the table shows the measured split 2.2x faster than the chosen
    XQA, left out, and the JSON carries the same rows."""
    shown, js = decide_explained
    assert shown.returncode == 0, shown.stderr
    assert "pipelines considered (measured: measured at batch_size=32" in shown.stdout
    split_row = next(line for line in shown.stdout.splitlines() if "│ fa2-tc[fixed_split_size=1024]" in line)
    assert "0.45x" in split_row and "left out: fixed_split_size=1024" in split_row
    assert "trtllm-gen cannot serve it: needs SM100" in shown.stdout
    body = json.loads(js.stdout)
    rows = {c["pipeline"]: c for c in body["explain"]["considered"]}
    assert rows[body["pipeline"]]["note"] == "chosen" and rows[body["pipeline"]]["us"] == body["expected_us"]


def test_tuner_decide_input_explains_each_line(tmp_path):
    lines = [json.dumps(ONE_LONG), json.dumps({**ONE_LONG, "max_kv_len": 16384})]
    r = subprocess.run([sys.executable, "-m", "tuner", "decide", "--device", "NVIDIA H200", "--db", str(SHIPPED),
                        "--input", "-", "--explain"], cwd=ROOT, capture_output=True, text=True,
                       input="\n".join(lines) + "\n")
    out = [json.loads(line) for line in r.stdout.splitlines()]
    assert r.returncode == 0 and len(out) == 2 and all(o["explain"]["considered"] for o in out)


def test_rest_explains_only_when_asked(tmp_path):
    served = tmp_path / "served.db"
    served.write_bytes(SHIPPED.read_bytes())
    q = {k: str(v) for k, v in ONE_LONG.items()} | {"device": "NVIDIA H200"}
    with in_process(db=served) as client:
        plain = client.get("/v1/decision", params=q).json()
        explained = client.get("/v1/decision", params={**q, "explain": "true"}).json()
        posted = client.post("/v1/decisions", json={"problems": [ONE_LONG], "device": "NVIDIA H200"}).json()
    assert "explain" not in plain and {k: v for k, v in explained.items() if k != "explain"} == plain
    assert posted["decisions"] == [plain]                         # POST answers as before
    rows = explained["explain"]["considered"]
    assert rows[0]["pipeline"] == SPLIT.id and rows[0]["note"].startswith("left out:")
    assert explained["explain"]["ineligible"]["trtllm-gen"] == ["needs SM100, SM103; NVIDIA H200 is SM90"]


def test_the_table_title_keeps_bracketed_names():
    """Rich read "[backend=flash]" in the title as markup and dropped it."""
    r = subprocess.run([sys.executable, "-m", "tuner", "decide", "--db", "none", "--device", "cpu", "--phase", "decode",
                        "--num-qo-heads", "40", "--num-kv-heads", "8", "--batch-size", "32", "--kv-len", "16384",
                        "--explain"], cwd=ROOT, capture_output=True, text=True,
                       env={"COLUMNS": "250", "PATH": "/usr/bin"})
    assert r.returncode == 0, r.stderr
    assert "pipelines considered (rule: no database (--db none, rule_only): rule vllm-0.33 picks " \
           "torch-sdpa[backend=flash])" in " ".join(r.stdout.split())       # the title wraps at the table's width
