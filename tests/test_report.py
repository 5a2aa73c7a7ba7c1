"""tuner report --out: PNG heatmaps and an HTML page from a real swept database."""
import re
import subprocess
import sys

import pytest

pytest.importorskip("matplotlib")


def test_report_writes_heatmaps_the_page_embeds(swept_db, tmp_path):
    db = swept_db[0]
    out = tmp_path / "rep"
    r = subprocess.run([sys.executable, "-m", "tuner", "report", "--db", str(db), "--device", "cpu", "--out", str(out)],
                       capture_output=True, text=True, check=True)
    page = out / "index.html"
    assert r.stdout.strip() == str(page)
    assert r.stderr.startswith("[1/") and "decode 8/2 pg16 kv=bf16 out=bf16" in r.stderr   # a line per configuration
    text = page.read_text()
    pngs = sorted(p.name for p in out.glob("*.png"))
    assert pngs and sorted(re.findall(r'src="([^"]+)"', text)) == pngs
    for p in pngs:
        data = (out / p).read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 5000
    assert any(p.endswith("-winner.png") for p in pngs) and any(p.endswith("-speedup.png") for p in pngs)
    assert "geometric mean" in text and "torch-sdpa" not in text   # short names in pictures, numbers in text


def test_report_on_an_empty_database_says_so(tmp_path):
    from tuner.store import Store
    Store(tmp_path / "e.db").close()
    r = subprocess.run([sys.executable, "-m", "tuner", "report", "--db", str(tmp_path / "e.db"), "--device", "cpu",
                        "--out", str(tmp_path / "rep")], capture_output=True, text=True)
    assert r.returncode != 0 and "no ok measurements" in r.stderr


def test_evaluate_plot_draws_every_scored_shape_and_keeps_stdout_json(swept_db, tmp_path):
    import json
    out = tmp_path / "ev[1]"                             # brackets: a path, not console markup
    r = subprocess.run([sys.executable, "-m", "tuner", "evaluate", "--db", str(swept_db[0]), "--device", "cpu",
                        "--holdout", "0.5", "--json", "--plot", str(out)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-2000:]
    res = json.loads(r.stdout)                          # the page's path goes to stderr, not into the JSON
    assert f"plots: {out / 'index.html'}" in r.stderr
    saved = json.loads((out / "evaluation.json").read_text())
    for cfg, ms in res["configs"].items():              # every scored shape is saved with its sizes and regret
        shapes = saved["configs"][cfg]["learned"]["shapes"]
        assert len(shapes) == ms["learned"]["n"] and "shapes" not in ms["learned"]
        assert all(s["regret"] >= 1.0 and {"batch_size", "kv_len", "rules"} <= set(s) for s in shapes)
    text = (out / "index.html").read_text()
    pngs = sorted(p.name for p in out.glob("*.png"))
    assert "regret.png" in pngs and len(pngs) == 1 + len(res["configs"])
    assert sorted(re.findall(r'src="([^"]+)"', text)) == pngs
    assert all((out / p).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" for p in pngs)


def test_evaluate_plot_refuses_a_replay_it_cannot_draw(swept_db, tmp_path):
    r = subprocess.run([sys.executable, "-m", "tuner", "evaluate", "--db", str(swept_db[0]), "--device", "cpu",
                        "--adaptive", "0.5", "--plot", str(tmp_path / "ev")], capture_output=True, text=True)
    assert r.returncode != 0 and "--plot draws a hold-out" in r.stderr and not (tmp_path / "ev").exists()
    r = subprocess.run([sys.executable, "-m", "tuner", "evaluate", "--db", str(swept_db[0]), "--device", "cpu",
                        "--adaptive", "0.5", "--json"], capture_output=True, text=True)
    assert r.returncode == 0 and '"adaptive"' in r.stdout and '"shapes"' not in r.stdout   # rows only for plots
    (tmp_path / "file").write_text("")
    r = subprocess.run([sys.executable, "-m", "tuner", "evaluate", "--db", str(swept_db[0]), "--device", "cpu",
                        "--plot", str(tmp_path / "file" / "ev")], capture_output=True, text=True)
    assert r.returncode != 0 and f"--plot {tmp_path / 'file' / 'ev'}: cannot make that folder" in r.stderr


def test_winner_maps_say_what_their_short_names_are():
    from tests.conftest import ROOT
    from tuner.analysis.report import winner_maps
    first = winner_maps(ROOT / "heuristics.db", "NVIDIA H200").splitlines()[0]
    assert "XQA = trtllm-xqa" in first and "TC = fa2-tc" in first and "FMHAv2 = trtllm-fmha-v2" in first


def test_winner_maps_give_each_column_its_own_label_and_a_mixed_batch_its_longest_request():
    # 1024 and 1448 were both "1k"; a mixed batch's longest requests (8k-32k at one mean) shared one column
    from tests.conftest import ROOT
    from tuner.analysis.report import kv_label, winner_maps
    assert [kv_label(n) for n in (512, 1024, 1448, 23170, 131072)] == ["512", "1k", "1.41k", "22.6k", "128k"]
    lines = winner_maps(ROOT / "heuristics.db", "NVIDIA H200").splitlines()
    header = {name: lines[lines.index(f"**{name}**") + 2].strip("| ").split(" | ")
              for name in ("decode 40/8 pg16 kv=fp8 out=fp8 mixed", "decode 40/8 pg16 kv=bf16 out=bf16")}
    assert all(len(cols) == len(set(cols)) for cols in header.values()), header
    assert {"1k/8k", "1k/16k", "1k/32k"} <= set(header["decode 40/8 pg16 kv=fp8 out=fp8 mixed"])


def test_report_rule_names_the_speedup_baseline(swept_db, tmp_path):
    """The speedup maps are over the rule asked for, and the page says which; an unknown rule is refused."""
    db, out = str(swept_db[0]), tmp_path / "rep"
    subprocess.run([sys.executable, "-m", "tuner", "report", "--db", db, "--device", "cpu", "--out", str(out),
                    "--rule", "vllm-2026"], capture_output=True, text=True, check=True)
    assert "speedup over vllm-2026" in (out / "index.html").read_text()
    bad = subprocess.run([sys.executable, "-m", "tuner", "report", "--db", db, "--device", "cpu", "--out", str(out),
                          "--rule", "vllm-2027"], capture_output=True, text=True)
    assert bad.returncode == 2 and "--rule 'vllm-2027' is unknown; use one of vllm-0.33" in bad.stderr
