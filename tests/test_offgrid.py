"""Decisions between grid points: predicted at the problem's own sizes, `measured` only within a
measured cell, the model's settings as one value, and `tuner evaluate --offgrid`."""
import dataclasses
import json
import os
import shutil
import sqlite3
import subprocess
import sys

import pytest

from dispatcher.device import H200
from dispatcher.dispatch import Dispatcher
from dispatcher.pipeline import Pipeline
from dispatcher.predictor import PredictorConfig
from dispatcher.table import Table, Timing
from tests.conftest import ROOT, small
from tests.test_model import SCOUT, TC, XQA, twin_table
from tuner.problem_files import write_problems


def crossing_table() -> Table:
    """XQA is faster below batch x kv = 5000 and FA2-TC above it (at batch 2: kv 2500), measured
    at the powers of two only."""
    t = Table()
    for b in (1, 2, 4, 8):
        for kv in (512, 1024, 2048, 4096, 8192):
            x = b * kv
            p = small(**SCOUT, batch_size=b, kv_len=kv)
            t.add(p, Timing(XQA, 10 + x / 200, 0.1, 0.04))
            t.add(p, Timing(TC, 25 + x / 500, 0.1, 0.003))
    return t


def test_a_shape_between_grid_points_is_decided_at_its_own_sizes_not_its_rounded_up_bucket():
    # batch 2 x kv 2200: XQA 5% faster there (32.0 vs 33.8 us). Rounded up to the power of two
    # (kv 4096), FA2-TC wins by 23% and was answered as "measured" though 2200 never was.
    d = Dispatcher(crossing_table(), H200)
    dec = d.choose(small(**SCOUT, batch_size=2, kv_len=2200))
    assert dec.source == "learned" and dec.kernel == "trtllm-xqa", dec.reason
    assert "predicted at its cell, batch_size=2 q_len=1 kv_len=2233," in dec.reason     # its cell, within 4.4%
    up = d.choose(small(**SCOUT, batch_size=2, kv_len=4096))
    assert up.source == "measured" and up.kernel == "fa2-tc"


def test_measured_means_measured_within_the_cell():
    d = Dispatcher(crossing_table(), H200)
    assert d.choose(small(**SCOUT, batch_size=4, kv_len=4000)).source == "measured"    # 2.4% from 4096
    assert d.choose(small(**SCOUT, batch_size=4, kv_len=3900)).source == "learned"     # 4.8% from it
    assert d.choose(small(**SCOUT, batch_size=3, kv_len=4096)).source == "learned"     # batch 3: never measured
    same = [d.choose(small(**SCOUT, batch_size=4, kv_len=k)) for k in (3950, 4000, 4096, 4200)]
    assert len({id(x) for x in same}) == 1          # one decision per cell, whatever the order of asking


def test_a_measured_cell_at_the_longest_request_the_batch_allows_reads_measured():
    # the sweep measures a cell's representative; asked again for the batch it stands for, the answer
    # is that measurement (a representative that moved again on loading was answered as learned)
    from tests.test_model import _row
    asked = small(**SCOUT, batch_size=21, kv_len=33937, max_kv_len=712657)
    measured = asked.cell()
    t = Table.from_rows([_row(measured, XQA, 900.0), _row(measured, TC, 400.0)])
    d = Dispatcher(t, H200).choose(asked)
    assert d.source == "measured" and d.kernel == "fa2-tc", d.reason


def test_the_predictor_settings_round_trip_and_bad_ones_name_themselves(tmp_path):
    cfg = PredictorConfig(batch_step=2.0, twin_weight=0.25, k_nearest=8)
    path = tmp_path / "p.json"
    path.write_text(json.dumps(cfg.to_dict()))
    assert PredictorConfig.from_file(path) == cfg
    assert PredictorConfig.from_dict({}) == PredictorConfig()
    with pytest.raises(ValueError, match="predictor setting 'twin' is unknown; the settings are k_nearest"):
        PredictorConfig.from_dict({"twin": 1})
    with pytest.raises(ValueError, match="k_nearest=2.5 is not an integer"):
        PredictorConfig.from_dict({"k_nearest": 2.5})
    with pytest.raises(ValueError, match=r"resident_step=-1 is negative; every setting is 0 or more \(the default"):
        PredictorConfig.from_dict({"resident_step": -1})
    with pytest.raises(ValueError, match="fp8_unbalanced=nan is not a finite number"):     # JSON's NaN
        PredictorConfig.from_dict(json.loads('{"fp8_unbalanced": NaN}'))
    path.write_text("[1, 2]")
    with pytest.raises(ValueError, match="is not a JSON object of settings"):
        PredictorConfig.from_file(path)


def test_one_setting_changes_a_decision_and_nothing_else_is_global():
    # twin_weight decides here (see test_model's twin test); two dispatchers with different settings
    # in one process each keep their own
    t = twin_table()
    here = small(**SCOUT, batch_size=2, kv_len=2048)
    with_twin = Dispatcher(t, H200)
    alone = Dispatcher(t, H200, predictor=PredictorConfig(twin_weight=0.0))
    assert (with_twin.choose(here).kernel, alone.choose(here).kernel) == ("fa2-tc", "trtllm-xqa")


def tuner(*args):
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}      # piped, as a user's log or pager gets it
    return subprocess.run([sys.executable, "-m", "tuner", *args], cwd=ROOT, capture_output=True, text=True, timeout=600,
                          env=env)


def test_evaluate_offgrid_scores_the_decisions_on_measured_off_grid_shapes(swept_db, tmp_path):
    # the swept db measured batch 1 and 4 x kv 64 and 256; these shapes lie between and beyond
    shapes = [small(batch_size=b, kv_len=kv) for b, kv in ((2, 100), (3, 180), (2, 300))]
    probs = tmp_path / "off.jsonl"
    write_problems(probs, shapes)
    off = tmp_path / "off.db"
    r = tuner("sweep", "--problems", str(probs), "--device", "cpu", "--db", str(off), "--no-isolate")
    assert r.returncode == 0, r.stderr[-2000:]
    cfg = tmp_path / "cfg.json"
    cfg.write_text(json.dumps({"batch_step": 1.0}))
    r = tuner("evaluate", "--db", str(swept_db[0]), "--device", "cpu", "--offgrid", str(off), "--json",
              "--predictor-config", str(cfg))
    assert r.returncode == 0, r.stderr[-2000:]
    res = json.loads(r.stdout)
    assert res["problems"] == 3 and res["overall"]["learned"]["n"] == 3
    (v,) = [c["learned"] for c in res["configs"].values()]
    assert v["regret_geomean"] >= 1.0 and v["sources"] == {"learned": 3}      # none of them was measured
    assert {"speedup_vs_vllm-2026", "slower_than_vllm-2026", "worst"} <= set(v)
    # the same settings as the JSON run: with others the choices may differ where the CPU's timings are close
    table = tuner("evaluate", "--db", str(swept_db[0]), "--device", "cpu", "--offgrid", str(off),
                  "--predictor-config", str(cfg))
    assert table.returncode == 0 and "3 off-grid problems measured in" in table.stdout
    # piped, as into a log or `| less`: every figure whole (rich's 80 columns cut them to "1.13…")
    (row,) = [line for line in table.stdout.splitlines() if " learned " in line and "│" in line]
    assert "…" not in table.stdout and f" {v['regret_geomean']:.3f} " in row and f" {v['regret_max']:.3f} " in row
    assert res["in_sample"] == 0 and "in-sample" not in table.stderr
    # which criterion "within" means: it counted gm 1.02 alone, beside docs that count gm and max 1.10
    o = res["overall"]["learned"]
    assert f"configurations within gm 1.02, {o['configs_within_gm_and_max']} also within max 1.10" in table.stdout
    # the fitted database given as the off-grid set scores every shape on its own measurement: said, not hidden
    same = tuner("evaluate", "--db", str(swept_db[0]), "--device", "cpu", "--offgrid", str(swept_db[0]))
    assert same.returncode == 0 and "were measured in" in same.stderr and "so they score the fit in-sample" in \
        " ".join(same.stderr.split()), same.stderr
    missing = tuner("evaluate", "--db", str(swept_db[0]), "--device", "cpu", "--offgrid", str(tmp_path / "no.db"))
    assert missing.returncode == 2 and "no.db does not exist" in missing.stderr
    # the same set as measured on another host (a device named "CPU..." is a CPU): learned on one, scored on the other
    with sqlite3.connect(off) as conn:
        conn.execute("update environments set device_name = 'CPU of another host'")
    other = tuner("evaluate", "--db", str(swept_db[0]), "--device", "cpu", "--offgrid", str(off), "--json")
    assert other.returncode == 2 and "it holds CPU of another host (--device NAME with a --db that holds it: " \
        in other.stderr and "--measured-on NAME: these decisions on its times" in other.stderr
    r = tuner("evaluate", "--db", str(swept_db[0]), "--device", "cpu", "--offgrid", str(off), "--json",
              "--predictor-config", str(cfg), "--measured-on", "CPU of another host")
    assert r.returncode == 0, r.stderr[-2000:]
    on_other = json.loads(r.stdout)
    assert on_other["measured_on"] == "CPU of another host" and on_other["device"] == res["device"]
    assert on_other["configs"] == res["configs"]       # the same times, now read as the other device's
    assert "note" not in on_other                       # a CPU has no SM count to differ in
    with sqlite3.connect(off) as conn:      # same architecture, other SM count: scored, and the title says so
        conn.execute("update environments set sm_count = 114")
    odd = tuner("evaluate", "--db", str(swept_db[0]), "--device", "cpu", "--offgrid", str(off),
                "--predictor-config", str(cfg), "--measured-on", "CPU of another host")
    assert odd.returncode == 0 and "CPU of another host has 114 SMs" in " ".join(odd.stdout.split()), odd.stdout
    with sqlite3.connect(off) as conn:      # another architecture has other kernels: refused, not mis-scored
        conn.execute("update environments set device_name = 'NVIDIA H100 80GB HBM3', compute_capability = '9.0'")
    arch = tuner("evaluate", "--db", str(swept_db[0]), "--device", "cpu", "--offgrid", str(off),
                 "--measured-on", "NVIDIA H100 80GB HBM3")
    assert arch.returncode == 2 and "is not of" in arch.stderr and "architecture" in arch.stderr, arch.stderr
    alone = tuner("evaluate", "--db", str(swept_db[0]), "--device", "cpu", "--measured-on", "CPU of another host")
    assert alone.returncode == 2 and "give --offgrid too" in alone.stderr


TP4 = dict(num_qo_heads=10, num_kv_heads=2, head_dim=128, kv_dtype="fp8", out_dtype="fp8")


def test_xqa_between_two_batch_rows_costs_as_its_split_rule_says():
    # FP8 XQA at 2 KV heads: batch 32 runs 2 CTAs per request and head, batch 33-64 one, so batch 41
    # costs what 64 does (H200 at 98k: 993 us, 64: ~1048, 32: ~530); FA2-TC's plan balances the work,
    # so it scales smoothly and wins at 41 (782 us) though XQA wins at 32 and 64
    t = Table()
    for b in (16, 32, 64, 128):
        for kv in (65536, 131072):
            p = small(**TP4, batch_size=b, kv_len=kv)
            xqa_us_per_token = {16: 3.6e-3, 32: 5.4e-3, 64: 10.7e-3, 128: 21e-3}[b]    # the H200's
            t.add(p, Timing(XQA, 20 + xqa_us_per_token * kv, 0.5, 0.04))
            t.add(p, Timing(TC, 25 + b * kv * 1.88e-4, 0.5, 0.003))
    p41 = small(**TP4, batch_size=41, kv_len=98022)
    assert Dispatcher(t, H200).choose(p41).kernel == "fa2-tc"
    assert Dispatcher(t, H200, predictor=PredictorConfig(split_rows=0)).choose(p41).kernel == "trtllm-xqa"
    assert Dispatcher(t, H200).choose(small(**TP4, batch_size=64, kv_len=98022)).kernel == "trtllm-xqa"


def test_bf16_xqa_just_past_one_wave_costs_a_second_resident_cta():
    # BF16 XQA (mha.cu) at 8 KV heads: batch 16 is one CTA per request and head on 128 of 132 SMs,
    # batch 19 puts a second CTA beside the first on some SMs: measured on the H200 27-28 us per 1k
    # tokens of KV against 19 at batch 16 (36 at 32). FA2 with a fixed split has no rule and scales with
    # the batch, so it wins at 19 though XQA wins at 16 and 32 (seed 1: 105.8 us against 84.3 at 3743)
    bf16 = dict(num_qo_heads=40, num_kv_heads=8, head_dim=128, kv_dtype="bf16", out_dtype="bf16")
    xqa = Pipeline("trtllm-xqa", "bf16", "bf16", "bf16", tactic=(("enable_pdl", False),))
    split = Pipeline("fa2-tc", "bf16", "bf16", "bf16", tactic=(("fixed_split_size", 1024),))
    t = Table()
    for b, xqa_us_per_1k in ((8, 10.1), (16, 19.3), (32, 36.0)):
        for kv in (4096, 8192):
            p = small(**bf16, batch_size=b, kv_len=kv)
            t.add(p, Timing(xqa, xqa_us_per_1k * kv / 1000, 0.5, 0.003))
            t.add(p, Timing(split, 1.08 * 19.3 * (b / 16) * kv / 1000, 0.5, 0.003))
    p19 = small(**bf16, batch_size=19, kv_len=6000)
    assert Dispatcher(t, H200).choose(p19).pipeline == split.id
    assert Dispatcher(t, H200, predictor=PredictorConfig(resident_step=0)).choose(p19).pipeline == xqa.id
    for b in (16, 32):
        assert Dispatcher(t, H200).choose(small(**bf16, batch_size=b, kv_len=6000)).pipeline == xqa.id
    # the rule is SM90's kernel: on another architecture the batch is read as any other
    sm120 = dataclasses.replace(H200, name="RTX PRO 6000", compute_capability=(12, 0), sm_count=132)
    assert Dispatcher(t, sm120).choose(p19).pipeline == xqa.id


def test_a_fixed_split_is_not_chosen_where_the_asked_shape_overflows_flashinfers_graph_plan():
    # batch 16 x 131072 at 2 KV heads needs 128 chunks of 1024 pages, within the 132 the plan holds;
    # 136000 is in the same decision cell but needs 144: FlashInfer would refuse the plan
    split = Pipeline("fa2-tc", "bf16", "fp8", "bf16", out_quant=True, tactic=(("fixed_split_size", 1024),))
    t = Table()
    for b in (8, 16, 32):
        for kv in (65536, 131072):
            p = small(**TP4, batch_size=b, kv_len=kv)
            t.add(p, Timing(split, b * kv / 9000, 0.5, 0.003))
            t.add(p, Timing(TC, b * kv / 8000, 0.5, 0.003))
    d = Dispatcher(t, H200)
    assert d.choose(small(**TP4, batch_size=16, kv_len=131072)).pipeline == split.id
    near = d.choose(small(**TP4, batch_size=16, kv_len=136000))
    assert near.pipeline == TC.id, near.reason
    assert d.choose(small(**TP4, batch_size=16, kv_len=131072)).pipeline == split.id     # the cell's own stays


def test_evaluate_names_the_shapes_where_the_choice_lost_to_a_rule(tmp_path):
    # H200 mixed seed 2, decided by the shipped table: the shapes a user would fall back to vLLM's rule for
    import lzma

    from dispatcher.rules import RULES
    from tuner.analysis.evaluate import WORST, evaluate_offgrid
    from tuner.cli.analysis import _print_slower, out
    off = tmp_path / "mixed2.db"
    off.write_bytes(lzma.decompress((ROOT / "benchmarks/results/h200-2026-12-06/mixed2.db.xz").read_bytes()))
    res = evaluate_offgrid(ROOT / "heuristics.db", off, "NVIDIA H200")
    listed = []
    for v in (c["learned"] for c in res["configs"].values()):
        for rule in RULES:
            shapes = v[f"slower_shapes_vs_{rule}"]
            assert len(shapes) == min(v[f"slower_than_{rule}"], WORST)
            assert all(x["chose_us"] > x["rule_us"] and x["chose"] != x["rule_chose"] for x in shapes)
            assert not shapes or shapes[0]["slower_by"] == pytest.approx(v[f"worst_vs_{rule}"])
            listed += [(rule, x) for x in shapes]
    assert {rule for rule, _ in listed} >= {"vllm-0.33", "vllm-2026"}
    width, out.width = out.width, 400          # one line a row, as in a wide terminal
    try:
        with out.capture() as got:
            _print_slower(res["configs"])
    finally:
        out.width = width
    rows = [" ".join(line.split()) for line in got.get().splitlines()]
    for rule, x in listed:      # each listed shape on a row of its own rule (up to 10 a rule: fewer here)
        assert any(r.startswith(f"│ {rule} ") and f" {x['shape']} " in r and f"{x['slower_by']:.3f}x" in r
                   for r in rows), (rule, x)


def test_the_shapes_lost_to_a_rule_are_each_configurations_worst_few():
    from collections import defaultdict

    from tuner.analysis.evaluate import WORST, summarize
    g: dict = defaultdict(list)
    by = [1.02, 1.31, 1.05, 1.20, 1.11]
    g["learned:regret"] = [1.0] * 5
    g["learned:slower:vllm-2026"] = by
    g["learned:slower_shapes:vllm-2026"] = [{"shape": f"batch={i}", "slower_by": b} for i, b in enumerate(by)]
    v = summarize(g, ("learned",))["learned"]
    assert v["slower_than_vllm-2026"] == 5 and v["worst_vs_vllm-2026"] == 1.31
    assert [x["slower_by"] for x in v["slower_shapes_vs_vllm-2026"]] == sorted(by, reverse=True)[:WORST]


def test_evaluate_remeasured_decides_each_shape_from_its_second_measurement(swept_db, tmp_path):
    # the noise ceiling: the same set measured twice, each shape decided from one run and timed in the other;
    # kv 100 and 101 share a cell, and each is decided from its own measurement, not the cell's
    from dispatcher.policy import max_relerr
    shapes = [small(batch_size=b, kv_len=kv) for b, kv in ((2, 100), (2, 101), (3, 180), (2, 300))]
    probs = tmp_path / "off.jsonl"
    write_problems(probs, shapes)
    off, copy, again = tmp_path / "off.db", tmp_path / "copy.db", tmp_path / "again.db"
    r = tuner("sweep", "--problems", str(probs), "--device", "cpu", "--db", str(off), "--no-isolate")
    assert r.returncode == 0, r.stderr[-2000:]
    budget = max_relerr("bf16", "bf16")
    for db in (copy, again):                 # run 2 did not measure kv 300 ...
        shutil.copy(off, db)
        with sqlite3.connect(db) as conn:
            conn.execute("delete from measurements where kv_len = 300")
    with sqlite3.connect(again) as conn:     # ... and in `again`, kv 101's slowest accurate pipeline came out fastest
        key, pipe = conn.execute("select problem_key, pipeline from measurements where status = 'ok' and relerr <= ? "
                                 "and kv_len = 101 order by median_us desc", (budget,)).fetchone()
        conn.execute("update measurements set median_us = 0.001, min_us = 0.001, max_us = 0.001, spread_us = 0 "
                     "where problem_key = ? and pipeline = ?", (key, pipe))
    with sqlite3.connect(off) as conn:
        run1 = dict(conn.execute("select pipeline, median_us from measurements where status = 'ok' and relerr <= ? "
                                 "and problem_key = ?", (budget, key)).fetchall())

    def remeasured(db):       # the scores, and each shape's regret where over 1 (every such shape: 3 at most)
        r = tuner("evaluate", "--db", str(swept_db[0]), "--device", "cpu", "--offgrid", str(off), "--remeasured",
                  str(db), "--json")
        assert r.returncode == 0, r.stderr[-2000:]
        res = json.loads(r.stdout)
        (v,) = res["configs"].values()
        return res, v, {w["shape"]: w["regret"] for w in v["remeasured"]["worst"]}

    res, v, hacked = remeasured(again)
    assert res["problems"] == 3 and res["measured_once"] == 1 and res["remeasured_db"] == str(again)
    assert v["learned"]["n"] == v["remeasured"]["n"] == 3
    # only kv 101's decision moved (a copy of run 1 answers as run 1's own times do, the rule kept within its margin)
    _, _, same = remeasured(copy)
    assert hacked == {**same, "batch=2 q_len=1 kv_len=101": pytest.approx(run1[pipe] / min(run1.values()))}
    table = tuner("evaluate", "--db", str(swept_db[0]), "--device", "cpu", "--offgrid", str(off), "--remeasured",
                  str(again))
    assert table.returncode == 0 and "all scored shapes, remeasured: regret gm" in table.stdout, table.stderr
    assert "1 measured in one only" in " ".join(table.stdout.split())
    with sqlite3.connect(again) as conn:
        conn.execute("update environments set device_name = 'CPU of another host'")
    other = tuner("evaluate", "--db", str(swept_db[0]), "--device", "cpu", "--offgrid", str(off), "--remeasured",
                  str(again))
    assert other.returncode == 2 and "holds no measurements of" in other.stderr and "CPU of another host" in \
        other.stderr, other.stderr
    alone = tuner("evaluate", "--db", str(swept_db[0]), "--device", "cpu", "--remeasured", str(again))
    assert alone.returncode == 2 and "give --offgrid too" in alone.stderr
