"""tuner export and tuner import: measurements between hosts, decisions as per-device JSON."""
from __future__ import annotations

from typing import Annotated, Optional

import typer

from .app import Db, app, friendly, out, require_db, written_db

RecordedDev = Annotated[Optional[str], typer.Option("--device", help="a device name as the database records it "
                                                                      "(tuner show lists them; default: every one)")]


@app.command("export")
@friendly
def export_(out_path: Annotated[str, typer.Option("--out", help="file (jsonl) or directory (vllm-json)")],
            format: Annotated[str, typer.Option("--format", help="jsonl | vllm-json")] = "jsonl",
            db: Db = None, device: RecordedDev = None):
    """Export measurements (jsonl, to merge on another host) or per-device decisions (vllm-json: for each
    device, {configuration: {"batch_size,q_len,kv_len,max_kv_len,kv_balance": decision}} of every measured cell,
    for serving code that reads a table instead of importing the dispatcher)."""
    require_db(db)
    from pathlib import Path

    from ..transfer import export_jsonl, export_vllm_json
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
            format: Annotated[str, typer.Option("--format", help="jsonl")] = "jsonl", db: Db = None,
            as_grid: Annotated[bool, typer.Option("--as-grid", help="store shapes measured alone (tuner sweep "
                                                  "--problems) as grid points: the estimators read them, as a "
                                                  "tile set joins a table")] = False):
    """Merge measurements from another host into this database (by environment)."""
    from pathlib import Path

    from ..transfer import import_jsonl
    if format != "jsonl":
        raise ValueError(f"--format {format!r} is not supported for import; use jsonl")
    from dispatcher.store import default_path
    new_db = "" if default_path(db).exists() else " (a new database: check --db if you meant to merge into one)"
    r = import_jsonl(written_db(db, "tuner import"), Path(path), as_grid=as_grid)
    kept = f"; kept {r['kept_newer']} stored measurements newer than the file's" if r["kept_newer"] else ""
    if r["kept_measured"]:
        kept += f"; kept {r['kept_measured']} stored measurements where the file's pipeline was screened out"
    out.print(f"merged {r['problems']} problems in {r['environments']} environment(s) into {default_path(db)}{new_db}: "
              f"{r['new']} new measurements, {r['replaced']} already there (the file's copy kept){kept}"
              f"{'; imported as grid points' if as_grid else ''}",
              soft_wrap=True)


