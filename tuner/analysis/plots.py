"""`tuner report --out DIR`: PNG heatmaps over batch x kv_len per phase and dtype configuration
(the winning pipeline; the best pipeline's speedup over the built-in rule; the fused FP8-out gain)
and an index.html that embeds them with the environment and the numbers.
matplotlib is an optional extra (`pip install .[report]`): only this module imports it."""
from __future__ import annotations

import html
import math
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path

from dispatcher.policy import max_relerr
from dispatcher.registry import load_registry
from dispatcher.rules import DEFAULT_RULE, rule_pick
from dispatcher.store import default_path

from .evaluate import config_of, load_table
from .report import kv_column, kv_label, short

TITLES = {"winner": "fastest accurate pipeline (·f: fused FP8 out)",
          "speedup": "best pipeline vs the {rule} rule's pick",
          "fused": "fused FP8-out gain (best unfused / best fused)"}


def _axes(b):
    row = f"b={b.batch_size}" if b.phase == "decode" else f"b={b.batch_size} q={b.q_len}"
    return (b.batch_size, b.q_len, row), kv_column(b)


def collect(table, dev, rule: str = DEFAULT_RULE) -> dict[str, dict]:
    """Per configuration: {(row, kv): (winner, speedup over the rule, fused-out gain or None)}."""
    registry = load_registry()
    out: dict[str, dict] = defaultdict(dict)
    for b in table.by_cell:
        budget = max_relerr(b.kv_dtype, b.out_dtype)
        ok = {t.pipeline.id: t for t in table.timings(b) if t.relerr is None or t.relerr <= budget}
        if not ok:
            continue
        best = min(ok.values(), key=lambda t: (t.median_us, t.pipeline.id))
        pick = rule_pick(rule, b, dev, registry)[0]
        rule_t = ok.get(pick.id) if pick else None
        fused = [t.median_us for t in ok.values() if t.pipeline.fused_out_quant]
        unfused = [t.median_us for t in ok.values() if b.out_dtype == "fp8" and not t.pipeline.fused_out_quant]
        gain = min(unfused) / min(fused) if fused and unfused else None
        speedup = rule_t.median_us / best.median_us if rule_t else None
        out[config_of(b)][_axes(b)] = (short(best.pipeline.id), speedup, gain)
    return out


def _grid(cells: dict):
    rows = sorted({k[0] for k in cells})
    cols = sorted({k[1] for k in cells})
    return rows, cols


def heatmap(cells: dict, what: str, title: str, path: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.colors import ListedColormap
    rows, cols = _grid(cells)
    mixed = any(isinstance(c, tuple) for c in cols)
    fig, ax = plt.subplots(figsize=(1.0 + 0.62 * len(cols), 0.9 + 0.34 * len(rows)))
    if what == "winner":
        names = sorted({v[0] for v in cells.values()})
        cmap = ListedColormap(plt.get_cmap("tab10").colors[: max(1, len(names))])
        m = [[names.index(cells[(r, c)][0]) if (r, c) in cells else math.nan for c in cols] for r in rows]
        ax.imshow(m, cmap=cmap, vmin=-0.5, vmax=len(names) - 0.5, aspect="auto")
        labels = {(i, j): cells[(r, c)][0] for i, r in enumerate(rows) for j, c in enumerate(cols) if (r, c) in cells}
        handles = [plt.Rectangle((0, 0), 1, 1, color=cmap(i)) for i in range(len(names))]
        ax.legend(handles, names, loc="upper left", bbox_to_anchor=(1.01, 1), fontsize=7, frameon=False)
    else:
        k = 1 if what == "speedup" else 2
        m = [[cells[(r, c)][k] if (r, c) in cells and cells[(r, c)][k] else math.nan for c in cols] for r in rows]
        top = max(1.05, max((v for row in m for v in row if v == v), default=1.05))
        im = ax.imshow(m, cmap="viridis", vmin=1.0, vmax=top,
                       aspect="auto")
        fig.colorbar(im, ax=ax, fraction=0.04, pad=0.02, label="x faster")
        labels = {(i, j): f"{m[i][j]:.2f}" for i in range(len(rows)) for j in range(len(cols)) if m[i][j] == m[i][j]}
    for (i, j), s in labels.items():
        ax.text(j, i, s, ha="center", va="center", fontsize=6, color="white" if what == "winner" else "black")
    ax.set_xticks(range(len(cols)), [kv_label(c) for c in cols], fontsize=7, rotation=90 if mixed else 0)
    ax.set_yticks(range(len(rows)), [r[2] for r in rows], fontsize=7)
    ax.set_xlabel("kv_len: mean/longest request" if mixed else "kv_len")
    ax.set_title(title, fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def write_report(db, device: str | None, out_dir: str | Path,
                 progress: Callable[[int, int, str], None] | None = None, rule: str = DEFAULT_RULE) -> Path:
    """Writes the PNGs and index.html into out_dir; returns the page's path. `progress(done, of, configuration)`
    is called before each configuration's maps are drawn; speedups are over `rule`'s pick (dispatcher/rules.py)."""
    table, dev = load_table(db, device)
    data = collect(table, dev, rule)
    if not data:
        raise ValueError(f"no ok measurements for {dev.name} in {default_path(db)}; nothing to plot")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    parts = [f"<h1>Switchyard: {html.escape(dev.name)}</h1>",
             f"<p>SM {dev.sm}, {dev.sm_count} SMs, {dev.memory_bytes / 2**30:.0f} GiB; {len(table)} measured problem "
             f"sizes. Speedup: the fastest accurate pipeline vs the {rule} rule's pick, measured on the same "
             "shape. Fused FP8-out gain: best unfused (separate quant) over best fused pipeline.</p>"]
    for i, cfg in enumerate(sorted(data)):
        if progress:
            progress(i, len(data), cfg)
        cells = data[cfg]
        slug = cfg.replace(" ", "_").replace("/", "-").replace("=", "")
        sp = [v[1] for v in cells.values() if v[1]]
        gm = math.exp(sum(map(math.log, sp)) / len(sp)) if sp else float("nan")
        parts.append(f"<h2>{html.escape(cfg)}</h2><p>{len(cells)} shapes; speedup over {rule}: "
                     f"geometric mean {gm:.3f}x, max {max(sp, default=float('nan')):.3f}x</p>")
        for what in ("winner", "speedup", "fused"):
            if what == "fused" and not any(v[2] for v in cells.values()):
                continue
            name = f"{slug}-{what}.png"
            heatmap(cells, what, f"{cfg}: {TITLES[what].format(rule=rule)}", out / name)
            parts.append(f'<img src="{name}" alt="{html.escape(cfg)} {what}">')
    page = out / "index.html"
    page.write_text("<!doctype html><meta charset='utf-8'><title>Switchyard report</title>"
                    "<style>body{font-family:sans-serif;max-width:1100px;margin:auto}img{max-width:100%}</style>"
                    + "\n".join(parts))
    return page
