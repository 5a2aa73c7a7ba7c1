"""tuner sweep: on this host, on several GPUs (--devices) or over Ray (--ray)."""
from __future__ import annotations

import signal
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Annotated, Optional

import typer
from rich.markup import escape
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    ProgressColumn,
    Task,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
)
from rich.table import Column
from rich.table import Table as RichTable
from rich.text import Text

from dispatcher.policy import checked_budget

from .. import library
from ..clock import time_left
from ..options import SweepOptions
from ..problem_files import read_problems
from ..search.screen import ScreenConfig, checked_screen
from ..timing.base import MODES
from .app import Db, LocalDev, app, csv, err, friendly, given_flags, out, written_db

GRID_FLAGS = ("model", "tp", "phases", "kv_dtypes", "out_dtypes", "page_sizes", "quick", "full", "dense", "mixed",
              "tiles")


@app.command()
@friendly
def sweep(
    ctx: typer.Context,
    model: Annotated[str, typer.Option(help="model preset: llama4-scout, llama-3.1-8b, llama-3.3-70b, qwen3-32b, "
                                            "gpt-oss-120b")] = "llama4-scout",
    tp: Annotated[Optional[str], typer.Option(help="tensor-parallel sizes, e.g. 1,4 (default: the preset's on a GPU, "
                                                   "1 on the CPU)")] = None,
    phases: Annotated[str, typer.Option(help="decode,prefill")] = "decode,prefill",
    kv_dtypes: Annotated[str, typer.Option(help="KV-cache dtypes: bf16,fp16,fp8")] = "bf16,fp8",
    out_dtypes: Annotated[str, typer.Option(help="output dtypes: bf16,fp16,fp8")] = "bf16,fp8",
    page_sizes: Annotated[Optional[str], typer.Option(help="tokens per KV page (default 16,32 on a GPU, 16 on the "
                                                           "CPU)")] = None,
    device: LocalDev = "auto",
    db: Db = None,
    quick: Annotated[bool, typer.Option("--quick", help="a small grid (the default on the CPU)")] = False,
    full: Annotated[bool, typer.Option("--full", help="the full grid (the default on a GPU)")] = False,
    dense: Annotated[bool, typer.Option("--dense", help="the full grid with the half-octave sizes between (3.4x "
                                                        "the decode points: for --search adaptive)")] = False,
    mixed: Annotated[bool, typer.Option("--mixed", help="the full grid with decode's skew axis for FP8 KV: batches "
                                                        "with one request 2-32x the mean (3.3x an FP8 "
                                                        "configuration's decode points: for --search adaptive, "
                                                        "whose table then serves uniform batches worse than a "
                                                        "--full sweep's: docs/mixed-batches.md)")] = False,
    tiles: Annotated[bool, typer.Option(help="also the sizes where kernels change pace with this GPU: decode "
                                             "within and just past one wave of its SMs at short KV, prefill "
                                             "queries just past multiples of 128 rows (tuner/tiles.py; "
                                             "llama4-scout: 1024 more problems a page size; with --search "
                                             "adaptive they join the points it picks from)")] = False,
    timing: Annotated[Optional[str], typer.Option(help="graph | eager on CUDA (default graph); the CPU uses "
                                                       "wall")] = None,
    max_relerr: Annotated[Optional[float], typer.Option(help="accuracy budget for every pipeline (default: per "
                                                             "dtype)")] = None,
    retry_failed: Annotated[bool, typer.Option(help="measure again pipelines that failed or were inaccurate "
                                                    "before (e.g. after fixing a driver or changing "
                                                    "--max-relerr)")] = False,
    max_minutes: Annotated[Optional[float], typer.Option(help="start no new problem after this long; rerun to "
                                                              "resume")] = None,
    isolate: Annotated[bool, typer.Option(help="run pipelines in a worker process: a crash or hang fails one "
                                               "pipeline, not the sweep")] = True,
    candidate_timeout: Annotated[float, typer.Option(help="seconds without progress after which a pipeline counts as "
                                                          "hung")] = 120.0,
    problems: Annotated[Optional[str], typer.Option("--problems", help="JSON lines of problems to sweep instead of a "
                                                                       "model's grid")] = None,
    tactics: Annotated[str, typer.Option(help="grid: time every declared tactic; default: the kernels' own "
                                              "only (the first that takes a mask where the problem needs one); "
                                              "optuna: search each kernel's tune space per problem")] = "grid",
    trials: Annotated[int, typer.Option(help="with --tactics optuna: trials per problem and kernel pipeline")] = 16,
    search: Annotated[str, typer.Option(help="grid: every grid point; adaptive: a coarse subset, then refine where "
                                             "winners change or are within noise")] = "grid",
    budget: Annotated[float, typer.Option(help="with --search adaptive: the fraction of the grid's points to measure "
                                               "(shared between configurations, the small ones getting a larger "
                                               "share)")] = 1 / 3,
    screen: Annotated[float, typer.Option(help="with --search adaptive: a pipeline this many times slower than the "
                                               "fastest at the 4 nearest measured shapes is not measured (0: measure "
                                               "every pipeline)")] = ScreenConfig.slower,
    devices: Annotated[Optional[str], typer.Option(help="sweep on several devices of this host: all, or a list such "
                                                        "as 0,1 (cpu,cpu: CPU workers); one worker process per "
                                                        "device")] = None,
    ray: Annotated[Optional[str], typer.Option(help="send shards to Ray workers holding one GPU each: a cluster "
                                                    "address, or 'local' (also: --ray alone) to start a local Ray "
                                                    "instance")] = None,
    shards: Annotated[Optional[int], typer.Option(help="with --ray: how many shards (default: two per worker)")] = None,
):
    """Measure every eligible pipeline per problem size on this host and store them (resumes).

    Example: tuner sweep --model llama4-scout --device cuda
    """
    if quick + full + dense + mixed > 1:
        raise typer.BadParameter("give one of --quick, --full, --dense, --mixed")
    if search not in ("grid", "adaptive"):
        raise typer.BadParameter(f"--search {search!r} is not grid or adaptive")
    if not 0 < budget <= 1:
        raise typer.BadParameter(f"--budget {budget} is out of range; use a fraction in (0, 1], e.g. 0.33")
    checked_screen(screen, "--screen")
    if (devices or ray) and search != "grid":
        raise typer.BadParameter("--devices and --ray sweep the grid; drop --search adaptive (or run it on one device)")
    if devices and ray:
        raise typer.BadParameter("give --devices (this host) or --ray (a cluster), not both")
    if max_minutes is not None and not 0 <= max_minutes < float("inf"):
        raise typer.BadParameter(f"--max-minutes {max_minutes} is not a number of minutes >= 0 (0 builds the "
                                 "kernels and measures nothing; leave it out for no limit)")
    if not 0 < candidate_timeout < float("inf"):
        raise typer.BadParameter(f"--candidate-timeout {candidate_timeout} is not a number of seconds > 0; a "
                                 "pipeline gets this long without progress before it counts as hung (default 120)")
    if timing is not None and timing not in MODES:
        raise typer.BadParameter(f"--timing {timing!r} is not graph, eager or wall (graph and eager on CUDA, "
                                 "wall on the CPU)")
    goes_with = {"shards": "--ray", "budget": "--search adaptive", "screen": "--search adaptive",
                 "trials": "--tactics optuna"}
    unused = given_flags(ctx, {"shards": not ray, "budget": search != "adaptive", "screen": search != "adaptive",
                               "trials": tactics != "optuna"}.get)
    if unused:
        raise typer.BadParameter(f"{unused[0]} has no effect here: it goes with {goes_with[unused[0][2:]]}")
    db = written_db(db, "tuner sweep")
    if problems:
        grid = given_flags(ctx, GRID_FLAGS.__contains__)
        if grid:
            raise typer.BadParameter(f"{grid[0]} shapes a model's grid; --problems gives every problem's own "
                                     "fields: put it in the file's lines, or leave --problems out")
    req = library.SweepRequest(
        model=model, tps=csv(tp, int, "--tp"), phases=csv(phases, name="--phases"),
        kv_dtypes=csv(kv_dtypes, name="--kv-dtypes"), out_dtypes=csv(out_dtypes, name="--out-dtypes"),
        page_sizes=csv(page_sizes, int, "--page-sizes"),
        grid="quick" if quick else "full" if full else "dense" if dense else "mixed" if mixed else None,
        device=device or "auto", timing=timing, tiles=tiles)
    import time
    opts = SweepOptions(max_relerr=max_relerr, retry_failed=retry_failed, isolate=isolate,
                        candidate_timeout_s=candidate_timeout, tactics=tactics, trials=trials, screen=screen,
                        deadline=time.time() + 60 * max_minutes if max_minutes is not None else None,
                        alone=bool(problems) and search != "adaptive")   # a searched list is a grid
    from dispatcher.device import describe

    from ..store import Store
    if ray:
        return _ray_sweep(req, problems, db, opts, ray, shards)
    if devices:
        return _devices_sweep(req, problems, db, opts, devices)
    dev = describe(req.device)
    from dispatcher.resolve import default_timing_mode
    library.check_sweep(dev, timing or default_timing_mode(dev), opts)   # before the database is made
    explicit = read_problems(problems) if problems else None
    # bad options fail before the bar
    total = len(explicit) if explicit is not None else len(library.sweep_problems(req, dev))
    if search == "adaptive":
        total = library.adaptive_total(explicit or library.sweep_problems(req, dev), budget)
    Store(db).close()                                                # so does a database we cannot use
    if (note := shipped_note(db)) is not None:
        err.print(note, highlight=False)
    with _bar() as bar, _kept_on_interrupt(bar):
        task = bar.add_task("sweep", total=None, now="", resumed=0)

        def tick(o):
            if bar.tasks[task].total is None:
                bar.update(task, total=tick.total)
            _advance(bar, task, o, now=_outcome_line(o))
        tick.total = total
        say = lambda m: bar.console.print(escape(m))  # noqa: E731
        if explicit is not None:
            report = library.run_problems(explicit, dev, db, timing or default_timing_mode(dev), opts, tick, say,
                                          search, budget)
        else:
            report = library.start_sweep(req, db, opts, on_problem=tick, say=say, search=search, budget=budget)
    _print_summary(report)


def _devices_sweep(req, problems, db, opts, spec: str) -> None:
    """tuner sweep --devices: a bar per device and one for the total (the ETA: the devices share a queue)."""
    from dispatcher.resolve import default_timing_mode

    from ..fleet import parse_devices
    from ..isolation import label
    from ..store import Store
    devs = parse_devices(spec)
    probs = read_problems(problems) if problems else library.fleet_problems(req, devs)
    mode = req.timing or default_timing_mode(devs[0])
    library.check_sweep(devs[0], mode, opts)
    Store(db).close()
    with _bar() as bar, _kept_on_interrupt(bar):
        total = bar.add_task("total", total=len(probs), now="", resumed=0)
        # a device's clock starts once calibration is over, and its pace is read at its last problem
        per = {label(d): bar.add_task(label(d), total=None, now="", start=False, each=0.0) for d in devs}

        def planned(n):
            bar.update(total, total=n)      # every environment sweeps every problem
            for t in per.values():
                bar.start_task(t)

        def tick(o, name):
            line = _outcome_line(o)
            _advance(bar, total, o, now=line)
            if name is not None:             # None: measured before, resumed
                bar.update(per[name], advance=1, now=line)
                bar.update(per[name], each=bar.tasks[per[name]].elapsed or 0.0)
        report = library.run_on_devices(probs, devs, db, mode, opts, tick, lambda m: bar.console.print(escape(m)),
                                        on_plan=planned)
        bar.update(total, completed=len(report.outcomes))
    _print_summary(report)


def _ray_sweep(req, problems, db, opts, address: str, shards: int | None) -> None:
    """tuner sweep --ray: a bar over shards as Ray workers finish them."""
    from pathlib import Path

    from dispatcher.store import default_path

    from ..ray_sweep import ray_sweep
    from ..store import Store
    if opts.max_relerr is not None:
        checked_budget(opts.max_relerr, "--max-relerr")     # the devices are the workers': checked there
    path = Path(default_path(db))
    new = not path.exists()
    Store(db).close()                                   # one we cannot use fails before Ray starts
    probs = read_problems(problems) if problems else None
    with _bar() as bar:
        task = bar.add_task("shards", total=None, now="", first=(0.0, 0))    # no resumed shards: from the start

        def tick(done, total, what):
            bar.update(task, total=total, completed=done, now=escape(what))
        try:
            report = ray_sweep(req, probs, db, opts, None if address == "local" else address, shards, tick,
                               lambda m: bar.console.print(escape(m)))
        except library.SweepRequestError:               # the workers' grid refused the request: leave no database
            if new:
                for f in (path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")):
                    f.unlink(missing_ok=True)
            raise
    _print_summary(report)


def shipped_note(db) -> str | None:
    """What a sweep into the repository's committed heuristics.db does to it (the README's main job does)."""
    from dispatcher.store import default_path

    from ..store import is_shipped
    if not is_shipped(default_path(db)):
        return None
    return ("writing into the repository's heuristics.db: this host's measurements go beside the shipped H200's "
            "(`git checkout heuristics.db` undoes it; --db another.db keeps them apart)")


@contextmanager
def _kept_on_interrupt(bar: Progress) -> Iterator[None]:
    """On Ctrl-C, or SIGTERM (kill, timeout, systemd) read as one, how many problems this run stored (each as it
    finished), from the bar's first task."""
    def interrupt(signum, frame):
        signal.signal(signal.SIGTERM, signal.SIG_DFL)      # a second one ends a sweep stuck in a kernel call
        raise KeyboardInterrupt
    old = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    except KeyboardInterrupt:
        if bar.tasks:                       # none yet: interrupted before the sweep began
            t = bar.tasks[0]
            resumed = t.fields.get("resumed", 0)
            n = int(t.completed) - resumed
            bar.console.print(f"{n} problem{'s' * (n != 1)} measured and stored before the interrupt"
                              + (f" ({resumed} more were measured before)" if resumed else ""), highlight=False)
        raise
    finally:
        signal.signal(signal.SIGTERM, old)


def _outcome_line(o) -> str:
    p = o.problem
    top = f" max={p.max_kv_len}" if p.max_kv_len != p.kv_len else ""
    shape = f"{p.phase} b={p.batch_size} q={p.q_len} kv={p.kv_len}{top} {p.kv_dtype}/{p.out_dtype}"
    return f"{shape} -> {escape(o.winner or '-')}"


def _advance(bar: Progress, task: TaskID, o, **fields) -> None:
    """One problem done: `resumed` counts those measured before, `first` is (elapsed, measured) at the first
    problem measured now, from which MeasuredEta takes its rate; `now`, its line, is also logged where the
    console is no terminal."""
    t = bar.tasks[task]
    resumed = t.fields.get("resumed", 0) + o.resumed
    bar.update(task, advance=1, resumed=resumed, **fields)
    if not o.resumed and t.fields.get("first") is None:
        bar.update(task, first=(t.elapsed or 0.0, t.completed - resumed))
    if not bar.console.is_terminal and fields.get("now"):    # a log (nohup, CI): the bar draws only at the end
        eta = MeasuredEta().render(t)
        before = " (measured before)" if o.resumed else ""
        bar.console.print(f"{int(t.completed)}/{int(t.total) if t.total else '?'} {eta} {fields['now']}{before}",
                          highlight=False, soft_wrap=True)


class MeasuredEta(ProgressColumn):
    """Time left (tuner.clock.time_left) from the task's `first` (elapsed, measured) and `resumed` fields;
    for a task with `each` (a device of --devices: its seconds to its last problem), its seconds per problem."""

    def render(self, task: Task) -> Text:
        if "each" in task.fields:          # a device's share of a shared queue has no end of its own: its pace
            busy = task.fields["each"]     # seconds from calibration's end to its last problem
            return Text(f"{busy / task.completed:5.1f} s each" if task.completed and busy else "")
        first = task.fields.get("first")
        measured = task.completed - task.fields.get("resumed", 0)
        secs = (time_left(task.elapsed - first[0], measured - first[1], max(0.0, task.total - task.completed))
                if task.total and task.elapsed is not None and first is not None else None)
        if secs is None:
            return Text("eta -:--:--")
        left = int(secs)
        return Text(f"eta {left // 3600}:{left // 60 % 60:02d}:{left % 60:02d}")


def _bar() -> Progress:
    # the count and times keep their width; the problem line takes what is left and is cut, not them
    fixed = Column(no_wrap=True)
    return Progress(TextColumn("[bold]{task.description}", table_column=fixed), BarColumn(bar_width=20),
                    MofNCompleteColumn(table_column=fixed), TimeElapsedColumn(table_column=fixed),
                    MeasuredEta(table_column=fixed),
                    TextColumn("{task.fields[now]}", table_column=Column(no_wrap=True, overflow="ellipsis",
                                                                         max_width=max(10, err.width - 58))),
                    console=err, transient=False)


def _print_summary(report) -> None:
    t = RichTable(title="winners (problems won)")
    for c in ("phase", "heads", "page", "kv/out", "winners"):
        t.add_column(c)
    for g in library.winner_summary(report):
        t.add_row(g["phase"], g["heads"], str(g["page_size"]), f"{g['kv_dtype']}/{g['out_dtype']}",
                  escape(", ".join(f"{k} ({v})" for k, v in g["winners"].items())))
    out.print(t)
    resumed = sum(o.resumed for o in report.outcomes)
    if report.unfinished:
        out.print(f"[red]unfinished: {escape(report.unfinished)}; rerun the same command to resume[/]", soft_wrap=True)
    elif report.stopped_early:
        out.print("[yellow]stopped at --max-minutes; rerun the same command to resume[/]")
    unsupported = report.count("unsupported")
    n = len(report.outcomes)
    out.print(f"{n} problem{'s' * (n != 1)}, {report.measured} pipelines measured "
              f"({report.count('ok')} ok, {report.count('inaccurate')} inaccurate, {report.count('failed')} failed), "
              f"{unsupported} unsupported (not run; the store says why), {resumed} problem{'s' * (resumed != 1)} "
              "already measured", soft_wrap=True)
    if report.kept_failed:
        out.print(f"{report.kept_failed} pipelines that failed or were inaccurate before were not measured again; "
                  "rerun with --retry-failed to measure them", soft_wrap=True)
    # one line each, never wrapped: scripts grep them
    for note in report.notes:
        out.print(escape(note), soft_wrap=True)
    if report.by_device:
        by = sorted(report.by_device.items())
        out.print("per device: " + ", ".join(f"{k} {v} problem{'s' * (v != 1)}" for k, v in by), soft_wrap=True)
    if report.seconds:
        from ..clock import stage_line
        out.print(stage_line(report.seconds), soft_wrap=True)
    if report.unfinished:
        raise typer.Exit(2)


