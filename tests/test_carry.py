"""benchmarks/carry.sh: what a device call's carry leaves out, and that it all comes back."""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ASIDE = [".gpu/vllm.txz", ".gpu/heuristics.db.xz", ".gpu/wheels/alembic-1.0-py3-none-any.whl",
         ".gpu/wheels/sqlalchemy-2.0-cp312-cp312-linux_x86_64.whl", ".gpu/wheels/mako-1.0-py3-none-any.whl"]
KEPT = [".gpu/flashinfer.txz", ".gpu/wheels/optuna-5.1.0-py3-none-any.whl", "dispatcher/x.py"]


def checkout(tmp: Path) -> Path:
    repo = tmp / "repo"
    (repo / "benchmarks").mkdir(parents=True)
    shutil.copy(ROOT / "benchmarks" / "carry.sh", repo / "benchmarks" / "carry.sh")
    for i, name in enumerate(["heuristics.db", *ASIDE, *KEPT]):
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        (repo / name).write_bytes(bytes([i]) * 1000 * (i + 1))
    (repo / ".gitignore").write_text(".gpu/\n")
    for cmd in (["init", "-q"], ["add", "-A"], ["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "x"]):
        subprocess.run(["git", *cmd], cwd=repo, check=True)
    return repo


def run_carry(repo: Path, away: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", "benchmarks/carry.sh", *args], cwd=repo, capture_output=True, text=True,
                          env={"PATH": "/usr/bin:/bin", "CARRY_AWAY": str(away)})


def carry(repo: Path, away: Path, *args: str) -> str:
    done = run_carry(repo, away, *args)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def carried_bytes(out: str) -> int:
    return int(out.strip().splitlines()[-1].split("(")[1].split(" ")[0])


def test_slim_leaves_out_what_no_sweep_reads_and_back_restores_it(tmp_path):
    repo, away = checkout(tmp_path), tmp_path / "away"
    before = {p: (repo / p).read_bytes() for p in ["heuristics.db", *ASIDE, *KEPT]}
    whole = carried_bytes(carry(repo, away, "size"))
    slim = carried_bytes(carry(repo, away, "slim"))
    assert not any((repo / p).exists() for p in ["heuristics.db", *ASIDE])
    assert all((repo / p).exists() for p in KEPT)
    assert whole - slim == sum(len(before[p]) for p in ["heuristics.db", *ASIDE])
    carry(repo, away, "back")
    assert {p: (repo / p).read_bytes() for p in before} == before
    assert not away.exists()
    status = subprocess.run(["git", "status", "--porcelain"], cwd=repo, capture_output=True, text=True).stdout
    assert status == ""


def test_slim_for_the_vllm_test_keeps_its_files(tmp_path):
    repo, away = checkout(tmp_path), tmp_path / "away"
    carry(repo, away, "slim", "--vllm")
    assert (repo / ".gpu/vllm.txz").exists() and (repo / ".gpu/heuristics.db.xz").exists()
    assert not (repo / "heuristics.db").exists()
    carry(repo, away, "back")
    assert (repo / "heuristics.db").exists()


def test_a_second_slim_before_back_is_refused(tmp_path):
    repo, away = checkout(tmp_path), tmp_path / "away"
    carry(repo, away, "slim")
    done = run_carry(repo, away, "slim")
    assert done.returncode == 1 and "back" in done.stdout     # else the first set-aside files could be mixed up


def test_slim_with_sets_keeps_only_the_named_problem_sets_of_the_results(tmp_path):
    repo, away = checkout(tmp_path), tmp_path / "away"
    results = {"benchmarks/results/a/set.jsonl": b"{}\n", "benchmarks/results/a/run.db.xz": b"x" * 5000,
               "benchmarks/results/b/other.jsonl": b"{}\n{}\n", "benchmarks/results/b/README.md": b"# b\n"}
    for name, data in results.items():
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        (repo / name).write_bytes(data)
    subprocess.run(["git", "add", "-A"], cwd=repo, check=True)
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "r"], cwd=repo, check=True)
    out = carry(repo, away, "slim", "--sets", "./benchmarks/results/a/set.jsonl", str(repo / "benchmarks/results/b"
                                                                                         "/other.jsonl"), "--vllm")
    kept = ["benchmarks/results/a/set.jsonl", "benchmarks/results/b/other.jsonl"]      # however they were named
    assert [n for n in results if (repo / n).exists()] == kept and (repo / ".gpu/vllm.txz").exists()
    assert "2 files of benchmarks/results" in out and all((repo / p).exists() for p in KEPT)
    carry(repo, away, "back")
    assert {n: (repo / n).read_bytes() for n in results} == results


def test_slim_with_a_missing_set_names_it_and_sets_nothing_aside(tmp_path):
    repo, away = checkout(tmp_path), tmp_path / "away"
    for args in (["benchmarks/results/nope.jsonl"], []):
        done = run_carry(repo, away, "slim", "--sets", *args)
        assert done.returncode == 2 and (args[0] if args else "name the problem sets") in done.stdout
        assert (repo / "heuristics.db").exists() and not away.exists()
