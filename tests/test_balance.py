"""kv_balance, the third statistic of a mixed batch (dispatcher/balance.py): validated, made from the
requests' lengths, laid out by the sweep, stored, keyed per cell, and taken by the CLI and REST."""
import dataclasses
import json
import random
import sqlite3

import pytest

from dispatcher import AttentionProblem
from dispatcher.balance import balance_of
from dispatcher.dispatch import load
from dispatcher.problem import ProblemError
from tests.conftest import ROOT
from tuner.lengths import lengths

TP4 = dict(phase="decode", num_qo_heads=10, num_kv_heads=2, head_dim=128, page_size=16, kv_dtype="fp8")


def test_a_balance_out_of_range_names_the_field_and_the_range():
    with pytest.raises(ProblemError) as e:
        AttentionProblem(**TP4, batch_size=99, kv_len=2000, max_kv_len=16000, kv_balance=0.05)
    assert e.value.field == "kv_balance"
    assert str(e.value) == ("kv_balance 0.05 is out of range for batch_size 99 x kv_len 2000 with max_kv_len 16000; "
                            "it lies from 0.132 (the longest requests' tokens in as few requests as possible) to "
                            "0.929 (one long request, the others alike: leave kv_balance out, or 0), or give "
                            "seq_lens alone (from_seq_lens)")
    with pytest.raises(ProblemError, match=r"^kv_balance 2 is out of range for a uniform batch \(max_kv_len 2000 = "
                       r"kv_len\): its balance is 1; leave kv_balance out \(or 0\), or give max_kv_len, or seq_lens$"):
        AttentionProblem(**TP4, batch_size=99, kv_len=2000, kv_balance=2)     # it said "from 1.000 to 1.000"
    with pytest.raises(ProblemError, match=r"^kv_balance 0.9 is out of range: batch_size 2 x kv_len 1000 with "
                       r"max_kv_len 1999 allow one layout, balance 0.500; leave kv_balance out \(or 0\)"):
        AttentionProblem(**TP4, batch_size=2, kv_len=1000, max_kv_len=1999, kv_balance=0.9)   # "0.500 to 0.500"
    with pytest.raises(ProblemError, match="kv_balance 'lots' is not a number"):
        AttentionProblem(**TP4, batch_size=99, kv_len=2000, max_kv_len=16000, kv_balance="lots")
    assert AttentionProblem(**TP4, batch_size=99, kv_len=2000, max_kv_len=16000, kv_balance="0").kv_balance == 0.0
    with pytest.raises(ProblemError, match="request 2 has 3 KV tokens, fewer than q_len 5"):
        AttentionProblem.from_seq_lens(seq_lens=[5, 3], phase="prefill", num_qo_heads=8, num_kv_heads=2, q_len=5)


def test_a_balance_just_outside_its_range_is_clamped_and_survives_its_own_dict():
    p = AttentionProblem(**TP4, batch_size=4, kv_len=4000, max_kv_len=8000, kv_balance=0.495)
    lo, hi = p.balance_range()
    assert p.kv_balance == lo and min(lengths(p)) >= 1
    rng = random.Random(3)
    for _ in range(2000):
        lens = [rng.randint(9000, 10016)] * rng.randint(2, 300) + [rng.randint(1, 40)] * rng.randint(0, 3)
        q = AttentionProblem.from_seq_lens(seq_lens=lens, **TP4)
        again = AttentionProblem(**q.to_dict())
        assert again == q and again.key() == q.key() and min(lengths(again)) >= 1


def test_lengths_of_another_mean_or_balance_are_refused_not_keyed_as_the_problem():
    """A problem given seq_lens beside its sizes would be measured with those lengths and stored under
    its own key (a spread batch as the canonical one): the lengths must have its mean and balance."""
    p = AttentionProblem(**TP4, batch_size=64, kv_len=2100, max_kv_len=32768)
    with pytest.raises(ProblemError) as e:
        dataclasses.replace(p, seq_lens=tuple(lengths(p, "spread")))
    assert e.value.field == "seq_lens"
    assert str(e.value) == ("seq_lens (kv_balance 0.116) do not describe kv_balance 0.772 (0: the canonical "
                            "layout's); give seq_lens alone (AttentionProblem.from_seq_lens)")
    longer = lengths(p)
    longer[1] += 64
    with pytest.raises(ProblemError, match=r"seq_lens \(mean 2101.0\) do not describe kv_len 2100"):
        dataclasses.replace(p, seq_lens=tuple(longer))
    spread = AttentionProblem.from_seq_lens(seq_lens=lengths(p, "spread"), **TP4)
    assert dataclasses.replace(spread, seq_lens=tuple(lengths(spread))).balance == spread.balance   # tiered
    # a small batch's layout misses its balance by a token's rounding, and is still that batch
    small = AttentionProblem(**TP4, batch_size=10, kv_len=5, max_kv_len=10, kv_balance=0.65)
    assert balance_of(lengths(small)) == pytest.approx(0.66)
    assert dataclasses.replace(small, seq_lens=tuple(lengths(small))).kv_balance == 0.65


def test_a_batch_whose_rounded_mean_cannot_hold_its_longest_request_rounds_the_mean_up():
    """One request with a cached prefix among fresh ones: the mean 415.4 rounds to 415, under which the
    longest (2524) is more than the batch allows (7 x 415 - 6 x 64 = 2521), so the mean is 416."""
    lens = [64, 64, 2524, 64, 64, 64, 64]
    fields = dict(phase="prefill", num_qo_heads=40, num_kv_heads=8, head_dim=128, page_size=16, q_len=64)
    p = AttentionProblem.from_seq_lens(seq_lens=lens, **fields)
    assert (p.batch_size, p.kv_len, p.max_kv_len, p.seq_lens) == (7, 416, 2524, tuple(lens))
    assert AttentionProblem.from_dict({**fields, "seq_lens": lens}) == p
    assert AttentionProblem.from_seq_lens(seq_lens=[9, 3, 4], **TP4).kv_len == 5       # nearest where it fits
    assert AttentionProblem.from_seq_lens(seq_lens=[9, 4, 4], **TP4).kv_len == 6
    with pytest.raises(ProblemError, match="request 2 has 60 KV tokens, fewer than q_len 64"):
        AttentionProblem.from_seq_lens(seq_lens=[64, 60, 2524], **fields)


def test_the_requests_lengths_give_the_balance_and_one_long_request_is_the_default():
    many_short = AttentionProblem.from_seq_lens(seq_lens=[16000] * 10 + [200] * 89, **TP4)
    assert many_short.kv_balance == pytest.approx(balance_of([16000] * 10 + [200] * 89)) and many_short.balance < 0.5
    assert "|b0." in many_short.key() and "balance 0." in many_short.describe()
    canonical = AttentionProblem(**TP4, batch_size=99, kv_len=2000, max_kv_len=16000)
    one_long = AttentionProblem.from_seq_lens(seq_lens=lengths(canonical), **TP4)
    assert one_long.kv_balance == 0.0 and one_long == canonical and canonical.balance == pytest.approx(0.929, abs=1e-3)
    assert AttentionProblem.from_dict(many_short.to_dict()) == many_short
    assert AttentionProblem.from_dict({**many_short.to_dict(), "seq_lens": None}) == many_short
    with pytest.raises(ProblemError, match="kv_balance 0.9 disagrees with seq_lens"):
        AttentionProblem.from_dict({**many_short.to_dict(), "kv_balance": 0.9})


@pytest.mark.parametrize("b,kv,top,balance", [(99, 2000, 16000, 0.3), (25, 4096, 65536, 0.41), (16, 100, 400, 0.5),
                                              (200, 512, 1024, 0.6)])
def test_the_sweep_lays_out_a_batch_at_its_balance_with_its_statistics(b, kv, top, balance):
    p = AttentionProblem(**TP4, batch_size=b, kv_len=kv, max_kv_len=top, kv_balance=balance)
    lens = lengths(p)
    assert (len(lens), sum(lens), max(lens), min(lens) >= 1) == (b, b * kv, top, True)
    assert abs(balance_of(lens) - balance) < 0.01


def test_an_old_database_takes_its_lengths_balance_in_keys_and_records_misses(tmp_path):
    import lzma

    from dispatcher import store
    from tuner.store import Store
    old = tmp_path / "mixed4.db"          # measured at schema 4, lengths stored, no kv_balance
    old.write_bytes(lzma.decompress((ROOT / "benchmarks/results/prefill-tiles/mixed4.db.xz").read_bytes()))
    names = ("phase", "num_qo_heads", "num_kv_heads", "head_dim", "page_size", "q_dtype", "kv_dtype", "out_dtype")
    rows = sqlite3.connect(old).execute(f"select lengths, {', '.join(names)} from measurements where lengths is not "
                                        "null group by problem_key").fetchall()
    p = max((AttentionProblem.from_seq_lens(seq_lens=json.loads(r[0]), **dict(zip(names, r[1:]))) for r in rows),
            key=lambda q: q.kv_balance)
    assert p.kv_balance
    store.add_misses(old, "NVIDIA H200", "graph", {p: ("learned", 3)})     # read-only users record misses
    assert sqlite3.connect(old).execute("select kv_balance, count from misses").fetchall() == [(p.kv_balance, 3)]
    from tuner.transfer import export_jsonl, import_jsonl
    export_jsonl(old, tmp_path / "old.jsonl")      # rows as schema 4 wrote them
    imported = tmp_path / "imported.db"
    import_jsonl(imported, tmp_path / "old.jsonl")
    for db in (old, imported):                     # migrated in place, or imported into a new database
        s = Store(db)
        env = s.db.execute("select id from environments").fetchone()[0]
        assert s.measured_pipelines(env, p)        # a resumed sweep does not measure it again
        assert s.db.execute("select count(*) from winners").fetchone()[0] == 192
        s.close()


def test_a_cell_keeps_its_balance_cell_and_is_its_own_cell():
    rng = random.Random(5)
    for _ in range(3000):
        b = rng.randint(2, 300)
        lens = [rng.randint(1, 60000) if rng.random() < rng.random() else rng.randint(1, 3000) for _ in range(b)]
        p = AttentionProblem.from_seq_lens(seq_lens=lens, **TP4)
        c = p.cell()
        assert c.cell() is c and c.cell_key()[-1] == p.cell_key()[-1], (lens, p, c)    # the balance's cell
        if p.kv_balance and c.kv_balance:
            assert abs(c.kv_balance - p.kv_balance) <= 0.1, (p, c)


def test_a_swept_balance_is_stored_and_decided_as_measured(tmp_path):
    p = AttentionProblem(phase="decode", num_qo_heads=8, num_kv_heads=2, head_dim=64, page_size=16, batch_size=12,
                         kv_len=100, max_kv_len=500, kv_balance=0.45)
    from tests.conftest import cpu_sweep_of
    db = cpu_sweep_of(tmp_path, p)
    rows = sqlite3.connect(db).execute("select distinct status, kv_balance, problem_key from measurements").fetchall()
    assert rows == [("ok", 0.45, p.key())]
    d = load(db, "cpu")
    assert d.choose(p).source == "measured"
    assert d.choose(AttentionProblem(**{**p.to_dict(), "kv_balance": 0})).source != "measured"


def test_the_cli_and_rest_take_kv_balance(tmp_path):
    from tests.conftest import cli_and_rest
    q = dict(phase="decode", num_qo_heads=10, num_kv_heads=2, head_dim=128, kv_dtype="fp8", batch_size=99,
             kv_len=2000, max_kv_len=16000)
    r = cli_and_rest(tmp_path, q, "kv_balance", 0.5, 0.05, post=True)
    assert r["cli_ok"][0] == 0 and "kv_balance=0.500" in r["cli_ok"][1]["reason"], r["cli_ok"]
    assert r["cli_bad"][0] != 0 and "kv_balance 0.05 is out of range" in r["cli_bad"][1]
    assert r["rest_ok"].status_code == 200 and "kv_balance=0.500" in r["rest_ok"].json()["reason"], r["rest_ok"].text
    assert r["posted"].status_code == 200 and "kv_balance=0.500" in r["posted"].text, r["posted"].text
    assert r["rest_bad"].status_code == 422 and "kv_balance 0.05 is out of range" in r["rest_bad"].text


def test_tuner_decide_takes_the_requests_lengths():
    """--seq-lens gives batch size, mean, longest and balance at once; a length that is not a whole number,
    or a size given beside the lengths, is refused by name."""
    import subprocess
    import sys

    def decide(*flags):
        return subprocess.run([sys.executable, "-m", "tuner", "decide", "--device", "NVIDIA H200", "--phase", "decode",
                               "--num-qo-heads", "10", "--num-kv-heads", "2", "--kv-dtype", "fp8", "--json", *flags],
                              capture_output=True, text=True, cwd=ROOT)
    spread = lengths(AttentionProblem(**TP4, batch_size=99, kv_len=2048, max_kv_len=8192), "spread")
    r = decide("--seq-lens", ",".join(map(str, spread)))
    assert r.returncode == 0, r.stderr
    assert "batch_size=99 q_len=1 kv_len=2048 max_kv_len=8192 kv_balance=0.400" in json.loads(r.stdout)["reason"]
    for lens, why in (("8192,100,x", "length 3 is 'x', not a whole number from 1 to 16777216"),
                      ("8192,,100", "length 2 is empty"), ("-5,3", "length 1 is '-5'")):
        bad = decide("--seq-lens", lens)
        assert bad.returncode != 0 and f"--seq-lens: {why}" in bad.stderr, bad.stderr
    both = decide("--seq-lens", "8192,100,100,100", "--kv-len", "500")
    assert both.returncode != 0 and "--kv-len comes from --seq-lens; leave it out" in both.stderr


def test_rest_takes_a_batch_by_its_requests_lengths(tmp_path):
    """POST /v1/decisions and GET /v1/decision take seq_lens in place of the sizes; a size that disagrees,
    a bad length, or neither sizes nor lengths is a 422 naming the field."""
    from tests.conftest import SHIPPED, in_process
    served = tmp_path / "served.db"
    served.write_bytes(SHIPPED.read_bytes())
    base = dict(phase="decode", num_qo_heads=10, num_kv_heads=2, kv_dtype="fp8")
    spread = lengths(AttentionProblem(**TP4, batch_size=99, kv_len=2048, max_kv_len=8192), "spread")
    sized = "batch_size=99 q_len=1 kv_len=2048 max_kv_len=8192 kv_balance=0.400"

    def post(**problem):
        return client.post("/v1/decisions", json={"problems": [{**base, **problem}], "device": "NVIDIA H200"})
    with in_process(db=served) as client:
        r = post(seq_lens=spread)
        assert r.status_code == 200 and sized in r.json()["decisions"][0]["reason"], r.text
        got = client.get("/v1/decision", params=[*base.items(), *(("seq_lens", n) for n in spread),
                                                 ("device", "NVIDIA H200")])
        assert got.status_code == 200 and sized in got.json()["reason"], got.text
        comma = client.get("/v1/decision", params={**base, "seq_lens": ",".join(map(str, spread)),
                                                   "device": "NVIDIA H200"})      # as the CLI's --seq-lens
        assert comma.status_code == 200 and comma.json() == got.json(), comma.text
        for problem, field, msg in (({"seq_lens": spread, "batch_size": 98}, "batch_size",
                                     "batch_size 98 disagrees with seq_lens (99)"),
                                    ({"seq_lens": [0, 5]}, "seq_lens", "seq_lens: a request's kv_len 0 is out"),
                                    ({"kv_len": 900}, "batch_size", "batch_size is required (or seq_lens"),
                                    ({"batch_size": True, "kv_len": 900}, "batch_size",
                                     "Value error, true is not a whole number"),
                                    ({"seq_lens": [True, 900]}, "seq_lens", "Value error, a request's length is true")):
            bad = post(**problem)
            detail = bad.json()["detail"][0]
            assert bad.status_code == 422 and detail["loc"] == ["body", "problems", 0, field], bad.text
            assert detail["msg"].startswith(msg), detail


def test_the_migration_keys_each_environment_by_its_own_lengths(tmp_path):
    import lzma

    from tuner.store import Store
    old = tmp_path / "mixed4.db"
    old.write_bytes(lzma.decompress((ROOT / "benchmarks/results/prefill-tiles/mixed4.db.xz").read_bytes()))
    con = sqlite3.connect(old)
    key = next(k for k, lens, qo, kvh in con.execute("select problem_key, lengths, num_qo_heads, num_kv_heads from "
                                                     "measurements where lengths is not null")
               if AttentionProblem.from_seq_lens(seq_lens=json.loads(lens), phase="decode", num_qo_heads=qo,
                                                 num_kv_heads=kvh).kv_balance)
    con.execute("insert into environments (key, device_name) values ('other', 'other GPU')")
    other = con.execute("select id from environments where key = 'other'").fetchone()[0]
    cols = [r[1] for r in con.execute("pragma table_info(measurements)") if r[1] not in ("id", "env_id", "lengths")]
    con.execute(f"insert into measurements (env_id, {', '.join(cols)}) select ?, {', '.join(cols)} from measurements "
                "where problem_key = ?", [other, key])          # the same problem measured canonically elsewhere
    con.commit()
    con.close()
    Store(old).close()
    rows = sqlite3.connect(old).execute("select env_id, problem_key, kv_balance from measurements where "
                                        "problem_key like ?", [key + "%"]).fetchall()
    assert {(e, k == key, b is None) for e, k, b in rows} == {(1, False, False), (other, True, True)}
