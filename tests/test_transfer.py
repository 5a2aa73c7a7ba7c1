import json
import shutil
import sqlite3

from dispatcher import load
from tests.conftest import ROOT, small
from tuner.transfer import export_jsonl, export_vllm_json, import_jsonl


def keys(path):
    c = sqlite3.connect(path)
    return sorted(c.execute("select e.key, m.problem_key, m.pipeline, m.status, m.median_us from measurements m "
                            "join environments e on e.id = m.env_id").fetchall())


def test_jsonl_round_trip_merges_by_environment(swept_db, tmp_path):
    src, _ = swept_db
    f = tmp_path / "m.jsonl"
    n = export_jsonl(src, f)
    assert n == len(keys(src)) and n == len(f.read_text().splitlines())
    dst = tmp_path / "fleet.db"
    shutil.copy(ROOT / "heuristics.db", dst)            # a database with an H200 environment already
    before = keys(dst)
    import_jsonl(dst, f)
    import_jsonl(dst, f)                                 # importing twice duplicates nothing
    assert keys(dst) == sorted(before + keys(src))
    cpu = load(src, "cpu").choose(small(batch_size=4, kv_len=256))
    merged = load(dst, cpu.device).choose(small(batch_size=4, kv_len=256))
    assert merged.source == "measured" and merged.pipeline == cpu.pipeline
    assert load(dst, "NVIDIA H200").choose(small(num_qo_heads=40, num_kv_heads=8, head_dim=128)).source == "measured"


def test_vllm_json_export_lists_decisions_per_device(tmp_path):
    (path,) = export_vllm_json(ROOT / "heuristics.db", tmp_path, "NVIDIA H200")
    data = json.loads(path.read_text())
    assert path.name == "NVIDIA_H200.json" and data["device"] == "NVIDIA H200"
    cfg = data["configs"]["phase=decode,num_qo_heads=40,num_kv_heads=8,head_dim=128,page_size=16,"
                          "q_dtype=bf16,kv_dtype=fp8,out_dtype=fp8"]
    d = cfg["16,1,2048"]
    assert d["kernel"] == "trtllm-xqa" and d["use_trtllm"] and d["expected_us"] > 0
