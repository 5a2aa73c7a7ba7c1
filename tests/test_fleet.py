"""tuner sweep --devices: one worker process per device, a shared largest-first queue, one store;
devices of one model share an environment only when their calibration times agree."""
import json
import re
import sqlite3
import subprocess
import sys

import pytest

from tests.conftest import ROOT, cpu_test_kernel, small
from tuner.fleet import compare, est_seconds, largest_first, parse_devices
from tuner.ray_sweep import shard

# sleeps long enough that sleep jitter stays well under the 3% tolerance
SLEEPER = cpu_test_kernel("sleeper", "tests.slow_runner", "sleeps (longer on the worker $SLEEPER_SLOW names)",
                          'tactics.cpu.ms = ["10", "12", "14", "16"]')


def _row(pid, us, spread=0.01):
    return {"pipeline": pid, "status": "ok", "median_us": us, "spread_us": spread * us}


def test_times_within_noise_agree_and_a_slower_device_does_not():
    ref = [_row("a", 100), _row("b", 200), _row("c", 50)]
    close = compare(ref, [_row("a", 101), _row("b", 198), _row("c", 51)], "cuda:1", "cuda:0")
    slow = compare(ref, [_row("a", 112), _row("b", 225), _row("c", 56)], "cuda:2", "cuda:0")
    assert close.agrees and abs(close.ratio - 1.01) < 0.01
    assert not slow.agrees and slow.ratio == pytest.approx(1.12, abs=0.01)
    assert "kept apart" in slow.note() and "1.120x" in slow.note()
    # a noisy pair of devices may differ more and still agree: the tolerance is the measured noise
    noisy = compare([_row("a", 100, 0.1)], [_row("a", 112, 0.1)], "cuda:1", "cuda:0")
    assert noisy.agrees and noisy.tolerance == pytest.approx(0.2)
    nothing = compare(ref, [{"pipeline": "a", "status": "failed", "median_us": None, "spread_us": None}], "x", "y")
    assert nothing.agrees and nothing.ratio is None


def test_device_lists_and_their_errors():
    two = parse_devices("cpu,cpu")
    assert [d.index for d in two] == [0, 1] and {d.kind for d in two} == {"cpu"}
    with pytest.raises(ValueError, match="needs CUDA devices.*cpu,cpu"):
        parse_devices("all")
    with pytest.raises(ValueError, match="'gpu0' is not a GPU index"):
        parse_devices("gpu0")
    with pytest.raises(ValueError, match="names no device"):
        parse_devices(" , ")


def test_largest_problems_go_first_and_spread_over_shards():
    probs = [small(batch_size=b, kv_len=kv) for b in (1, 8, 64) for kv in (128, 4096, 32768)]
    order = [p for p, _ in largest_first([(p, [None]) for p in probs])]
    assert [est_seconds(p) for p in order] == sorted((est_seconds(p) for p in probs), reverse=True)
    parts = shard(probs, 3)
    assert sorted(len(s) for s in parts) == [3, 3, 3]
    assert {s[0] for s in parts} == set(order[:3])      # the three largest, one per shard


def _sweep(args, env, db, probs):
    return subprocess.run([sys.executable, "-m", "tuner", "sweep", "--problems", str(probs), "--device", "cpu",
                           "--db", str(db), *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)


def _sleeper_env(tmp_path, slow=""):
    reg = tmp_path / "sleeper.toml"
    reg.write_text(SLEEPER)
    return {"SWITCHYARD_KERNELS": str(reg), "SWITCHYARD_RUNNERS": "sleeper=tests.slow_runner:RUNNER",
            "SLEEPER_SLOW": slow, "PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "COLUMNS": "250"}


@pytest.mark.slow
def test_two_workers_sweep_into_one_store_and_resume(tmp_path):
    probs = tmp_path / "p.jsonl"
    probs.write_text("".join(json.dumps(small(batch_size=b, kv_len=kv).to_dict()) + "\n"
                             for b in (1, 4) for kv in (64, 256)))
    db = tmp_path / "h.db"
    env = _sleeper_env(tmp_path)
    r = _sweep(["--devices", "cpu,cpu"], env, db, probs)
    assert r.returncode == 0, r.stderr[-2000:]
    assert re.search(r"cpu#0 .* \d+\.\d s each", r.stderr) and "cpu#1" in r.stderr   # a bar per device, its pace
    assert re.search(r"cpu#1: 0\.9\d+x|cpu#1: 1\.0\d+x", r.stdout) and "shares its environment" in r.stdout, r.stdout
    c = sqlite3.connect(db)
    assert [n for (n,) in c.execute("select device_name from environments")] == [c.execute(
        "select device_name from environments").fetchone()[0]]          # one environment
    assert c.execute("select count(*) from winners").fetchone()[0] == 4
    per = dict(p.split(" ")[0:2] for p in r.stdout.split("per device: ")[1].splitlines()[0].split(", "))
    assert sorted(per) == ["cpu#0", "cpu#1"] and sum(int(v) for v in per.values()) == 4
    # a rerun measures nothing, even where cpu#1 has since slowed down: nothing is left, so no calibration
    again = _sweep(["--devices", "cpu,cpu"], _sleeper_env(tmp_path, "cpu#1:2.0"), db, probs)
    assert again.returncode == 0 and "0 pipelines measured" in again.stdout, again.stdout
    assert "4 problems already measured" in again.stdout and "nothing left to measure" in again.stdout


@pytest.mark.slow
def test_a_slower_device_is_kept_apart_and_the_report_says_so(tmp_path):
    probs = tmp_path / "p.jsonl"
    probs.write_text("".join(json.dumps(small(batch_size=b).to_dict()) + "\n" for b in (1, 2)))
    db = tmp_path / "h.db"
    r = _sweep(["--devices", "cpu,cpu"], _sleeper_env(tmp_path, "cpu#1:2.0"), db, probs)
    assert r.returncode == 0, r.stderr[-2000:]
    assert re.search(r"cpu#1: (1\.[6-9]|2\.)\d*x the time of cpu#0 .* kept apart", r.stdout), r.stdout
    c = sqlite3.connect(db)
    names = {n for (n,) in c.execute("select device_name from environments")}
    assert any(n.endswith("[cpu#1]") for n in names) and len(names) == 2
    assert re.search(r"total\s.*\b4/4\b", r.stderr), r.stderr      # both environments' problems (it said 4/2)
    # each environment holds every problem: the kept-apart device swept the list on its own
    assert c.execute("select count(*) from winners").fetchone()[0] == 4
    # its rows hold its own times: 24 ms of sleep against 12 per problem (a busy CI core adds the same
    # copy overhead to both, so the difference is compared, not the ratio; and the fastest round's, since
    # a busy core can stretch the median round of cpu#0 by 8 ms, as one CI run did)
    times = {}
    for name, key, us in c.execute("select e.device_name, m.problem_key, m.min_us from measurements m join "
                                   "environments e on e.id = m.env_id where m.pipeline = 'sleeper[ms=12]'"):
        times.setdefault(key, {})[name.endswith("[cpu#1]")] = us
    assert len(times) == 2 and all(t[True] - t[False] > 6000 for t in times.values()), times
    # a rerun where the kept-apart environment lost a row (as a crash would leave it) calibrates and resumes it;
    # one more finds everything measured and times nothing
    c.execute("delete from measurements where rowid = (select m.rowid from measurements m join environments e "
              "on e.id = m.env_id where e.device_name like '%[cpu#1]' limit 1)")
    c.commit()
    again = _sweep(["--devices", "cpu,cpu"], _sleeper_env(tmp_path, "cpu#1:2.0"), db, probs)
    assert again.returncode == 0 and "kept apart" in again.stdout and "1 pipelines measured" in again.stdout, \
        again.stdout
    last = _sweep(["--devices", "cpu,cpu"], _sleeper_env(tmp_path, "cpu#1:2.0"), db, probs)
    assert "0 pipelines measured" in last.stdout and "nothing left to measure" in last.stdout, last.stdout
