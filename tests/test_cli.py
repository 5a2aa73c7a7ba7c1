import json
import re
import subprocess
import sys

import pytest

from tests.conftest import ROOT


def tuner(*args, input=None):
    return subprocess.run([sys.executable, "-m", "tuner", *args], cwd=ROOT, capture_output=True, text=True,
                          input=input, timeout=600)


@pytest.mark.slow
def test_sweep_decide_show_end_to_end(tmp_path):
    db = str(tmp_path / "h.db")
    r = tuner("sweep", "--model", "llama-3.1-8b", "--quick", "--phases", "decode", "--kv-dtypes", "fp8",
              "--out-dtypes", "fp8", "--device", "cpu", "--db", db)
    assert r.returncode == 0, r.stderr
    assert "winners" in r.stdout and "torch-sdpa[backend=" in r.stdout and "6 problems" in r.stdout
    # where the time went, the timed rounds among it (the worker process is the CLI's default)
    assert "time: " in r.stdout and "timed rounds" in r.stdout and "worker start and messages" in r.stdout
    # the worker hands the warm-up stage's parts back too, shown inside it
    assert re.search(r"warm-up \(\+ graph capture\) [\d.]+ s \([^)]*warm-up calls", r.stdout)
    again = tuner("sweep", "--model", "llama-3.1-8b", "--quick", "--phases", "decode", "--kv-dtypes", "fp8",
                  "--out-dtypes", "fp8", "--device", "cpu", "--db", db)
    assert "0 pipelines measured" in again.stdout and "6 problems already measured" in again.stdout

    flags = ["--db", db, "--phase", "decode", "--num-qo-heads", "32", "--num-kv-heads", "8", "--batch-size", "4",
             "--kv-len", "500", "--kv-dtype", "fp8", "--out-dtype", "fp8"]         # within the measured 4 x 512
    dec = json.loads(tuner("decide", *flags, "--json").stdout)
    assert set(dec) >= {"kernel", "q_dtype", "fused_out_quant", "expected_us", "source", "device", "reason"}
    assert dec["source"] == "measured" and dec["kernel"] == "torch-sdpa" and dec["expected_us"] > 0

    lines = [json.dumps({"phase": "decode", "num_qo_heads": 32, "num_kv_heads": 8, "head_dim": 128, "page_size": 16,
                         "batch_size": b, "kv_len": 128, "kv_dtype": "fp8", "out_dtype": "fp8"})
             for b in (1, 4, 3, 400)]
    r = tuner("decide", "--db", db, "--input", "-", input="\n".join(lines) + "\n")
    outs = [json.loads(x) for x in r.stdout.splitlines()]
    assert [o["source"] for o in outs] == ["measured", "measured", "learned", "learned"]

    info = json.loads(tuner("show", "--db", db, "--json").stdout)
    assert info["measurements"] == 12 and info["winners"] == 6
    assert "12 ok measurements, 6 winners" in tuner("show", "--db", db).stdout
    assert info["environments"][0]["device_name"].startswith("CPU")
    assert info["environments"][0]["mixed_batches"] == 0 and "mixed-length" not in tuner("show", "--db", db).stdout


def test_show_counts_the_shipped_mixed_length_batches():
    # the README points at `tuner show` for them
    from dispatcher import load
    n = sum(c.skew > 1 for c in load(ROOT / "heuristics.db", "NVIDIA H200").table.by_cell)     # as the model reads them
    assert n > 100 and f"winners, {n} mixed-length batches" in tuner("show", "--db", str(ROOT / "heuristics.db")).stdout


def test_bad_input_is_one_readable_line_and_exit_2(tmp_path):
    r = tuner("decide", "--db", str(tmp_path / "x.db"), "--phase", "decode", "--num-qo-heads", "40",
              "--num-kv-heads", "7", "--batch-size", "1", "--kv-len", "9")
    assert r.returncode == 2
    assert r.stderr.strip() == ("error: num_qo_heads 40 is not divisible by num_kv_heads 7; "
                                "GQA needs a whole number of query heads per KV head")
    r = tuner("sweep", "--model", "gpt-5", "--db", str(tmp_path / "x.db"))
    assert r.returncode == 2 and "model 'gpt-5' is not a preset; use one of llama4-scout" in r.stderr
    assert "Traceback" not in r.stderr
    r = tuner("decide", "--db", str(tmp_path / "x.db"), "--input", "-", input="{not json\n")
    assert r.returncode == 2 and "line 1 of - is not JSON" in r.stderr
    # a prefill without --q-len was decided as one new token per request (problem files refused it)
    r = tuner("decide", "--db", str(tmp_path / "x.db"), "--phase", "prefill", "--num-qo-heads", "40",
              "--num-kv-heads", "8", "--batch-size", "2", "--kv-len", "100")
    assert r.returncode == 2 and r.stderr.strip() == ("error: --q-len is required for prefill (the new tokens per "
                                                      "request); pass --q-len 1 for one new token")


def test_a_flag_that_a_problem_file_would_override_is_refused(tmp_path):
    """Flags that describe one problem (decide) or a model's grid (sweep) beside a file of problems were
    ignored: the user got bf16 decisions for --kv-dtype fp8, or a 40/8 page-16 sweep for --model qwen3-32b."""
    line = '{"phase": "decode", "num_qo_heads": 40, "num_kv_heads": 8, "head_dim": 128, "batch_size": 4, "kv_len": 9}\n'
    f = tmp_path / "p.jsonl"
    f.write_text(line)
    r = tuner("decide", "--input", str(f), "--kv-dtype", "fp8")
    assert r.returncode == 2 and r.stderr.startswith("error: --kv-dtype describes one problem; with --input each")
    r = tuner("sweep", "--problems", str(f), "--model", "qwen3-32b", "--device", "cpu", "--db", str(tmp_path / "x.db"))
    assert r.returncode == 2 and "--model shapes a model's grid; --problems gives every problem's own" in r.stderr
    r = tuner("sweep", "--problems", str(f), "--max-minutes", "-1", "--device", "cpu", "--db", str(tmp_path / "x.db"))
    assert r.returncode == 2 and "--max-minutes -1.0 is not a number of minutes >= 0" in r.stderr
    assert not (tmp_path / "x.db").exists()
    r = tuner("decide", "--input", str(f), "--json", "--device", "NVIDIA H200")
    assert r.returncode == 0 and json.loads(r.stdout)["kernel"]


def test_a_mixed_sweep_without_fp8_kv_says_what_to_add_and_writes_nothing(tmp_path):
    db = tmp_path / "h.db"
    r = tuner("sweep", "--mixed", "--kv-dtypes", "bf16", "--device", "cpu", "--db", str(db))
    assert r.returncode == 2 and "skew axis to fp8-KV decode only" in r.stderr, r.stderr
    assert "the KV dtypes asked are bf16: ask for decode and fp8" in r.stderr
    r = tuner("sweep", "--mixed", "--phases", "prefill", "--device", "cpu", "--db", str(db))
    assert r.returncode == 2 and "the phases asked are prefill: ask for decode and fp8" in r.stderr, r.stderr
    assert not db.exists()


def test_serve_help_names_every_flag_in_full_at_100_columns():
    """Its on/off pairs (--tune-misses-without-token/--no-...) were cut to "--tune-misses-wi…"."""
    import os
    r = subprocess.run([sys.executable, "-m", "tuner", "serve", "--help"], cwd=ROOT, capture_output=True, text=True,
                       env={**os.environ, "COLUMNS": "100"}, timeout=120)
    for flag in ("--tune-misses-without-token", "--request-timeout-s", "--max-connections", "--new-db"):
        assert flag in r.stdout, r.stdout
    assert "…" not in r.stdout
