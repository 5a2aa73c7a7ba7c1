"""Copy a SQLite database another process is writing, consistently (SQLite's backup API, WAL included), to DST
atomically: a device call cut short by its time limit still returns every row finished before the last copy.
usage: python benchmarks/snapshot_db.py SRC DST [--every SECONDS]   (with --every: again and again until killed)"""
from __future__ import annotations

import argparse
import os
import sqlite3
import time
from pathlib import Path


def snapshot(src: Path, dst: Path) -> bool:
    """src copied to dst (through dst.part, then renamed: dst is never half written); False where src is not there
    yet. A plain copy of src's file would miss the rows still in its write-ahead log."""
    if not src.exists():
        return False
    part = dst.with_name(dst.name + ".part")
    part.unlink(missing_ok=True)
    s, d = sqlite3.connect(f"file:{src}?mode=ro", uri=True), sqlite3.connect(part)
    try:
        s.backup(d)
    finally:
        s.close()
        d.close()
    os.replace(part, dst)
    return True


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("src", type=Path)
    ap.add_argument("dst", type=Path)
    ap.add_argument("--every", type=float, default=0, help="seconds between copies (0: once)")
    a = ap.parse_args()
    while True:
        try:
            snapshot(a.src, a.dst)
        except sqlite3.Error as e:          # busy or mid-schema: the next round copies it
            print(f"snapshot of {a.src} skipped: {e}", flush=True)
        if not a.every:
            return
        time.sleep(a.every)


if __name__ == "__main__":
    main()
