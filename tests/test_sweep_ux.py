"""What a user of `tuner sweep` and the daemon sees when things go wrong: flags that would do nothing or
never stop, Ctrl-C, pipelines that failed before, a device the database does not hold, a moved database."""
import json
import os
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import time

import pytest

from dispatcher.predictor_config import PredictorConfig
from tests.conftest import ROOT, in_process, small

SHIPPED = ROOT / "heuristics.db"


def tuner(*args, **kw):
    return subprocess.run([sys.executable, "-m", "tuner", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=600, **kw)


@pytest.mark.parametrize("flags, says", [
    (["--candidate-timeout", "0"], "--candidate-timeout 0.0 is not a number of seconds > 0"),
    (["--max-minutes", "nan"], "--max-minutes nan is not a number of minutes >= 0"),
    (["--timing", "bogus"], "--timing 'bogus' is not graph, eager or wall"),
    (["--shards", "2"], "--shards has no effect here: it goes with --ray"),
    (["--budget", "0.5"], "--budget has no effect here: it goes with --search adaptive"),
])
def test_a_sweep_flag_that_would_hang_or_do_nothing_is_refused(tmp_path, flags, says):
    r = tuner("sweep", "--device", "cpu", "--quick", "--db", str(tmp_path / "h.db"), *flags)
    assert r.returncode == 2 and says in r.stderr and "Traceback" not in r.stderr
    assert not (tmp_path / "h.db").exists()                 # refused before anything was written


def _rows(db) -> int:
    try:
        with sqlite3.connect(db) as c:
            return c.execute("select count(*) from winners").fetchone()[0]
    except sqlite3.Error:
        return 0


def test_ctrl_c_keeps_what_finished_says_so_and_a_rerun_resumes(tmp_path):
    db = tmp_path / "h.db"
    args = [sys.executable, "-m", "tuner", "sweep", "--device", "cpu", "--quick", "--phases", "decode", "--db", str(db)]
    proc = subprocess.Popen(args, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)           # its own group, as a terminal's Ctrl-C reaches it
    end = time.time() + 240
    while _rows(db) < 2 and time.time() < end and proc.poll() is None:
        time.sleep(0.2)
    os.killpg(proc.pid, signal.SIGINT)
    _, stderr = proc.communicate(timeout=120)
    kept = _rows(db)
    assert proc.returncode == 130 and kept >= 2
    assert "interrupted: what finished is stored; rerun the same command to resume" in stderr
    assert "Traceback" not in stderr and "KeyboardInterrupt" not in stderr      # nor one from the worker
    again = tuner(*args[3:])
    assert again.returncode == 0 and f"{kept} already measured" in again.stdout
    # the summary's winners table counts the resumed problems' stored winners too, not only the new ones
    won = sum(int(n) for n in re.findall(r"\((\d+)\)", again.stdout.split("winners (problems won)")[1]))
    total = int(re.search(r"(\d+) problems, ", again.stdout).group(1))
    assert total > kept and won == total


def test_inaccurate_pipelines_are_named_and_measured_again_with_retry_failed(tmp_path):
    f = tmp_path / "p.jsonl"
    f.write_text(json.dumps(small().to_dict()) + "\n")
    db = str(tmp_path / "h.db")
    strict = tuner("sweep", "--problems", str(f), "--device", "cpu", "--db", db, "--max-relerr", "1e-12")
    assert strict.returncode == 0 and "(0 ok, 2 inaccurate, 0 failed" in strict.stdout
    again = tuner("sweep", "--problems", str(f), "--device", "cpu", "--db", db)
    assert "1 already measured" in again.stdout
    assert "were not measured again; rerun with --retry-failed to measure them" in again.stdout
    retried = tuner("sweep", "--problems", str(f), "--device", "cpu", "--db", db, "--retry-failed")
    assert retried.returncode == 0 and "2 pipelines measured (2 ok, 0 inaccurate" in retried.stdout
    with sqlite3.connect(db) as c:
        assert c.execute("select count(*) from measurements where status = 'inaccurate'").fetchone()[0] == 0


def test_a_local_device_the_database_never_measured_names_the_ones_it_holds():
    for cmd in (["report"], ["evaluate"]):
        r = tuner(*cmd, "--db", str(SHIPPED), "--device", "cpu")
        assert r.returncode == 2 and "it holds NVIDIA H200: pass --device 'NVIDIA H200'" in r.stderr


def test_a_predictor_config_of_no_neighbours_is_refused_by_name():
    with pytest.raises(ValueError, match="k_nearest=0 is under 1: a plane needs at least one measured point"):
        PredictorConfig.from_dict({"k_nearest": 0})


def test_healthz_says_degraded_when_the_database_is_moved_away(swept_db, tmp_path):
    db = tmp_path / "d.db"
    shutil.copy(swept_db[0], db)
    with in_process(db) as c:
        assert c.get("/healthz").json()["status"] == "ok"
        assert c.get("/v1/environments").json()["db"] == "d.db"             # no host path over HTTP
        db.rename(tmp_path / "d.db.bak")
        r = c.get("/healthz")
        assert r.status_code == 503 and "d.db is gone (moved or deleted while serving)" in r.json()["reason"]
        (tmp_path / "d.db.bak").rename(db)
        assert c.get("/healthz").status_code == 200
