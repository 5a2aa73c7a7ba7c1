"""`tuner evaluate --plot DIR`: where the learned decisions lose, as pictures (hundreds of off-grid shapes
read badly as a table). Writes regret.png (the share of shapes within each regret, for the learned
decision beside each rule's pick), one scatter per configuration (each scored shape at its sizes,
coloured by the learned decision's regret, the worst labelled), evaluation.json (every scored shape)
and an index.html embedding them with the numbers. matplotlib is the report extra, as for tuner report."""
from __future__ import annotations

import html
import json
import math
from pathlib import Path
from typing import Any

from dispatcher.rules import RULES

from .evaluate import geomean

FLOOR_PCT = 0.1    # regret curves start here: within 0.1% of the fastest is a tie (the harness repeats to 0.08%)
LABELLED = 1.05     # shapes whose learned decision is this much slower than the best get their regret written


def _plt():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def regret_curves(res: dict[str, Any]) -> dict[str, list[float]]:
    """Every scored shape's regret, pooled over configurations: per method, and per rule (its pick's
    time over the best, on the shapes the learned method scored)."""
    curves: dict[str, list[float]] = {}
    for ms in res["configs"].values():
        for m, v in ms.items():
            curves.setdefault(m, []).extend(s["regret"] for s in v.get("shapes", []))
        for s in ms.get("learned", {}).get("shapes", []):
            for r, x in s["rules"].items():
                curves.setdefault(f"rule {r}", []).append(x)
    return {k: sorted(v) for k, v in curves.items() if v}


def plot_regret(curves: dict[str, list[float]], title: str, path: Path) -> None:
    """The share of shapes within x% of the fastest pipeline (log x: a 1% miss and a 2x one both show)."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=(7.5, 4.2))
    top = FLOOR_PCT
    for name, xs in curves.items():
        pct = [max(FLOOR_PCT, 100 * (x - 1)) for x in xs]
        ax.step(pct, [(i + 1) / len(xs) for i in range(len(xs))], where="post",
                label=f"{name} (gm {geomean(xs):.3f}, n={len(xs)})", linestyle="--" if name.startswith("rule") else "-")
        top = max(top, pct[-1])
    ax.set_xscale("log")
    ax.set_xlim(FLOOR_PCT, max(10.0, top * 1.2))
    ticks = [t for t in (0.1, 0.5, 1, 2, 5, 10, 20, 50, 100, 200, 500, 1000) if t <= max(10.0, top * 1.2)]
    ax.set_xticks(ticks, [f"{t:g}%" for t in ticks])
    ax.set_xlabel(f"slower than the fastest accurate pipeline on the shape (log; {FLOOR_PCT:g}% or less at the left)")
    ax.set_ylabel("share of shapes within it")
    ax.set_ylim(0, 1.02)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="lower right")
    ax.set_title(title, fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _axes(s: dict[str, Any], mixed: bool) -> tuple[float, float]:
    if s["phase"] == "prefill":
        return s["batch_size"] * s["q_len"], s["kv_len"]
    return s["batch_size"], (s["max_kv_len"] / s["kv_len"] if mixed else s["kv_len"])


AXES = {"decode": ("batch_size", "kv_len (mean per request)"),
        "mixed": ("batch_size", "longest request / mean"),
        "prefill": ("new tokens (batch_size x q_len)", "kv_len")}


def plot_config(cfg: str, shapes: list[dict[str, Any]], path: Path) -> None:
    """Each shape at its sizes (log axes), coloured by the learned decision's regret."""
    plt = _plt()
    kind = "prefill" if cfg.startswith("prefill") else "mixed" if cfg.endswith("mixed") else "decode"
    pts = [(*_axes(s, kind == "mixed"), s["regret"]) for s in shapes]
    fig, ax = plt.subplots(figsize=(7.0, 4.6))
    worst = max(r for _, _, r in pts)
    top = max(1.1, worst)       # the colour scale spans at least 1.0-1.1
    sc = ax.scatter([p[0] for p in pts], [p[1] for p in pts], c=[p[2] for p in pts], cmap="viridis_r",
                    vmin=1.0, vmax=top, s=[14 + 60 * min(1.0, (r - 1) / 0.2) for _, _, r in pts], edgecolors="k",
                    linewidths=0.3)
    for x, y, r in pts:
        if r >= LABELLED:
            ax.annotate(f"{r:.2f}", (x, y), fontsize=6, xytext=(3, 3), textcoords="offset points")
    for axis, vals in ((ax.xaxis, [p[0] for p in pts]), (ax.yaxis, [p[1] for p in pts])):
        _log_ticks(ax, axis, min(vals), max(vals))
    ax.set_xlabel(AXES[kind][0])
    ax.set_ylabel(AXES[kind][1])
    fig.colorbar(sc, ax=ax, fraction=0.04, pad=0.02, label="regret of the learned decision")
    ax.set_title(f"{cfg}: {len(pts)} shapes, regret gm {geomean([p[2] for p in pts]):.3f}, max {worst:.3f}", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _log_ticks(ax, axis, lo: float, hi: float) -> None:
    """A log axis labelled at 1, 2, 5 x 10^k in plain numbers (not 2 x 10^1)."""
    from matplotlib.ticker import NullFormatter
    (ax.set_xscale if axis is ax.xaxis else ax.set_yscale)("log")
    ticks = [m * 10 ** k for k in range(math.floor(math.log10(lo)), math.ceil(math.log10(hi)) + 1) for m in (1, 2, 5)]
    inside = [t for t in ticks if lo / 1.5 <= t <= hi * 1.5] or [lo, hi]
    axis.set_ticks(inside, [f"{t:g}" for t in inside])
    axis.set_minor_formatter(NullFormatter())


def write_evaluation(res: dict[str, Any], title: str, out_dir: str | Path) -> Path:
    """Writes the PNGs, evaluation.json and index.html into out_dir; returns the page's path."""
    curves = regret_curves(res)
    if not curves:
        raise ValueError("no shape was scored; nothing to plot")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / "evaluation.json").write_text(json.dumps(res, indent=1))
    plot_regret(curves, title, out / "regret.png")
    parts = [f"<h1>{html.escape(title)}</h1>",
             "<p>Regret: the chosen pipeline's measured time over the fastest accurate pipeline's on the same "
             "shape. Every scored shape is in <a href='evaluation.json'>evaluation.json</a>.</p>",
             '<img src="regret.png" alt="regret of each method and rule">']
    for cfg, ms in res["configs"].items():
        v = ms.get("learned")
        if not v or not v.get("shapes"):
            continue
        slug = cfg.replace(" ", "_").replace("/", "-").replace("=", "")
        plot_config(cfg, v["shapes"], out / f"{slug}.png")
        vs = ", ".join(f"{v[f'speedup_vs_{r}']:.3f}x over {r}" for r in RULES)
        parts.append(f"<h2>{html.escape(cfg)}</h2><p>{v['n']} shapes; learned regret gm {v['regret_geomean']:.4f}, "
                     f"max {v['regret_max']:.3f}; {html.escape(vs)}</p>"
                     f'<img src="{slug}.png" alt="{html.escape(cfg)}">')
    page = out / "index.html"
    page.write_text("<!doctype html><meta charset='utf-8'><title>Switchyard evaluation</title>"
                    "<style>body{font-family:sans-serif;max-width:1000px;margin:auto}img{max-width:100%}</style>"
                    + "\n".join(parts))
    return page
