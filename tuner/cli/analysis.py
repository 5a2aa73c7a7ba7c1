"""tuner evaluate and tuner report: how good the decisions are, and where each pipeline wins."""
from __future__ import annotations

import json
from typing import Annotated, Any, Optional

import typer
from rich.markup import escape
from rich.table import Table as RichTable

from dispatcher.rules import DEFAULT_RULE, RULES

from .app import AnalysedDev, Db, app, err, friendly, out, require_db


@app.command()
@friendly
def evaluate(db: Db = None, device: AnalysedDev = None,
             holdout: Annotated[float, typer.Option(help="fraction of measured cells held out")] = 0.2,
             seed: Annotated[int, typer.Option()] = 0,
             as_json: Annotated[bool, typer.Option("--json")] = False,
             offgrid: Annotated[Optional[str], typer.Option(
                 help="score --db's decisions on the off-grid shapes measured in this database "
                      "(benchmarks/offgrid.py), each asked as it is")] = None,
             measured_on: Annotated[Optional[str], typer.Option(
                 help="with --offgrid: score on the times measured on this device there (a device name in that "
                      "database; default: --device), e.g. the shipped H200 database on an H100's shapes")] = None,
             remeasured: Annotated[Optional[str], typer.Option(
                 help="with --offgrid: the same problem list measured another time, on the device whose times "
                      "score it (--measured-on, else --device); each shape is also decided from its own "
                      "measurement there ('remeasured': how far two runs disagree), every method scored on the "
                      "shapes both hold")] = None,
             between: Annotated[bool, typer.Option(
                 "--between", help="fit on every other measured size, score between them, beside the bucketed "
                                   "answer (the winner at the sizes rounded up)")] = False,
             predictor_config: Annotated[Optional[str], typer.Option(
                 help="a JSON file of the learned model's settings (dispatcher.predictor.PredictorConfig)")] = None,
             train: Annotated[Optional[str], typer.Option(help="fit on this database (e.g. an adaptive sweep's) and "
                                                               "score on every cell of --db it lacks")] = None,
             adaptive: Annotated[Optional[float], typer.Option(help="replay an adaptive search measuring this "
                                                                    "fraction of --db's cells; score on the rest, "
                                                                    "beside a random sample of the same size")] = None,
             screen: Annotated[Optional[float], typer.Option(help="with --adaptive: the search's screen factor, "
                                                                 "as tuner sweep's --screen (default 2; 0: every "
                                                                 "pipeline measured)")] = None,
             plot: Annotated[Optional[str], typer.Option(help="also write regret plots, every scored shape (JSON) and "
                                                              "an index.html here (needs matplotlib)")] = None):
    """Regret (chosen / best time) and speedup over the built-in rules: on held-out measured shapes,
    between grid points (--between), or on a measured off-grid set (--offgrid).

    Example: tuner evaluate --device "NVIDIA H200" --offgrid benchmarks/results/h200-offgrid4-waves/offgrid4.db
    (`xz -dk benchmarks/results/h200-offgrid4-waves/offgrid4.db.xz` first)
    """
    from dispatcher.predictor import PredictorConfig

    from ..analysis import evaluate as ev
    if not 0 < holdout < 1:
        raise ValueError(f"--holdout {holdout} is out of range; use a fraction between 0 and 1, e.g. 0.2")
    if sum(x is not None and x is not False for x in (offgrid, between or None, train, adaptive)) > 1:
        raise ValueError("give one of --offgrid, --between, --train, --adaptive")
    if screen is not None and adaptive is None:
        raise ValueError("--screen replays the adaptive search's screen; give --adaptive too")
    if screen is not None:
        from ..search.screen import checked_screen
        checked_screen(screen, "--screen")
    if measured_on is not None and offgrid is None:
        raise ValueError("--measured-on names the device whose times score an --offgrid set; give --offgrid too")
    if remeasured is not None and offgrid is None:
        raise ValueError("--remeasured is a second measurement of an --offgrid set; give --offgrid too")
    require_db(db)
    config = PredictorConfig.from_file(predictor_config) if predictor_config else None
    if plot is not None:
        if train is not None or adaptive is not None:
            raise ValueError("--plot draws a hold-out, --between or --offgrid evaluation; leave out --train/--adaptive")
        _need_matplotlib("tuner evaluate --plot")
        _writable_dir("--plot", plot)          # before the evaluation, not after its seconds of work
    if train is not None or adaptive is not None:
        res = (ev.evaluate_trained(db, train, device, config=config) if train is not None
               else ev.evaluate_adaptive(db, device, adaptive, seed, config=config,
                                            **({} if screen is None else {"screen": screen})))
        for name in ("configs", "adaptive", "random"):
            if name in res:
                res[name] = {c: v["learned"] for c, v in res[name].items()}
        for name in ("overall", "adaptive_overall", "random_overall"):
            if name in res:
                res[name] = res[name]["learned"]
        if as_json:
            print(json.dumps(res, indent=1))
        else:
            _print_sampled(res)
        return
    if offgrid is not None:
        res = ev.evaluate_offgrid(db, offgrid, device, config=config, shapes=plot is not None, measured_on=measured_on,
                                  remeasured_db=remeasured)
        title = f"{res['device']}: {res['problems']} off-grid problems measured in {offgrid}"
        if remeasured is not None:
            once = f", {res['measured_once']} measured in one only" if res["measured_once"] else ""
            title += f" and again in {remeasured} (scored: those in both{once})"
        if res["measured_on"] != res["device"]:
            title += f" on {res['measured_on']}"
        if "note" in res:
            title += f" ({res['note']})"
        if res["in_sample"] > res["problems"] / 10:      # a random off-grid shape is rarely a measured one
            err.print(escape(f"warning: {res['in_sample']} of {res['problems']} problems in {offgrid} were measured "
                             f"in {db or 'the fitted database'} too, so they score the fit in-sample; fit on a "
                             "database without them"), soft_wrap=True)
    elif between:
        res = ev.evaluate_between(db, device, config=config, shapes=plot is not None)
        title = f"{res['device']}: fitted on {res['fitted']} cells, scored on the {res['held_out']} between them"
    else:
        res = ev.evaluate(db, device, holdout, seed, config=config, shapes=plot is not None)
        title = f"{res['device']}: {res['held_out']} of {res['cells']} measured cells held out (seed {seed})"
    if plot is not None:
        from ..analysis.evaluation_plots import write_evaluation
        page = write_evaluation(res, title, plot)
    for ms in res["configs"].values():         # every shape is in the plot folder's JSON, not on the screen
        for v in ms.values():
            v.pop("shapes", None)
    if as_json:
        print(json.dumps(res, indent=1))
    else:
        _print_scores(title, res, "off-grid" if offgrid else "between-point" if between else "held-out")
    if plot is not None:
        (err if as_json else out).print(f"plots: {escape(str(page))}", soft_wrap=True)     # stdout stays JSON


def _print_sampled(res: dict[str, Any]) -> None:
    """--adaptive / --train: per configuration, then pooled; the whole result with --json."""
    pairs = ([("adaptive", "adaptive_overall"), ("random", "random_overall")] if "adaptive" in res
             else [("configs", "overall")])
    t = RichTable(title=f"{res['device']}: fitted on {res['measured']} of {res['cells']} measured cells, scored on "
                        "the rest" + (f" (trained on {res['train_db']})" if "train_db" in res else ""))
    for c in ("configuration", *(("adaptive", "random") if "adaptive" in res else ("learned",))):
        t.add_column(c)
    for cfg in res[pairs[0][0]]:
        t.add_row(cfg, *(f"{v['regret_geomean']:.3f} (max {v['regret_max']:.2f}, n {v['n']})"
                         if (v := res[name].get(cfg)) else "-" for name, _ in pairs))
    out.print(t)
    for name, pooled in pairs:
        out.print(_pooled_line("learned" if name == "configs" else name, res[pooled]), soft_wrap=True)


def _pooled_line(label: str, o: dict[str, Any]) -> str:
    """A method's regret over every scored shape, and how many configurations meet each target."""
    return (f"{label}: regret gm {o['regret_geomean']:.4f} over {o['n']}, max {o['regret_max']:.3f}; "
            f"{o['configs_within_target']} of {o['configs']} configurations within gm {o['target']}, "
            f"{o['configs_within_gm_and_max']} also within max {o['target_max']:.2f}")


def _print_scores(title: str, res: dict[str, Any], scored: str) -> None:
    t = RichTable(title=title)
    for c in ("configuration", "method", "n", "regret gm", "p95", "max", *(f"vs {r}" for r in RULES),
              f"slower than {DEFAULT_RULE}"):
        t.add_column(c)
    for cfg, ms in res["configs"].items():
        for m, v in ms.items():
            t.add_row(cfg, m, str(v["n"]), f"{v['regret_geomean']:.3f}", f"{v['regret_p95']:.3f}",
                      f"{v['regret_max']:.3f}", *(f"{v[f'speedup_vs_{r}']:.3f}x" for r in RULES),
                      str(v[f"slower_than_{DEFAULT_RULE}"]))
    out.print(t)
    for m, v in res["overall"].items():
        out.print(_pooled_line(f"all scored shapes, {m}", v), soft_wrap=True)
    _print_worst(res["configs"], scored=scored)
    _print_slower(res["configs"])
    if "oracle_vs_rules" not in res:
        return
    o = RichTable(title="best measured pipeline vs each rule's pick, all measured cells (time ratio)")
    o.add_column("configuration")
    for r in RULES:
        o.add_column(f"{r} gm")
        o.add_column("max")
    for cfg, by in res["oracle_vs_rules"].items():
        cells = [(by.get(r, {}).get("geomean", float("nan")), by.get(r, {}).get("max", float("nan"))) for r in RULES]
        o.add_row(cfg, *(x for gm, mx in cells for x in (f"{gm:.3f}x", f"{mx:.2f}x")))
    out.print(o)


def _print_worst(configs: dict, most: int = 10, scored: str = "held-out") -> None:
    """The held-out shapes where the learned choice lost most: where to measure more densely."""
    worst = sorted(((cfg, x) for cfg, ms in configs.items() for x in ms.get("learned", {}).get("worst", [])),
                   key=lambda cx: -cx[1]["regret"])[:most]
    if not worst:
        return
    w = RichTable(title=f"worst {scored} choices of the learned model (top {len(worst)})")
    for c in ("configuration", "shape", "regret", "chose", "best"):
        w.add_column(c)
    for cfg, x in worst:
        w.add_row(cfg, x["shape"], f"{x['regret']:.3f}", escape(f"{x['chose']} {x['chose_us']:.1f} us"),
                  escape(f"{x['best']} {x['best_us']:.1f} us"))     # pipeline ids hold [tactic=...]: not markup
    out.print(w)


def _print_slower(configs: dict, most: int = 10) -> None:
    """The shapes where the learned choice lost to a rule's pick beyond the noise, each rule's worst first."""
    from ..analysis.evaluate import WORST  # imported by the evaluation that made `configs` already
    rows = [(r, cfg, x) for r in RULES for cfg, ms in configs.items()
            for x in ms.get("learned", {}).get(f"slower_shapes_vs_{r}", [])]
    if not rows:
        return
    w = RichTable(title="where the learned choice was slower than a rule's pick beyond the noise (each "
                        f"configuration's worst {WORST}, up to {most} per rule)")
    for c in ("rule", "configuration", "slower shapes", "shape", "slower by", "chose", "rule chose"):
        w.add_column(c)
    for r in RULES:
        mine = sorted((x for x in rows if x[0] == r), key=lambda x: -x[2]["slower_by"])[:most]
        for _, cfg, x in mine:
            n = configs[cfg]["learned"][f"slower_than_{r}"]
            chose, rule = f"{x['chose']} {x['chose_us']:.1f} us", f"{x['rule_chose']} {x['rule_us']:.1f} us"
            w.add_row(r, cfg, str(n), x["shape"], f"{x['slower_by']:.3f}x", escape(chose), escape(rule))
    out.print(w)


@app.command()
@friendly
def report(db: Db = None, device: AnalysedDev = None,
           out_dir: Annotated[Optional[str], typer.Option("--out", help="write PNG heatmaps and index.html here "
                                                                        "(needs the report extra: "
                                                                        "matplotlib)")] = None,
           rule: Annotated[str, typer.Option(help=f"with --out, the speedup maps' baseline: "
                                                  f"{' | '.join(RULES)}")] = DEFAULT_RULE):
    """Which pipeline wins where: a batch x kv_len map per phase and dtype configuration.

    Without --out: Markdown winner maps on stdout. Example: tuner report --device "NVIDIA H200" --out report/
    """
    require_db(db)
    if rule not in RULES:
        raise ValueError(f"--rule {rule!r} is unknown; use one of {', '.join(RULES)}")
    if out_dir is None:
        from ..analysis.report import winner_maps
        print(winner_maps(db, device))
        return
    _need_matplotlib("tuner report --out")
    _writable_dir("--out", out_dir)
    from ..analysis.plots import write_report

    def drawing(done: int, of: int, cfg: str) -> None:
        err.print(f"[{done + 1}/{of}] {escape(cfg)}", highlight=False)
    print(write_report(db, device, out_dir, progress=drawing, rule=rule))


def _need_matplotlib(what: str) -> None:
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        # the extra's spelling only works from a checkout; the package's own name works anywhere
        raise ValueError(f"{what} needs matplotlib: pip install 'matplotlib>=3.8' (switchyard's [report] "
                         "extra)") from None


def _writable_dir(option: str, path: str) -> None:
    from pathlib import Path
    try:
        Path(path).mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise ValueError(f"{option} {path}: cannot make that folder ({e.strerror}); name one you can write") from None
