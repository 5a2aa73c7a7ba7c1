"""tuner sweep --ray: shards of the problem list as Ray tasks holding one GPU each (Ray schedules
them: no scheduler of our own). Each task sweeps its shard on its worker into a SQLite file of its
own and returns the measurements as JSON lines (tuner/transfer.py); the caller merges each shard
into its database as soon as that task finishes, by environment. A shard lost with its worker loses
only that shard; rerunning measures only the problems the caller's database still lacks (a problem an
adaptive search screened pipelines out of is measured whole: a shard starts from an empty database).

Switchyard must be installed on every Ray node (pip install -e '.[cuda,ray]')."""
from __future__ import annotations

import socket
import sqlite3
import tempfile
from collections.abc import Callable
from pathlib import Path

from dispatcher.problem import AttentionProblem

from .fleet import largest_first
from .options import SweepOptions
from .sweep import ProblemOutcome, SweepReport


def _ray():
    try:
        import ray
    except ImportError as e:
        raise ValueError(f"--ray needs Ray ({e}); install the extra: pip install -e '.[ray]'") from None
    return ray


def measured_keys(db) -> dict[str, set[str]]:
    """{environment key: problem keys with measurements} of the caller's database: what shards skip."""
    from dispatcher.store import open_readonly
    conn = open_readonly(db)
    if conn is None:
        return {}
    try:
        # a problem an adaptive search screened pipelines out of is not done: a grid sweep measures them
        rows = conn.execute("select e.key, m.problem_key from measurements m join environments e on e.id = m.env_id "
                            "group by e.key, m.problem_key having sum(m.status = 'screened') = 0").fetchall()
    except sqlite3.DatabaseError:
        return {}
    finally:
        conn.close()
    out: dict[str, set[str]] = {}
    for key, pk in rows:
        out.setdefault(key, set()).add(pk)
    return out


def shard(problems: list, n: int) -> list[list]:
    """Round-robin over the largest-first order: every shard gets its share of the large problems."""
    order = [p for p, _ in largest_first([(p, [None]) for p in problems])]
    return [s for s in (order[i::n] for i in range(n)) if s]


def _worker_device(_=None):
    from dispatcher.device import describe
    return describe("auto")


def sweep_shard(problems: list[dict], timing: str | None, opts: SweepOptions, done: dict[str, set[str]]) -> dict:
    """Runs on a Ray worker: sweep these problems on its device; the measurements as JSON lines."""
    from dispatcher.resolve import default_timing_mode

    from .library import run_problems
    from .store import Store
    from .transfer import export_jsonl
    dev = _worker_device()
    mode = timing or default_timing_mode(dev)
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "shard.db"
        s = Store(db)
        key = s.db["environments"].get(s.environment(dev, mode))["key"]
        s.close()
        probs = [AttentionProblem.from_dict(d) for d in problems]
        todo = [p for p in probs if opts.retry_failed or p.key() not in done.get(key, set())]
        outcomes: list = []
        report, error = SweepReport(0), None
        try:
            if todo:
                report = run_problems(todo, dev, db, mode, opts, on_problem=outcomes.append, say=lambda m: None)
        except Exception as e:  # noqa: BLE001 (a worker that cannot start, say: what finished still lands)
            error = f"{type(e).__name__}: {e}"
        export_jsonl(db, Path(tmp) / "m.jsonl")
        text = (Path(tmp) / "m.jsonl").read_text()
    return {"jsonl": text, "device": dev.name, "host": socket.gethostname(), "skipped": len(probs) - len(todo),
            "outcomes": [(o.problem.to_dict(), o.winner, [r["status"] for r in o.rows]) for o in outcomes],
            "seconds": dict(report.seconds), "stopped_early": report.stopped_early,
            "error": error}


def ray_sweep(req, problems: list[AttentionProblem] | None, db, opts: SweepOptions, address: str | None,
              shards: int | None, on_shard: Callable[[int, int, str], None] | None = None,
              say: Callable[[str], None] = print) -> SweepReport:
    """Sweep over a Ray cluster (`address`; None starts a local instance) into `db`."""
    ray = _ray()
    if shards is not None and shards < 1:
        raise ValueError(f"--shards {shards} must be at least 1")
    started = not ray.is_initialized()
    if started:
        ray.init(address=address, include_dashboard=False, log_to_driver=False)
    try:
        return _run(ray, req, problems, db, opts, shards, on_shard or (lambda *a: None), say)
    finally:
        if started:
            ray.shutdown()


def _run(ray, req, problems, db, opts, shards, on_shard, say) -> SweepReport:
    from .library import sweep_problems
    from .transfer import import_jsonl
    gpus = int(ray.cluster_resources().get("GPU", 0))
    workers = gpus or max(1, int(ray.cluster_resources().get("CPU", 1)))
    need = dict(num_gpus=1, num_cpus=1) if gpus else dict(num_cpus=1)
    if problems is None:                     # the grid depends on the device: ask a worker what it holds
        problems = sweep_problems(req, ray.get(ray.remote(**need)(_worker_device).remote()))
    parts = shard(problems, shards or 2 * workers)
    say(f"ray: {len(problems)} problems in {len(parts)} shards over {workers} "
        f"{'GPU' if gpus else 'CPU'} worker{'s' if workers != 1 else ''}")
    task = ray.remote(max_retries=1, **need)(sweep_shard)
    done_before = measured_keys(db)
    refs = {task.remote([p.to_dict() for p in part], req.timing, opts, done_before): i for i, part in enumerate(parts)}
    report, pending, finished = SweepReport(env_id=0), list(refs), 0
    while pending:
        ready, pending = ray.wait(pending, num_returns=1)
        i = refs[ready[0]]
        finished += 1
        try:
            out = ray.get(ready[0])
        except Exception as e:  # noqa: BLE001 (one lost shard; the others still land)
            report.notes.append(f"shard {i} failed ({type(e).__name__}: {str(e)[:300]}); rerun to measure it")
            report.unfinished = f"shard {i} of {len(parts)} failed"
            on_shard(finished, len(parts), f"shard {i} failed")
            continue
        _merge(out, db, import_jsonl, report)
        on_shard(finished, len(parts), f"shard {i}: {len(out['outcomes'])} problems on {out['device']} ({out['host']})")
    return report


def _merge(out: dict, db, import_jsonl, report: SweepReport) -> None:
    if out["jsonl"]:
        with tempfile.NamedTemporaryFile("w", suffix=".jsonl", delete=False) as f:
            f.write(out["jsonl"])
        try:
            import_jsonl(db, Path(f.name), keep_newer=False)     # this sweep's rows: a worker's clock may lag
        finally:
            Path(f.name).unlink()
    for pd, winner, statuses in out["outcomes"]:
        rows = [{"status": s} for s in statuses]
        report.outcomes.append(ProblemOutcome(AttentionProblem.from_dict(pd), rows, winner))
    report.outcomes += [ProblemOutcome(None, resumed=True) for _ in range(out["skipped"])]
    report.seconds.update(out["seconds"])
    report.by_device[f"{out['device']} ({out['host']})"] += len(out["outcomes"])
    report.stopped_early |= out["stopped_early"]
    if out.get("error"):
        n = len(out["outcomes"])
        report.notes.append(f"a shard on {out['device']} ({out['host']}) stopped after {n} problem{'s' * (n != 1)} "
                            f"({out['error'][:300]}); rerun to measure the rest")
        report.unfinished = f"a shard on {out['device']} ({out['host']}) stopped: {out['error'][:300]}"
