"""`tuner`: a thin shell over tuner.library and dispatcher. Each command's docstring is its --help."""
from __future__ import annotations

import json
import sys
from functools import wraps
from typing import Annotated, Optional

import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn
from rich.table import Table as RichTable

from dispatcher import AttentionProblem, ProblemError, StoreError, load
from dispatcher.dispatch import rule_only
from dispatcher.problem import DEFAULTS
from dispatcher.store import default_path
from dispatcher.registry import RegistryError

from . import library
from .problem_files import iter_problems, read_problems
from .sweep import SweepOptions

app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
                  help="Switchyard: measure attention kernels on this host and choose the fastest per problem.")
out = Console()
err = Console(stderr=True)

Db = Annotated[Optional[str], typer.Option("--db", help="SQLite store (default: $SWITCHYARD_DB or ./heuristics.db)")]
DecideDb = Annotated[Optional[str], typer.Option("--db", help="SQLite store (default: $SWITCHYARD_DB or ./heuristics.db); "
                                                             "none: decide by the built-in rule alone")]
Dev = Annotated[Optional[str], typer.Option("--device", help="auto | cpu | cuda[:N] | a device name in the database")]


def friendly(fn):
    """Library errors become one readable line and exit code 2, never a traceback."""
    @wraps(fn)
    def run(*a, **k):
        try:
            return fn(*a, **k)
        except (ProblemError, StoreError, RegistryError, ValueError, LookupError, OSError) as e:
            err.print(f"[red]error:[/] {escape(str(e))}", highlight=False, soft_wrap=True)
            raise typer.Exit(2)
    return run


def require_db(db: str | None) -> None:
    """A read command on a database that does not exist is a mistake (a mistyped --db), not an empty answer."""
    path = default_path(db)
    if not path.exists():
        raise ValueError(f"{path}: no such database; run `tuner sweep` to make one, or point --db "
                         "(or $SWITCHYARD_DB) at a heuristics.db")


def _dispatcher(db: str | None, device: str | None):
    """The dispatcher `tuner decide` asks: from the database, or from the rule alone with --db none."""
    if db is not None and db.strip().lower() == "none":
        return rule_only(device)
    try:
        require_db(db)
    except ValueError as e:
        raise ValueError(f"{e}; or pass --db none to decide by the built-in rule alone") from None
    return load(db, device)


def csv(text: str | None, cast=str, name: str = "") -> tuple | None:
    if text is None:
        return None
    try:
        return tuple(cast(v.strip()) for v in text.split(",") if v.strip())
    except ValueError:
        raise typer.BadParameter(f"{text!r} is not a comma-separated list of {cast.__name__}", param_hint=name) from None


@app.command()
@friendly
def sweep(
    model: Annotated[str, typer.Option(help="model preset: llama4-scout, llama-3.1-8b, llama-3.3-70b, qwen3-32b, gpt-oss-120b")] = "llama4-scout",
    tp: Annotated[Optional[str], typer.Option(help="tensor-parallel sizes, e.g. 1,4 (default: the preset's on a GPU, 1 on the CPU)")] = None,
    phases: Annotated[str, typer.Option(help="decode,prefill")] = "decode,prefill",
    kv_dtypes: Annotated[str, typer.Option(help="KV-cache dtypes: bf16,fp16,fp8")] = "bf16,fp8",
    out_dtypes: Annotated[str, typer.Option(help="output dtypes: bf16,fp16,fp8")] = "bf16,fp8",
    page_sizes: Annotated[Optional[str], typer.Option(help="tokens per KV page (default 16,32 on a GPU, 16 on the CPU)")] = None,
    device: Dev = "auto",
    db: Db = None,
    quick: Annotated[bool, typer.Option("--quick", help="a small grid (the default on the CPU)")] = False,
    full: Annotated[bool, typer.Option("--full", help="the full grid (the default on a GPU)")] = False,
    timing: Annotated[Optional[str], typer.Option(help="graph | eager on CUDA (default graph); the CPU uses wall")] = None,
    max_relerr: Annotated[Optional[float], typer.Option(help="accuracy budget for every pipeline (default: per dtype)")] = None,
    retry_failed: Annotated[bool, typer.Option(help="measure again pipelines that failed before")] = False,
    max_minutes: Annotated[Optional[float], typer.Option(help="start no new problem after this long; rerun to resume")] = None,
    isolate: Annotated[bool, typer.Option(help="run pipelines in a worker process: a crash or hang fails one pipeline, not the sweep")] = True,
    candidate_timeout: Annotated[float, typer.Option(help="seconds without progress after which a pipeline counts as hung")] = 120.0,
    problems: Annotated[Optional[str], typer.Option("--problems", help="JSON lines of problems to sweep instead of a model's grid")] = None,
    tactics: Annotated[str, typer.Option(help="grid: time every declared tactic; default: the kernels' own only; optuna: search each kernel's tune space per problem")] = "grid",
    trials: Annotated[int, typer.Option(help="with --tactics optuna: trials per problem and kernel pipeline")] = 16,
    search: Annotated[str, typer.Option(help="grid: every grid point; adaptive: a coarse subset, then refine where winners change or are within noise")] = "grid",
    budget: Annotated[float, typer.Option(help="with --search adaptive: the fraction of the grid's points to measure (shared between configurations, the small ones getting a larger share)")] = 1 / 3,
    devices: Annotated[Optional[str], typer.Option(help="sweep on several devices of this host: all, or a list such as 0,1 (cpu,cpu: CPU workers); one worker process per device")] = None,
    ray: Annotated[Optional[str], typer.Option(help="send shards to Ray workers holding one GPU each: a cluster address, or 'local' (also: --ray alone) to start a local Ray instance")] = None,
    shards: Annotated[Optional[int], typer.Option(help="with --ray: how many shards (default: two per worker)")] = None,
):
    """Measure every eligible pipeline per problem size on this host and store them (resumes).

    Example: tuner sweep --model llama4-scout --device cuda
    """
    if quick and full:
        raise typer.BadParameter("give --quick or --full, not both")
    if search not in ("grid", "adaptive"):
        raise typer.BadParameter(f"--search {search!r} is not grid or adaptive")
    if not 0 < budget <= 1:
        raise typer.BadParameter(f"--budget {budget} is out of range; use a fraction in (0, 1], e.g. 0.33")
    if (devices or ray) and search != "grid":
        raise typer.BadParameter("--devices and --ray sweep the grid; drop --search adaptive (or run it on one device)")
    if devices and ray:
        raise typer.BadParameter("give --devices (this host) or --ray (a cluster), not both")
    req = library.SweepRequest(
        model=model, tps=csv(tp, int, "--tp"), phases=csv(phases, name="--phases"),
        kv_dtypes=csv(kv_dtypes, name="--kv-dtypes"), out_dtypes=csv(out_dtypes, name="--out-dtypes"),
        page_sizes=csv(page_sizes, int, "--page-sizes"), grid="quick" if quick else "full" if full else None,
        device=device or "auto", timing=timing)
    import time
    opts = SweepOptions(max_relerr=max_relerr, retry_failed=retry_failed, isolate=isolate,
                        candidate_timeout_s=candidate_timeout, tactics=tactics, trials=trials,
                        deadline=time.time() + 60 * max_minutes if max_minutes is not None else None)
    from dispatcher.device import describe
    from .store import Store
    if ray:
        return _ray_sweep(req, problems, db, opts, ray, shards)
    if devices:
        return _devices_sweep(req, problems, db, opts, devices)
    dev = describe(req.device)
    explicit = read_problems(problems) if problems else None
    total = len(explicit) if explicit is not None else len(library.sweep_problems(req, dev))   # bad options fail before the bar
    if search == "adaptive":
        total = library.adaptive_total(explicit or library.sweep_problems(req, dev), budget)
    Store(db).close()                                                # so does a database we cannot use
    with _bar() as bar:
        task = bar.add_task("sweep", total=None, now="")

        def tick(o):
            if bar.tasks[task].total is None:
                bar.update(task, total=tick.total)
            bar.update(task, advance=1, now=_outcome_line(o))
        tick.total = total
        say = lambda m: bar.console.print(escape(m))  # noqa: E731
        if explicit is not None:
            from dispatcher.dispatch import default_timing_mode
            report = library.run_problems(explicit, dev, db, timing or default_timing_mode(dev), opts, tick, say,
                                          search, budget)
        else:
            report = library.start_sweep(req, db, opts, on_problem=tick, say=say, search=search, budget=budget)
    _print_summary(report)


def _devices_sweep(req, problems, db, opts, spec: str) -> None:
    """tuner sweep --devices: a bar per device and one for the total."""
    from dispatcher.dispatch import default_timing_mode
    from .fleet import parse_devices
    from .isolation import label
    from .store import Store
    devs = parse_devices(spec)
    probs = read_problems(problems) if problems else library.sweep_problems(req, devs[0])
    mode = req.timing or default_timing_mode(devs[0])
    Store(db).close()
    with _bar() as bar:
        total = bar.add_task("total", total=len(probs), now="")
        per = {label(d): bar.add_task(label(d), total=None, now="") for d in devs}

        def tick(o, name):
            bar.update(total, advance=1)
            bar.update(per[name], advance=1, now=_outcome_line(o))
        report = library.run_on_devices(probs, devs, db, mode, opts, tick, lambda m: bar.console.print(escape(m)))
        bar.update(total, completed=len(report.outcomes))
    _print_summary(report)


def _ray_sweep(req, problems, db, opts, address: str, shards: int | None) -> None:
    """tuner sweep --ray: a bar over shards as Ray workers finish them."""
    from .ray_sweep import ray_sweep
    from .store import Store
    Store(db).close()
    probs = read_problems(problems) if problems else None
    with _bar() as bar:
        task = bar.add_task("shards", total=None, now="")

        def tick(done, total, what):
            bar.update(task, total=total, completed=done, now=escape(what))
        report = ray_sweep(req, probs, db, opts, None if address == "local" else address, shards, tick,
                           lambda m: bar.console.print(escape(m)))
    _print_summary(report)


def _outcome_line(o) -> str:
    p = o.problem
    return f"{p.phase} b={p.batch_size} q={p.q_len} kv={p.kv_len} {p.kv_dtype}/{p.out_dtype} -> {escape(o.winner or '-')}"


def _bar() -> Progress:
    return Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                    TextColumn("eta"), TimeRemainingColumn(), TextColumn("{task.fields[now]}"), console=err,
                    transient=False)


def _print_summary(report) -> None:
    t = RichTable(title="winners (problems won)")
    for c in ("phase", "heads", "page", "kv/out", "winners"):
        t.add_column(c)
    for g in library.winner_summary(report):
        t.add_row(g["phase"], g["heads"], str(g["page_size"]), f"{g['kv_dtype']}/{g['out_dtype']}",
                  escape(", ".join(f"{k} ({v})" for k, v in g["winners"].items())))
    out.print(t)
    resumed = sum(o.resumed for o in report.outcomes)
    if report.stopped_early:
        out.print("[yellow]stopped at --max-minutes; rerun the same command to resume[/]")
    out.print(f"{len(report.outcomes)} problems, {report.measured} pipelines measured "
              f"({report.count('ok')} ok, {report.count('inaccurate')} inaccurate, {report.count('failed')} failed, "
              f"{report.count('unsupported')} unsupported), {resumed} already measured")
    # one line each, never wrapped: scripts grep them
    for note in report.notes:
        out.print(escape(note), soft_wrap=True)
    if report.by_device:
        out.print("per device: " + ", ".join(f"{k} {v} problems" for k, v in sorted(report.by_device.items())),
                  soft_wrap=True)
    if report.seconds:
        from .sweep import stage_line
        out.print(stage_line(report.seconds), soft_wrap=True)


@app.command()
@friendly
def decide(
    phase: Annotated[Optional[str], typer.Option(help="decode | prefill")] = None,
    num_qo_heads: Annotated[Optional[int], typer.Option()] = None,
    num_kv_heads: Annotated[Optional[int], typer.Option()] = None,
    head_dim: Annotated[int, typer.Option()] = DEFAULTS["head_dim"],
    page_size: Annotated[int, typer.Option()] = DEFAULTS["page_size"],
    batch_size: Annotated[Optional[int], typer.Option()] = None,
    kv_len: Annotated[Optional[int], typer.Option()] = None,
    q_len: Annotated[int, typer.Option()] = DEFAULTS["q_len"],
    q_dtype: Annotated[str, typer.Option()] = DEFAULTS["q_dtype"],
    kv_dtype: Annotated[str, typer.Option()] = DEFAULTS["kv_dtype"],
    out_dtype: Annotated[str, typer.Option()] = DEFAULTS["out_dtype"],
    causal: Annotated[bool, typer.Option()] = DEFAULTS["causal"],
    window_left: Annotated[int, typer.Option()] = DEFAULTS["window_left"],
    has_sinks: Annotated[bool, typer.Option()] = DEFAULTS["has_sinks"],
    input: Annotated[Optional[str], typer.Option("--input", help="JSON lines of problems ('-': stdin); one decision per line out")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="print the decision as JSON")] = False,
    device: Dev = None,
    db: DecideDb = None,
):
    """Which pipeline to run for one problem (or each line of --input).

    Example: tuner decide --device "NVIDIA H200" --phase decode --num-qo-heads 40 --num-kv-heads 8
    --batch-size 12 --kv-len 1900 --kv-dtype fp8 --out-dtype fp8
    """
    if input is not None:
        d = None                      # loaded at the first problem: a bad line is reported as such
        for prob in iter_problems(input):
            d = d or _dispatcher(db, device)
            print(json.dumps(d.choose(prob).to_dict()), flush=True)
        if d is None:
            _dispatcher(db, device)
        return
    missing = [f for f, v in (("--phase", phase), ("--num-qo-heads", num_qo_heads), ("--num-kv-heads", num_kv_heads),
                               ("--batch-size", batch_size), ("--kv-len", kv_len)) if v is None]
    if missing:
        raise ValueError(f"{', '.join(missing)} required (or --input FILE)")
    prob = AttentionProblem(phase=phase, num_qo_heads=num_qo_heads, num_kv_heads=num_kv_heads, head_dim=head_dim,
                            page_size=page_size, batch_size=batch_size, kv_len=kv_len, q_len=q_len, q_dtype=q_dtype,
                            kv_dtype=kv_dtype, out_dtype=out_dtype, causal=causal, window_left=window_left,
                            has_sinks=has_sinks)
    dec = _dispatcher(db, device).choose(prob)
    if as_json:
        print(json.dumps(dec.to_dict()))
        return
    us = f"{dec.expected_us:.1f} us" if dec.expected_us is not None else "no estimate"
    out.print(f"[bold]{escape(dec.pipeline)}[/] on {escape(dec.device)} ({dec.source}, {us})", highlight=False)
    out.print(f"  quantize query to {dec.q_dtype}: {dec.q_quant}   fused FP8 output: {dec.fused_out_quant}   "
              f"separate out-quant: {dec.out_quant}", highlight=False)
    out.print(f"  why: {escape(dec.reason)}", highlight=False, soft_wrap=True)


@app.command()
@friendly
def show(db: Db = None, as_json: Annotated[bool, typer.Option("--json")] = False):
    """Environments, counts of measurements and winners, and coverage of a database."""
    require_db(db)
    info = library.overview(db)
    if as_json:
        print(json.dumps(info, default=str))
        return
    out.print(f"{info['db']}: {info['measurements']} measurements, {info['winners']} winners")
    for e in info["environments"]:
        out.print(f"[bold]#{e['id']} {e['device_name']}[/] ({e['timing_mode']}, torch {e['torch']}, "
                  f"flashinfer {e['flashinfer'] or '-'}): {e['measurements']} ; {e['winners']} winners", highlight=False)
        for c in e["coverage"]:
            out.print(f"   {c['phase']:7s} {c['num_qo_heads']}/{c['num_kv_heads']} page {c['page_size']} "
                      f"{c['kv_dtype']}/{c['out_dtype']}: {c['buckets']} buckets, batch {c['min_batch']}-{c['max_batch']}, "
                      f"kv {c['min_kv']}-{c['max_kv']}", highlight=False)


@app.command()
@friendly
def evaluate(db: Db = None, device: Dev = None,
             holdout: Annotated[float, typer.Option(help="fraction of measured buckets held out")] = 0.2,
             seed: Annotated[int, typer.Option()] = 0,
             as_json: Annotated[bool, typer.Option("--json")] = False,
             train: Annotated[Optional[str], typer.Option(help="fit on this database (e.g. an adaptive sweep's) and score on every bucket of --db it lacks")] = None,
             adaptive: Annotated[Optional[float], typer.Option(help="replay an adaptive search measuring this fraction of --db's buckets; score on the rest, beside a random sample of the same size")] = None):
    """Regret on held-out measured shapes (chosen / best time) and speedup over the built-in rules.

    Example: tuner evaluate --device "NVIDIA H200" --holdout 0.2 --seed 0
    """
    from .evaluate import evaluate as run_eval
    if not 0 < holdout < 1:
        raise ValueError(f"--holdout {holdout} is out of range; use a fraction between 0 and 1, e.g. 0.2")
    require_db(db)
    if train is not None or adaptive is not None:
        from .evaluate import evaluate_adaptive, evaluate_trained
        res = evaluate_trained(db, train, device) if train is not None else evaluate_adaptive(db, device, adaptive, seed)
        for name in ("configs", "adaptive", "random"):
            if name in res:
                res[name] = {c: v["learned"] for c, v in res[name].items()}
        for name in ("overall", "adaptive_overall", "random_overall"):
            if name in res:
                res[name] = res[name]["learned"]
        print(json.dumps(res, indent=1))
        return
    res = run_eval(db, device, holdout, seed)
    if as_json:
        print(json.dumps(res, indent=1))
        return
    t = RichTable(title=f"{res['device']}: {res['held_out']} of {res['buckets']} measured buckets held out (seed {seed})")
    for c in ("configuration", "method", "n", "regret gm", "p95", "max", "vs vllm-2026", "vs vllm-2025", "slower than a rule"):
        t.add_column(c)
    for cfg, ms in res["configs"].items():
        for m, v in ms.items():
            t.add_row(cfg, m, str(v["n"]), f"{v['regret_geomean']:.3f}", f"{v['regret_p95']:.3f}", f"{v['regret_max']:.3f}",
                      f"{v['speedup_vs_vllm-2026']:.3f}x", f"{v['speedup_vs_vllm-2025']:.3f}x",
                      f"{v['slower_than_vllm-2026'] + v['slower_than_vllm-2025']}")
    out.print(t)
    for m, v in res["overall"].items():
        out.print(f"all held-out shapes, {m}: regret gm {v['regret_geomean']:.4f} over {v['n']}, max {v['regret_max']:.3f}; "
                  f"{v['configs_within_target']} of {v['configs']} configurations within {v['target']}", soft_wrap=True)
    _print_worst(res["configs"])
    o = RichTable(title="best measured pipeline vs each rule's pick, all measured buckets (time ratio)")
    for c in ("configuration", "vllm-2026 gm", "max", "vllm-2025 gm", "max"):
        o.add_column(c)
    for cfg, r in res["oracle_vs_rules"].items():
        a, b = r.get("vllm-2026", {}), r.get("vllm-2025", {})
        o.add_row(cfg, f"{a.get('geomean', float('nan')):.3f}x", f"{a.get('max', float('nan')):.2f}x",
                  f"{b.get('geomean', float('nan')):.3f}x", f"{b.get('max', float('nan')):.2f}x")
    out.print(o)


def _print_worst(configs: dict, most: int = 10) -> None:
    """The held-out shapes where the learned choice lost most: where to measure more densely."""
    worst = sorted(((cfg, x) for cfg, ms in configs.items() for x in ms.get("learned", {}).get("worst", [])),
                   key=lambda cx: -cx[1]["regret"])[:most]
    if not worst:
        return
    w = RichTable(title=f"worst held-out choices of the learned model (top {len(worst)})")
    for c in ("configuration", "shape", "regret", "chose", "best"):
        w.add_column(c)
    for cfg, x in worst:
        w.add_row(cfg, x["shape"], f"{x['regret']:.3f}", escape(f"{x['chose']} {x['chose_us']:.1f} us"),
                  escape(f"{x['best']} {x['best_us']:.1f} us"))     # pipeline ids hold [tactic=...]: not markup
    out.print(w)


@app.command()
@friendly
def report(db: Db = None, device: Dev = None,
           out_dir: Annotated[Optional[str], typer.Option("--out", help="write PNG heatmaps and index.html here (needs the report extra: matplotlib)")] = None):
    """Which pipeline wins where: a batch x kv_len map per phase and dtype configuration.

    Without --out: Markdown winner maps on stdout. Example: tuner report --device "NVIDIA H200" --out report/
    """
    require_db(db)
    if out_dir is None:
        from .report import winner_maps
        print(winner_maps(db, device))
        return
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise ValueError("tuner report --out needs matplotlib: pip install -e '.[report]'") from None
    from .plots import write_report
    print(write_report(db, device, out_dir))


@app.command("export")
@friendly
def export_(out_path: Annotated[str, typer.Option("--out", help="file (jsonl) or directory (vllm-json)")],
            format: Annotated[str, typer.Option("--format", help="jsonl | vllm-json")] = "jsonl",
            db: Db = None, device: Dev = None):
    """Export measurements (jsonl, to merge on another host) or per-device decisions (vllm-json)."""
    require_db(db)
    from pathlib import Path

    from .transfer import export_jsonl, export_vllm_json
    if format == "jsonl":
        out.print(f"{export_jsonl(db, Path(out_path), device)} measurements written to {out_path}")
    elif format == "vllm-json":
        for p in export_vllm_json(db, Path(out_path), device):
            out.print(f"wrote {p}")
    else:
        raise ValueError(f"--format {format!r} is not supported; use jsonl or vllm-json")


@app.command("import")
@friendly
def import_(path: Annotated[str, typer.Argument(help="a .jsonl file written by tuner export")],
            format: Annotated[str, typer.Option("--format", help="jsonl")] = "jsonl", db: Db = None):
    """Merge measurements from another host into this database (by environment)."""
    from pathlib import Path

    from .transfer import import_jsonl
    if format != "jsonl":
        raise ValueError(f"--format {format!r} is not supported for import; use jsonl")
    r = import_jsonl(db, Path(path))
    out.print(f"merged {r['problems']} problems in {r['environments']} environment(s) into {db or 'heuristics.db'}")


LOG_LEVELS = ("critical", "error", "warning", "info", "debug", "trace")


@app.command()
@friendly
def serve(host: Annotated[str, typer.Option(help="bind address (loopback by default)")] = "127.0.0.1",
          port: Annotated[int, typer.Option(min=0, max=65535)] = 8177, db: Db = None, device: Dev = None,
          token_file: Annotated[Optional[str], typer.Option(help="file holding the bearer token for write endpoints "
                                                                "(or set SWITCHYARD_TOKEN)")] = None,
          tune_misses: Annotated[bool, typer.Option(help="measure the most frequent misses when no sweep runs "
                                                         "(needs writes enabled: a token)")] = False,
          tune_misses_without_token: Annotated[bool, typer.Option(
              help="tune misses even without a token: unauthenticated readers then choose what this host measures, "
                   "within the bounds POST /v1/sweeps has")] = False,
          refresh_s: Annotated[float, typer.Option(min=0.05, help="how often to check the database for new winners")] = 2.0,
          idle_s: Annotated[float, typer.Option(min=0.05, help="idle time before tuning misses")] = 5.0,
          log_level: Annotated[str, typer.Option(help="critical | error | warning | info | debug | trace")] = "info",
          request_timeout_s: Annotated[float, typer.Option(min=0.1, help="a connection must send a whole request "
                                                                         "within this long, or it is closed")] = 10.0,
          max_connections: Annotated[int, typer.Option(min=1, help="open connections at most; more are closed at once")] = 512):
    """Run the daemon: decisions over REST (docs at /docs), background sweeps, metrics at /metrics.

    Example: SWITCHYARD_TOKEN=secret tuner serve --tune-misses
    """
    import logging

    import uvicorn

    from api.auth import configured_token
    from api.guard import uvicorn_settings
    from api.main import create_app
    from dispatcher.dispatch import device_of
    from dispatcher.store import open_readonly

    from .store import Store
    if log_level.lower() not in LOG_LEVELS:
        raise ValueError(f"--log-level {log_level!r} is not one of {', '.join(LOG_LEVELS)}")
    token = configured_token(token_file)
    policy = "anyone" if tune_misses_without_token else "writers" if tune_misses else "off"
    if not default_path(db).exists():
        if not token:
            require_db(db)                  # read-only daemon: nothing would ever fill a new database
        Store(db).close()                   # a writable daemon sweeps into a new one
        err.print(f"{default_path(db)}: a new, empty database (POST /v1/sweeps fills it)", highlight=False)
    conn = open_readonly(db)                # garbage, another program's file, a directory: one line here
    if conn is not None:
        conn.close()
    device_of(db, device)                   # a device neither here nor in the database: one line here
    app = create_app(db=db, device=device, token_file=token_file, tune_misses=policy,
                     refresh_s=refresh_s, idle_s=idle_s)
    access = logging.getLogger("switchyard.access")
    if not access.handlers:
        access.addHandler(logging.StreamHandler(sys.stdout))
    access.setLevel(logging.INFO if log_level.lower() in ("info", "debug", "trace") else logging.WARNING)
    uvicorn.run(app, host=host, port=port, log_level=log_level.lower(),
                **uvicorn_settings(request_timeout_s, max_connections))


def _ray_flag(argv: list[str]) -> list[str]:
    """`--ray` with no address means a local Ray instance (click options need a value)."""
    out = list(argv)
    for i, a in enumerate(out):
        if a == "--ray" and (i + 1 == len(out) or out[i + 1].startswith("-")):
            out.insert(i + 1, "local")
            break
    return out


def main() -> None:
    """Run the CLI; a bad flag is one readable line and exit code 2 (click's usage box is not)."""
    from typer import Abort
    try:        # this typer vendors click; older ones use click itself
        from typer._click.exceptions import UsageError
    except ImportError:
        from click.exceptions import UsageError
    argv = _ray_flag(sys.argv[1:])
    if not argv:                     # bare `tuner`: its help, and no error (click's would add an empty one)
        app(args=["--help"], standalone_mode=False)
        sys.exit(0)
    try:
        rc = app(args=argv, standalone_mode=False)
    except UsageError as e:
        cmd = e.ctx.command_path if e.ctx else "tuner"
        err.print(f"[red]error:[/] {escape(e.format_message())} (see: {cmd} --help)", highlight=False, soft_wrap=True)
        sys.exit(2)
    except Abort:
        err.print("aborted")
        sys.exit(130)
    sys.exit(rc if isinstance(rc, int) else 0)
