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
from types import SimpleNamespace

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
    (["--trials", "5"], "--trials has no effect here: it goes with --tactics optuna"),
    # these were found once the sweep had begun: a database with nothing measured was left behind
    (["--max-relerr", "0"], "--max-relerr 0.0 is not a usable relative-error budget"),
    (["--max-minutes", "0", "--max-relerr", "-1"], "--max-relerr -1.0 is not a usable relative-error budget"),
    (["--timing", "eager"], "timing mode 'eager' needs a CUDA device"),
])
def test_a_sweep_flag_that_would_hang_or_do_nothing_is_refused(tmp_path, flags, says):
    r = tuner("sweep", "--device", "cpu", "--quick", "--db", str(tmp_path / "h.db"), *flags)
    assert r.returncode == 2 and says in r.stderr and "Traceback" not in r.stderr
    assert not (tmp_path / "h.db").exists()                 # refused before anything was written


def test_db_none_names_no_database_to_write(tmp_path):
    export = tmp_path / "x.jsonl"
    export.write_text("")
    for args in (["sweep", "--device", "cpu", "--quick"], ["import", str(export)]):
        r = tuner(*args, "--db", "none")
        assert r.returncode == 2 and f"--db none decides by the built-in rule alone (tuner decide); tuner {args[0]} " \
            "writes into a database: name its file" in r.stderr, r.stderr
    assert not (ROOT / "none").exists()             # a sweep wrote a file named none, which decide then ignored


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
    said = int(re.search(r"(\d+) problems? measured and stored before the interrupt", stderr).group(1))
    assert said in (kept - 1, kept)         # the last may be stored an instant before the bar counts it
    assert "Traceback" not in stderr and "KeyboardInterrupt" not in stderr      # nor one from the worker
    again = tuner(*args[3:])
    assert again.returncode == 0 and f"{kept} problems already measured" in again.stdout
    # the summary's winners table counts the resumed problems' stored winners too, not only the new ones
    won = sum(int(n) for n in re.findall(r"\((\d+)\)", again.stdout.split("winners (problems won)")[1]))
    total = int(re.search(r"(\d+) problems, ", again.stdout).group(1))
    assert total > kept and won == total


def test_a_logged_sweep_says_each_problem_and_stops_on_sigterm_as_on_ctrl_c(tmp_path):
    # into a file (nohup, CI) the bar drew only at the end: 0 bytes after 30 s; `kill` or `timeout` left a traceback
    db, log = tmp_path / "h.db", tmp_path / "sweep.log"
    args = [sys.executable, "-m", "tuner", "sweep", "--device", "cpu", "--quick", "--phases", "decode", "--db", str(db)]
    with open(log, "w") as out:
        proc = subprocess.Popen(args, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        end = time.time() + 240
        while _rows(db) < 2 and time.time() < end and proc.poll() is None:
            time.sleep(0.2)
        text = log.read_text()
        assert re.search(r"^1/\d+ eta \S+ decode b=\d+ q=1 kv=\d+ bf16/bf16 -> torch-sdpa", text, re.M), text
        proc.send_signal(signal.SIGTERM)             # the process alone, as kill and timeout send it
        proc.wait(timeout=120)
    text = log.read_text()
    assert proc.returncode == 130 and "interrupted: what finished is stored; rerun the same command to resume" in text
    assert "Traceback" not in text and "BrokenPipeError" not in text, text


def test_inaccurate_pipelines_are_named_and_measured_again_with_retry_failed(tmp_path):
    f = tmp_path / "p.jsonl"
    f.write_text(json.dumps(small().to_dict()) + "\n")
    db = str(tmp_path / "h.db")
    strict = tuner("sweep", "--problems", str(f), "--device", "cpu", "--db", db, "--max-relerr", "1e-12")
    assert strict.returncode == 0 and "(0 ok, 2 inaccurate, 0 failed" in strict.stdout
    again = tuner("sweep", "--problems", str(f), "--device", "cpu", "--db", db)
    assert "1 problem already measured" in again.stdout
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


def test_a_prefill_line_without_q_len_is_refused_naming_the_line(tmp_path):
    f = tmp_path / "p.jsonl"
    decode = {"phase": "decode", "num_qo_heads": 8, "num_kv_heads": 1, "batch_size": 2, "kv_len": 64}
    f.write_text(json.dumps(decode) + "\n" + json.dumps({**decode, "phase": "prefill", "kv_len": 512}) + "\n")
    r = tuner("sweep", "--device", "cpu", "--problems", str(f), "--db", str(tmp_path / "h.db"))
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert f"line 2 of {f}: q_len is required for prefill" in " ".join(r.stderr.split())
    assert not (tmp_path / "h.db").exists()
    f.write_text(json.dumps(decode) + "\n" + json.dumps({**decode, "phase": "prefill", "kv_len": 512, "q_len": 1}))
    assert tuner("decide", "--input", str(f), "--db", str(SHIPPED)).returncode == 0    # said outright, it runs


def test_a_worker_that_cannot_start_stops_the_sweep_and_marks_nothing_failed(tmp_path):
    site = tmp_path / "site"
    site.mkdir()        # every spawned worker dies at start-up, as on a broken install or an unusable GPU
    (site / "sitecustomize.py").write_text(
        "import sys\nif '--multiprocessing-fork' in sys.orig_argv:\n    sys.exit('injected: cannot start')\n")
    db, probs = tmp_path / "h.db", tmp_path / "p.jsonl"
    probs.write_text("".join(json.dumps(small(batch_size=b).to_dict()) + "\n" for b in (1, 2)))
    env = {**os.environ, "PYTHONPATH": f"{site}:{ROOT}"}
    r = tuner("sweep", "--device", "cpu", "--problems", str(probs), "--db", str(db), env=env)
    said = " ".join(r.stderr.split())
    assert r.returncode == 2 and "Traceback (most recent call last)" not in said.split("injected")[-1]
    assert "the measuring worker for cpu#0 exited with code 1 before it was ready, 2 times in a row" in said, said
    assert "injected: cannot start" in said                         # the worker's own reason, as it printed it
    with sqlite3.connect(db) as c:                                   # not one problem's pipelines marked failed
        assert c.execute("select count(*) from measurements").fetchone()[0] == 0
    ok = tuner("sweep", "--device", "cpu", "--problems", str(probs), "--db", str(db))
    assert ok.returncode == 0 and "2 problems" in ok.stdout
    assert "0 problems already measured" in ok.stdout       # fixed: all of it


def test_plots_without_matplotlib_say_what_to_install(tmp_path):
    hidden = tmp_path / "hidden" / "matplotlib"
    hidden.mkdir(parents=True)          # an install without the [report] extra: importing matplotlib fails
    (hidden / "__init__.py").write_text("raise ImportError('No module named matplotlib')\n")
    env = {**os.environ, "PYTHONPATH": f"{hidden.parent}:{ROOT}"}
    for args in (["report", "--out", str(tmp_path / "r")], ["evaluate", "--plot", str(tmp_path / "e")]):
        r = tuner(*args, "--db", str(SHIPPED), "--device", "NVIDIA H200", env=env)
        assert r.returncode == 2 and "needs matplotlib: pip install 'matplotlib>=3.8'" in r.stderr, r.stderr
        assert "Traceback" not in r.stderr


def test_a_devices_pace_stops_when_it_stops_measuring():
    from rich.progress import Progress

    from tuner.cli.sweep import MeasuredEta
    now = [0.0]
    bar = Progress(MeasuredEta(), get_time=lambda: now[0])
    task = bar.add_task("cpu#1", total=None, start=False, each=0.0)
    now[0] = 600.0                                  # the JIT build and calibration: not this device's pace
    bar.start_task(task)
    now[0] = 612.0
    bar.update(task, advance=4, each=bar.tasks[task].elapsed)
    assert str(MeasuredEta().render(bar.tasks[task])) == "  3.0 s each"
    now[0] = 1200.0                                 # it stopped (its worker died): the pace stays
    assert str(MeasuredEta().render(bar.tasks[task])) == "  3.0 s each"


def test_the_eta_after_a_resume_follows_the_problems_measured_now():

    from rich.progress import Progress

    from api.jobs import Job
    from tuner.cli.sweep import MeasuredEta, _advance
    now = [0.0]
    bar = Progress(MeasuredEta(), get_time=lambda: now[0])
    task = bar.add_task("sweep", total=100, now="")
    for _ in range(50):                             # half were measured before: done at once
        _advance(bar, task, SimpleNamespace(resumed=True))
    now[0] = 100.0                                  # the JIT build, then the first problem measured now
    _advance(bar, task, SimpleNamespace(resumed=False))
    assert str(MeasuredEta().render(bar.tasks[task])) == "eta -:--:--"     # no rate from one problem
    for _ in range(10):                             # then 10 in a minute: 39 left take 234 s
        now[0] += 6.0
        _advance(bar, task, SimpleNamespace(resumed=False))
    assert str(MeasuredEta().render(bar.tasks[task])) == "eta 0:03:54"
    job = Job(id="j", kind="problems", problems=[small()] * 100, state="running", done=61, resumed=50,
              started_at=time.time() - 160, first=(time.time() - 60, 1))
    assert 229 < job.public()["eta_s"] < 239       # the daemon's job too (it said 42 s: 160 s / 61 done x 39)


def test_a_failing_misses_job_is_not_queued_again_at_once(swept_db, tmp_path, monkeypatch):
    import tuner.library
    from tuner.isolation import WorkerStartError

    def cannot_start(*a, **k):
        raise WorkerStartError("the measuring worker for cpu#0 exited with code 1 before it was ready, 2 times")
    monkeypatch.setattr(tuner.library, "run_problems", cannot_start)
    db = tmp_path / "h.db"
    shutil.copy(swept_db[0], db)
    with in_process(db, tune_misses="anyone", idle_s=0.1, refresh_s=0.1) as c:
        miss = small(head_dim=48, batch_size=3, kv_len=100)
        for _ in range(3):
            c.get("/v1/decision", params=miss.to_dict())
        end = time.time() + 30
        while not c.get("/v1/sweeps").json()["sweeps"] and time.time() < end:
            time.sleep(0.1)
        time.sleep(1.5)                      # 15 idle periods: it used to queue the same misses again each time
        (job,) = c.get("/v1/sweeps").json()["sweeps"]
        assert job["kind"] == "misses" and job["state"] == "failed" and "before it was ready" in job["error"]
        health = c.get("/healthz")                  # an operator sees why nothing is tuned, and for how long
        paused = health.json()["miss_tuning"]
        assert health.status_code == 200 and 590 < paused["paused_for_s"] <= 600
        assert paused["failed_in_a_row"] == 1 and "before it was ready" in paused["last_error"]


def test_miss_tuning_backs_off_longer_each_failure_until_a_job_measures(swept_db, tmp_path, monkeypatch):
    import api.jobs
    import tuner.library
    from api.jobs import MISSES_BACKOFF_MAX_S, JobManager
    from dispatcher import StoreError
    from dispatcher.device import describe
    from tuner.isolation import WorkerStartError

    works, resumed, bad_problems, locked = [False], [False], [False], [False]

    def run(*a, on_problem, **k):
        if bad_problems[0]:
            raise RuntimeError("CUDA error: an illegal memory access was encountered")   # these problems' fault
        if locked[0]:
            raise StoreError("h.db: database is locked")                               # the host's
        if not works[0]:
            raise WorkerStartError("the measuring worker for cpu#0 exited with code 1 before it was ready, 2 times")
        on_problem(SimpleNamespace(resumed=resumed[0], rows=[]))
    monkeypatch.setattr(tuner.library, "run_problems", run)
    db = tmp_path / "h.db"
    shutil.copy(swept_db[0], db)
    jobs = JobManager(db, describe("cpu"), tune_misses=True, idle_s=600)   # no misses job of its own

    def finish(kind):
        job = jobs.submit(kind, [small()])
        end = time.time() + 30
        while job.finished_at is None and time.time() < end:
            time.sleep(0.02)
        assert job.finished_at is not None, job
        return jobs.miss_tuning()
    try:
        pauses = [finish("misses")["paused_for_s"] for _ in range(3)]
        assert [round(p / 600) for p in pauses] == [1, 2, 4]       # 10, 20, 40 minutes
        bad_problems[0] = True                      # a job whose own misses fail: the next job tunes others
        said = finish("misses")
        assert round(said["paused_for_s"] / 600) == 1 and said["failed_in_a_row"] == 4
        bad_problems[0] = False                     # the host did its part: its failures count afresh
        assert round(finish("misses")["paused_for_s"] / 600) == 1
        locked[0] = True                            # a database that cannot be written is the host's too
        assert round(finish("misses")["paused_for_s"] / 600) == 2
        locked[0] = False
        works[0] = resumed[0] = True
        assert finish("problems")["failed_in_a_row"] == 6        # done, but nothing measured: no worker started
        works[0], resumed[0] = False, False
        monkeypatch.setattr(api.jobs, "MISSES_BACKOFF_S", MISSES_BACKOFF_MAX_S)
        assert MISSES_BACKOFF_MAX_S - 60 < finish("misses")["paused_for_s"] <= MISSES_BACKOFF_MAX_S   # the cap
        works[0] = True
        assert finish("problems") is None           # a job that measured: the worker starts, tuning resumes
        assert jobs.miss_pause.failed_in_a_row == 0
    finally:
        jobs.stop()


def _cannot_start(index):
    from tuner.isolation import WorkerStartError
    return WorkerStartError(f"the measuring worker for cpu#{index} exited with code 1 before it was ready, 2 times")


def test_devices_a_gpu_that_cannot_start_leaves_its_problems_to_the_others(tmp_path, monkeypatch):
    import threading

    from tuner import fleet, library
    from tuner.isolation import IsolatedMeasurer
    real, took, done0 = IsolatedMeasurer.measure, threading.Event(), threading.Event()
    devices, db = fleet.parse_devices("cpu,cpu"), tmp_path / "h.db"

    def broken_from_the_start(self, *a, **k):       # cpu#1 fails in calibration, before any queue
        if self.device.index == 1:
            raise _cannot_start(1)
        return real(self, *a, **k)
    monkeypatch.setattr(IsolatedMeasurer, "measure", broken_from_the_start)
    report = library.run_on_devices([small(batch_size=b) for b in (1, 2, 3)], devices, db, "wall")
    assert len(report.outcomes) == 3 and all(o.winner for o in report.outcomes) and report.unfinished is None
    assert any(n.startswith("cpu#1 stopped: WorkerStartError") for n in report.notes)

    def broken_last(self, *a, **k):                 # cpu#1 takes the last problem and fails after cpu#0 is done
        if self.device.index == 1:
            took.set()
            done0.wait(60)
            time.sleep(1.0)                          # cpu#0 asks for more meanwhile: the queue is empty then
            raise _cannot_start(1)
        took.wait(60)
        try:
            return real(self, *a, **k)
        finally:
            done0.set()
    monkeypatch.setattr(IsolatedMeasurer, "measure", broken_last)
    monkeypatch.setattr(fleet, "calibration_set", lambda items: [])    # straight to the queue
    report = library.run_on_devices([small(batch_size=b) for b in (4, 5)], devices, db, "wall")
    assert len(report.outcomes) == 2 and all(o.winner for o in report.outcomes), report.notes
    assert report.by_device == {"cpu#0": 2} and report.unfinished is None

    def all_broken(self, *a, **k):
        raise _cannot_start(self.device.index)
    monkeypatch.setattr(IsolatedMeasurer, "measure", all_broken)
    report = library.run_on_devices([small(batch_size=6)], devices, db, "wall")
    assert report.unfinished.startswith("1 problem left with no device to measure them")   # not --max-minutes


def test_a_ray_shard_whose_worker_stops_still_returns_what_it_measured(tmp_path, monkeypatch):
    from tuner import library
    from tuner.isolation import WorkerStartError
    from tuner.options import SweepOptions
    from tuner.ray_sweep import _merge, sweep_shard
    from tuner.sweep import SweepReport
    from tuner.transfer import import_jsonl
    real = library.run_problems

    def first_then_stop(todo, dev, db, mode, opts, on_problem=None, say=print):
        real(todo[:1], dev, db, mode, opts, on_problem=on_problem, say=say)
        raise WorkerStartError("the measuring worker for cpu#0 exited with code 1 before it was ready, 2 times")
    monkeypatch.setattr(library, "run_problems", first_then_stop)
    out = sweep_shard([small(batch_size=b).to_dict() for b in (1, 2)], None, SweepOptions(isolate=False), {})
    assert out["error"].startswith("WorkerStartError") and len(out["outcomes"]) == 1      # returned, not raised
    db, report = tmp_path / "h.db", SweepReport(0)
    _merge(out, db, import_jsonl, report)
    with sqlite3.connect(db) as c:                   # the finished problem's rows land in the caller's database
        assert {b for (b,) in c.execute("select batch_size from measurements")} == {1}
    assert any("stopped after 1 problem (WorkerStartError" in n and "rerun to measure the rest" in n
               for n in report.notes)
    import typer

    from tuner.cli.sweep import _print_summary
    with pytest.raises(typer.Exit) as stopped:        # the summary is printed, then the exit says it is unfinished
        _print_summary(report)
    assert stopped.value.exit_code == 2 and report.unfinished.startswith("a shard on")


def test_a_worker_that_cannot_even_be_spawned_is_a_start_error_not_failed_pipelines(monkeypatch):
    from dispatcher.device import describe
    from tuner.isolation import IsolatedMeasurer, WorkerStartError
    from tuner.options import SweepOptions
    m = IsolatedMeasurer(describe("cpu"), "wall")

    def no_fds():
        raise OSError(24, "Too many open files")
    monkeypatch.setattr(m.ctx, "Pipe", no_fds)
    with pytest.raises(WorkerStartError, match=r"cpu#0 could not be started: \[Errno 24\] Too many open files"):
        m.measure(small(), [None], SweepOptions())      # a pipeline to measure: the worker is started for it


def test_a_sweep_into_the_shipped_database_says_so(tmp_path, monkeypatch):
    from tuner.cli.sweep import shipped_note
    monkeypatch.delenv("SWITCHYARD_DB", raising=False)
    monkeypatch.chdir(ROOT)                         # the README's main job: no --db, run in the checkout
    assert "writing into the repository's heuristics.db" in shipped_note(None)
    assert shipped_note(tmp_path / "h.db") is None
