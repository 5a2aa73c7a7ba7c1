"""`tuner evaluate` on the shipped H200 measurements: held-out regret, the rules, and the worst misses."""
import json
import math
import subprocess
import sys

from tests.conftest import ROOT, SHIPPED  # the autouse guard there checks it is never written


def evaluate(*args):
    return subprocess.run([sys.executable, "-m", "tuner", "evaluate", "--db", str(SHIPPED), "--device", "NVIDIA H200",
                           "--seed", "0", *args], cwd=ROOT, capture_output=True, text=True, timeout=300,
                          env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), "COLUMNS": "250"})


def test_held_out_regret_and_the_worst_misses_on_the_shipped_h200_data():
    r = evaluate("--json")
    assert r.returncode == 0, r.stderr[-2000:]
    res = json.loads(r.stdout)
    assert res["device"] == "NVIDIA H200" and 0 < res["held_out"] < res["cells"]
    for cfg, ms in res["configs"].items():
        v = ms["learned"]
        assert v["n"] > 0 and 1.0 <= v["regret_geomean"] <= v["regret_max"] and v["regret_p95"] <= v["regret_max"]
        worst = v["worst"]
        assert len(worst) <= 3 and [w["regret"] for w in worst] == sorted((w["regret"] for w in worst), reverse=True)
        for w in worst:      # each miss is a held-out shape's measured times, not a prediction
            assert w["regret"] > 1.0 and math.isclose(w["regret"], w["chose_us"] / w["best_us"])
            assert w["chose"] != w["best"]
        if v["regret_max"] > 1.0:
            assert math.isclose(worst[0]["regret"], v["regret_max"])
        if cfg.startswith("decode") and "kv=fp8" in cfg:
            # the point of the project: FP8-KV decode on TRT-LLM kernels where the 2025 rule refused them
            assert v["speedup_vs_vllm-2025"] > 1.3, (cfg, v)
    # pooled over all held-out shapes: the geometric mean of all of them, exactly
    for m, pooled in res["overall"].items():
        vs = [ms[m] for ms in res["configs"].values()]
        assert pooled["n"] == sum(v["n"] for v in vs)
        # every held-out shape is scored, or its chosen pipeline failed there (counted, not hidden)
        assert pooled["n"] + sum(v["unmeasured_choice"] for v in vs) == res["held_out"]
        assert math.isclose(math.log(pooled["regret_geomean"]) * pooled["n"],
                            sum(v["n"] * math.log(v["regret_geomean"]) for v in vs))
        assert pooled["regret_max"] == max(v["regret_max"] for v in vs)
    # uniform batches, held out, are near the oracle; mixed-length ones are scored on rows of their own
    uniform = [ms["learned"] for c, ms in res["configs"].items() if not c.endswith(" mixed")]
    assert math.exp(sum(v["n"] * math.log(v["regret_geomean"]) for v in uniform) / sum(v["n"] for v in uniform)) < 1.01
    table = evaluate()
    assert table.returncode == 0, table.stderr[-2000:]
    assert "worst held-out choices of the learned model" in table.stdout
    assert f"all scored shapes, learned: regret gm {res['overall']['learned']['regret_geomean']:.4f}" in table.stdout
    # tactics shown, not eaten as markup
    assert "[enable_pdl=" in table.stdout or "[fixed_split_size=" in table.stdout


def test_measuring_mixed_batches_leaves_the_uniform_hold_out_as_it_was(tmp_path):
    # the shipped db holds the skew grid's mixed batches: a seed holds out the uniform cells it held out
    # before they were added (docs/results.md's held-out column), the mixed ones drawn apart
    import sqlite3
    before = tmp_path / "uniform.db"
    before.write_bytes(SHIPPED.read_bytes())
    with sqlite3.connect(before) as c:
        for table in ("measurements", "winners"):
            c.execute(f"delete from {table} where max_kv_len > kv_len")
    runs = {}
    for name, db in (("with", SHIPPED), ("without", before)):
        r = subprocess.run([sys.executable, "-m", "tuner", "evaluate", "--db", str(db), "--device", "NVIDIA H200",
                            "--seed", "1", "--json"], cwd=ROOT, capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, r.stderr[-2000:]
        runs[name] = json.loads(r.stdout)["configs"]
    mixed = {c for c in runs["with"] if c.endswith(" mixed")}
    assert mixed and not any(c.endswith(" mixed") for c in runs["without"])
    for cfg, ms in runs["without"].items():
        assert runs["with"][cfg]["learned"]["n"] == ms["learned"]["n"]
        assert math.isclose(runs["with"][cfg]["learned"]["regret_geomean"], ms["learned"]["regret_geomean"])


def test_evaluate_offgrid_on_another_devices_set_names_both_ways_to_score_it(swept_db, tmp_path):
    # the CPU's decisions asked of an H200 set: the hint named only --measured-on (the CPU's choices on H200 times)
    import lzma
    h200_set = tmp_path / "offgrid4.db"
    h200_set.write_bytes(lzma.decompress((ROOT / "benchmarks/results/h200-offgrid4-waves/offgrid4.db.xz").read_bytes()))
    r = subprocess.run([sys.executable, "-m", "tuner", "evaluate", "--db", str(swept_db[0]), "--device", "cpu",
                        "--offgrid", str(h200_set)], capture_output=True, text=True)
    said = " ".join(r.stderr.split())
    assert r.returncode == 2 and "it holds NVIDIA H200 (--device NAME with a --db that holds it: that device's " \
        "decisions on its own times; --measured-on NAME: these decisions on its times)" in said, r.stderr
