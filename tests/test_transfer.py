import json
import shutil
import sqlite3

import pytest

from dispatcher import AttentionProblem, StoreError, load
from dispatcher.live import keep_fresh
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
    first, again = import_jsonl(dst, f), import_jsonl(dst, f)     # importing twice duplicates nothing
    assert (first["new"], first["replaced"], again["new"], again["replaced"]) == (n, 0, 0, n)   # and says so
    assert keys(dst) == sorted(before + keys(src))
    cpu = load(src, "cpu").choose(small(batch_size=4, kv_len=256))
    merged = load(dst, cpu.device).choose(small(batch_size=4, kv_len=256))
    assert merged.source == "measured" and merged.pipeline == cpu.pipeline
    assert load(dst, "NVIDIA H200").choose(small(num_qo_heads=40, num_kv_heads=8, head_dim=128)).source == "measured"
    when = "select created_at from environments where device_name = ?"
    made = [sqlite3.connect(db).execute(when, [cpu.device]).fetchone()[0] for db in (src, dst)]
    assert made[0] and made[1] == made[0]                 # the environment keeps when it was made


def test_vllm_json_export_lists_decisions_per_device(tmp_path):
    (path,) = export_vllm_json(ROOT / "heuristics.db", tmp_path, "NVIDIA H200")
    data = json.loads(path.read_text())
    assert path.name == "NVIDIA_H200.json" and data["device"] == "NVIDIA H200"
    cfg = data["configs"]["phase=decode,num_qo_heads=40,num_kv_heads=8,head_dim=128,page_size=16,"
                          "q_dtype=bf16,kv_dtype=fp8,out_dtype=fp8"]
    d = cfg["16,1,2048,2048,0"]
    assert d["kernel"] == "trtllm-xqa" and d["use_trtllm"] and d["expected_us"] > 0
    h200 = load(ROOT / "heuristics.db", "NVIDIA H200")
    assert sum(len(c) for c in data["configs"].values()) == len(h200.table.by_cell)   # mixed batches keep theirs
    bf16 = data["configs"]["phase=decode,num_qo_heads=40,num_kv_heads=8,head_dim=128,page_size=16,"
                           "q_dtype=bf16,kv_dtype=fp8,out_dtype=bf16"]
    mixed = [k for k in bf16 if k.split(",")[2] != k.split(",")[3]]
    assert mixed, "the shipped db has FP8 mixed batches"
    for k in mixed:                               # the uniform batch of a mixed one's mean keeps its own decision
        b, q, kv = map(int, k.split(",")[:3])
        uniform = bf16.get(f"{b},{q},{kv},{kv},0")
        p = small(num_qo_heads=40, num_kv_heads=8, head_dim=128, kv_dtype="fp8", batch_size=b, kv_len=kv)
        assert uniform is None or uniform["pipeline"] == h200.choose(p).pipeline


def lines_of(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


def write_lines(path, items):
    path.write_text("".join(json.dumps(i) + "\n" for i in items))


def test_a_bad_line_names_itself_and_changes_nothing(swept_db, tmp_path):
    src, _ = swept_db
    f = tmp_path / "m.jsonl"
    export_jsonl(src, f)
    items = lines_of(f)
    items[2]["measurement"]["median_us"] = "fast"
    write_lines(f, items)
    dst = tmp_path / "dst.db"
    shutil.copy(ROOT / "heuristics.db", dst)
    before = keys(dst)
    with pytest.raises(ValueError, match=r"line 3 of .*m\.jsonl .*measurement\.median_us is 'fast', not float"):
        import_jsonl(dst, f)
    assert keys(dst) == before
    items[2]["measurement"]["median_us"] = 1.0
    del items[4]["measurement"]["kv_len"]
    write_lines(f, items)
    with pytest.raises(ValueError, match=r"line 5 .*measurement\.kv_len is missing"):
        import_jsonl(dst, f)
    del items[4]
    ok = next(i for i, item in enumerate(items) if item["measurement"]["status"] == "ok")
    items[ok]["measurement"]["median_us"] = None                # a ranking reads it: decide would crash
    write_lines(f, items)
    with pytest.raises(ValueError, match=rf"line {ok + 1} .*median_us of an ok row is None; it needs a number"):
        import_jsonl(dst, f)
    with pytest.raises(ValueError, match=r"not a JSONL export .*tuner export --format jsonl"):
        import_jsonl(dst, ROOT / "heuristics.db")
    # a copy cut mid-line was blamed on the format ("is not a Switchyard measurement")
    export_jsonl(src, f)
    text = f.read_text()
    f.write_text(text[: text.rindex("\n", 0, len(text) - 1) + 40])
    n = f.read_text().count("\n") + 1
    with pytest.raises(ValueError, match=rf"line {n} of .*m\.jsonl, its last, is cut short \(.*\): the file looks "
                                         r"truncated; export it again \(nothing was imported\)"):
        import_jsonl(dst, f)
    f.write_text("batch,kv_len,us\n")                # not an export at all: not called truncated
    with pytest.raises(ValueError, match=r"line 1 of .*m\.jsonl is not a Switchyard measurement"):
        import_jsonl(dst, f)
    assert keys(dst) == before
    assert load(dst, "NVIDIA H200").choose(small(num_qo_heads=40, num_kv_heads=8, head_dim=128)).source == "measured"


def test_an_older_export_does_not_replace_newer_measurements(swept_db, tmp_path):
    src, _ = swept_db
    f = tmp_path / "m.jsonl"
    export_jsonl(src, f)
    items = lines_of(f)
    stale = [{**i, "measurement": {**i["measurement"], "median_us": i["measurement"]["median_us"] * 10,
                                   "created_at": "2020-01-01T00:00:00+00:00"}}
             for i in items if i["measurement"]["status"] == "ok"]
    write_lines(f, stale)
    dst = tmp_path / "dst.db"
    shutil.copy(src, dst)
    assert import_jsonl(dst, f)["kept_newer"] == len(stale)
    assert keys(dst) == keys(src)                      # the newer times stand
    newer = [{**i, "measurement": {**i["measurement"], "created_at": "2999-01-01T00:00:00+00:00"}} for i in stale]
    write_lines(f, newer)
    assert import_jsonl(dst, f)["kept_newer"] == 0
    assert keys(dst) != keys(src)


def test_a_device_or_database_that_is_not_there_is_named(tmp_path):
    with pytest.raises(ValueError, match=r"device 'NVIDIA B200' is not in .*heuristics\.db; it holds: NVIDIA H200"):
        export_jsonl(ROOT / "heuristics.db", tmp_path / "x.jsonl", "NVIDIA B200")
    assert not (tmp_path / "x.jsonl").exists()
    with pytest.raises(ValueError, match=r"device 'cpu' is not in .*heuristics\.db; it holds: NVIDIA H200"):
        export_vllm_json(ROOT / "heuristics.db", tmp_path / "vj", "cpu")      # it wrote an empty cpu.json
    assert not (tmp_path / "vj").exists()
    assert export_jsonl(ROOT / "heuristics.db", tmp_path / "y.jsonl", "nvidia h200") > 0       # spelled any way
    with pytest.raises(StoreError, match=r"none\.db: no such database"):
        load(tmp_path / "none.db", "NVIDIA H200")
    with pytest.raises(ValueError, match=r"none\.db does not exist, so device 'NVIDIA A100' has no measurements "
                                         r"and no description here \(only NVIDIA H200, NVIDIA H100 80GB HBM3, "
                                         r"NVIDIA B200"):
        load(tmp_path / "none.db", "NVIDIA A100", missing_ok=True)
    # a GPU Switchyard describes: the rule decides for it until the file appears (a control host without it)
    later = load(tmp_path / "none.db", "nvidia h200", missing_ok=True)
    scout = AttentionProblem(phase="decode", num_qo_heads=40, num_kv_heads=8, batch_size=16, kv_len=2048,
                             kv_dtype="fp8", out_dtype="fp8")
    assert later.device.sm_count == 132 and later.choose(scout).source == "rule"
    live = keep_fresh(later, every_s=3600, record_misses=False)
    shutil.copy(ROOT / "heuristics.db", tmp_path / "none.db")
    assert live.tick() and later.choose(scout).source == "measured"
    live.stop()
    assert load(tmp_path / "none.db", "cpu", missing_ok=True).choose(small()).source == "rule"   # a local one: rule
    assert load(ROOT / "heuristics.db", "nvidia  h200").device.name == "NVIDIA H200"   # any case and spacing
    # the host asked of another GPU's database: the rule decides, and says which device the db holds
    why = load(ROOT / "heuristics.db", "cpu").choose(small()).reason
    assert "heuristics.db holds no measurements of CPU" in why and "only of NVIDIA H200 (name that device" in why


def test_an_export_holding_an_inaccurate_row_imports(swept_db, tmp_path):
    # a sweep stores "inaccurate" rows (over the accuracy budget); import refused its own export of one
    src, _ = swept_db
    f = tmp_path / "m.jsonl"
    export_jsonl(src, f)
    items = lines_of(f)
    ok = next(i for i, item in enumerate(items) if item["measurement"]["status"] == "ok")
    items[ok]["measurement"]["status"] = "inaccurate"
    write_lines(f, items)
    dst = tmp_path / "dst.db"
    import_jsonl(dst, f)
    with sqlite3.connect(dst) as c:
        assert c.execute("select count(*) from measurements where status = 'inaccurate'").fetchone()[0] == 1


def test_tuner_import_says_when_it_made_a_new_database(swept_db, tmp_path):
    """A mistyped --db is a new file: said once, on the import that made it."""
    from tests.test_cli import tuner
    f = tmp_path / "m.jsonl"
    export_jsonl(swept_db[0], f)
    first, again = (tuner("import", str(f), "--db", str(tmp_path / "typo.db")) for _ in range(2))
    assert first.returncode == 0 and "typo.db (a new database: check --db" in first.stdout
    assert again.returncode == 0 and "a new database" not in again.stdout
