"""Readable summaries of a database: winner maps (batch x kv_len) per phase and dtype configuration."""
from __future__ import annotations

from collections import defaultdict

from .evaluate import config_of, load_table

SHORT = {"trtllm-xqa": "XQA", "fa2-tc": "TC", "fa2": "FA2", "fa3": "FA3", "cudnn": "cuDNN",
         "trtllm-fmha-v2": "FMHAv2", "torch-sdpa": "SDPA", "trtllm-gen": "GEN"}


def short(pipeline_id: str) -> str:
    kernel = pipeline_id.split("[")[0].split("+")[0]
    s = SHORT.get(kernel, kernel)
    if "+fused-out" in pipeline_id:
        s += "·f"
    return s


def winner_maps(db=None, device: str | None = None) -> str:
    """Markdown: for each configuration a grid of winning pipelines; decode rows are batch sizes and
    columns KV lengths (a mixed batch's: mean/longest), prefill rows are batch x new tokens and columns KV lengths."""
    from dispatcher.dispatch import Dispatcher
    table, dev = load_table(db, device)
    d = Dispatcher(table, dev)
    grids: dict[str, dict] = defaultdict(dict)
    for b in table.by_cell:
        row = f"b={b.batch_size}" if b.phase == "decode" else f"b={b.batch_size} q={b.q_len}"
        grids[config_of(b)][(b.batch_size, b.q_len, row, kv_column(b))] = short(d.choose(b).pipeline)
    legend = ", ".join(f"{v} = {k}" for k, v in SHORT.items())
    out = [f"Winners on {dev.name} ({legend}; '·f' = the kernel writes FP8 itself, fused out-quant)."]
    for cfg in sorted(grids):
        cells = grids[cfg]
        cols = sorted({k[3] for k in cells})
        rows = sorted({k[:3] for k in cells})
        out += ["", f"**{cfg}**", "", "| | " + " | ".join(kv_label(c) for c in cols) + " |",
                "|---" * (len(cols) + 1) + "|"]
        for r in rows:
            out.append(f"| {r[2]} | " + " | ".join(cells.get((*r, c), "") for c in cols) + " |")
    return "\n".join(out)


def kv_column(b) -> int | tuple[int, int]:
    """A map's column: the KV length, and a mixed batch's longest request beside its mean (several are measured
    per mean: one winner per column each)."""
    return b.kv_len if b.skew == 1 else (b.kv_len, b.max_kv_len)


def kv_label(col: int | tuple[int, int]) -> str:
    """1448 -> 1.41k (not a second 1k beside 1024); a mixed batch's column as mean/longest."""
    if isinstance(col, tuple):
        return "/".join(map(kv_label, col))
    return f"{col / 2**20:.3g}M" if col >= 2**20 else f"{col / 1024:.3g}k" if col >= 1024 else str(col)
