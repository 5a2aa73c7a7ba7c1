"""Which measurements a dispatcher reads: its own device's, and for a shape family that device has measured
too little of, a twin GPU's (the same compute capability and SM count), said in every decision that uses them."""
from __future__ import annotations

import math
import os
from collections.abc import Mapping
from typing import Any

from . import store
from .device import DeviceInfo, folded, named
from .predictor_config import PredictorConfig
from .problem import AttentionProblem
from .table import Lent, Table

ENV_BORROW = "SWITCHYARD_BORROW"


def borrowing(env: Mapping[str, str] = os.environ) -> bool:
    """$SWITCHYARD_BORROW: whether load() may read a twin GPU's measurements (unset: yes)."""
    value = env.get(ENV_BORROW, "").strip().lower()
    if value in ("", "1", "true", "yes", "on"):
        return True
    if value in ("0", "false", "no", "off"):
        return False
    raise ValueError(f"{ENV_BORROW}={env[ENV_BORROW]!r} is not a yes or no; set it to 0 to decide from this "
                     "device's own measurements alone, or unset it")


def twin_of(db: store.DbPath, device: DeviceInfo, timing_mode: str) -> DeviceInfo | None:
    """Another GPU `db` holds in `timing_mode` with `device`'s compute capability and SM count (the most
    measured one), whose measurements may stand in for `device`'s: at the same 2456 points the H200's winners
    cost an H100 0.03-0.24% (gm) against its own (benchmarks/results/h100-2026-12-06-grid/). None where no GPU
    matches."""
    if device.kind != "cuda" or not device.compute_capability or not device.sm_count:
        return None
    conn = store.open_readonly(db)
    if conn is None:
        return None
    try:
        cc = ".".join(map(str, device.compute_capability))
        envs = [e for e in store.environments(conn) if e["timing_mode"] == timing_mode and e["device_kind"] == "cuda"
                and e["compute_capability"] == cc and e["sm_count"] == device.sm_count
                and folded(e["device_name"]) != folded(device.name)]
        counts: dict[str, int] = {}
        for e in envs:      # by the name as recorded: read_rows reads one spelling
            n = conn.execute("select count(*) from measurements where status = 'ok' and env_id = ?", [e["id"]])
            counts[e["device_name"]] = counts.get(e["device_name"], 0) + n.fetchone()[0]
    finally:
        conn.close()
    name = max(sorted(counts), key=lambda n: counts[n], default=None)   # ties: the first name
    return named(name, device.compute_capability, device.sm_count) if name and counts[name] else None


# the share of a twin's cells of a family that need a cell of this device near them (within NEAR_OCTAVES in
# each of batch, q_len and mean KV: the prefill grid's steps are two octaves) before the family is this
# device's: the H100's full grid and its adaptive --mixed sweep cover all 32 shipped families
# (benchmarks/results/h100-2026-12-06-grid/); misses around one shape do not
COVERED = 0.9
NEAR_OCTAVES = 2


def spans(own: list[AttentionProblem], twin: list[AttentionProblem], enough: int) -> bool:
    """Whether this device's cells of a family can stand alone: at least `enough` of them, and a cell of
    them near nearly every one of the twin's (COVERED, NEAR_OCTAVES), so that the model reads this device
    everywhere the twin would have told it. A stray twin cell far out does not undo a sweep's coverage;
    misses measured where traffic was, however many and however far apart, do not cover the family."""
    if len(own) < enough:
        return False
    here = [_octaves(c) for c in own]
    near = sum(any(all(abs(a - b) <= NEAR_OCTAVES for a, b in zip(_octaves(c), o)) for o in here) for c in twin)
    return near >= COVERED * len(twin)


def _octaves(c: AttentionProblem) -> tuple[float, float, float]:
    return math.log2(c.batch_size), math.log2(c.q_len), math.log2(c.kv_len)


def table_for(db: store.DbPath, device: DeviceInfo, timing_mode: str, borrow: bool = True,
              enough: int = PredictorConfig().k_nearest) -> Table:
    """`device`'s measurements; with `borrow`, each shape family a twin (twin_of) has measured more cells of,
    and whose cells here do not span the twin's (spans), is read from the twin instead, this device's own
    cells of it answering for themselves only (`table.lent`): a family swept here is read from this device
    alone, and a few misses another GPU measured never take a family from a device that swept it."""
    own = read_table(db, device, timing_mode)
    twin = twin_of(db, device, timing_mode) if borrow else None
    if twin is None:
        return own
    other = read_table(db, twin, timing_mode)
    families = frozenset(f for f, cells in other.by_family.items() if len(cells) > len(own.by_family.get(f, ()))
                         and not spans(own.by_family.get(f, []), cells, enough))
    if not families:
        return own
    table = Table()
    for source, lent in ((own, False), (other, True)):
        for cell, timings in source.by_cell.items():
            if (cell.family() in families) == lent:
                for t in timings.values():
                    table.add(cell, t)
                table.measured_at[cell] = source.measured_at.get(cell, cell)
                if cell in source.alone:
                    table.alone.add(cell)
    mine = {c: dict(t) for c, t in own.by_cell.items() if c.family() in families}
    table.lent = Lent(twin, families, frozenset(c for c in table.by_cell if c.family() in families), mine,
                      {c: own.measured_at.get(c, c) for c in mine}, frozenset(other.page_sizes))
    return table


def held_elsewhere(db: store.DbPath, device: DeviceInfo, timing_mode: str) -> tuple[str, ...]:
    """The devices (and timing modes) `db` holds other than `device` in `timing_mode`: said when a
    dispatcher finds none of its own, since asking of another GPU's database is the likelier mistake."""
    conn = store.open_readonly(db)
    if conn is None:
        return ()
    try:
        envs = store.environments(conn)
    finally:
        conn.close()
    other = {(e["device_name"], e["timing_mode"]) for e in envs} - {(device.name, timing_mode)}
    return tuple(sorted(f"{n} ({m} mode)" if n == device.name else n for n, m in other))


def read_table(db: store.DbPath, device: DeviceInfo, timing_mode: str) -> Table:
    """The measurements of `device` in `timing_mode` (every environment of it, oldest first), by cell."""
    return Table.from_rows(read_rows(db, device, timing_mode))


def read_rows(db: store.DbPath, device: DeviceInfo, timing_mode: str) -> list[Any]:
    """The ok measurement rows of `device` in `timing_mode`, oldest environment first."""
    conn = store.open_readonly(db)
    if conn is None:
        return []
    try:
        envs = store.environments(conn)
        ids = [e["id"] for e in envs if e["device_name"] == device.name and e["timing_mode"] == timing_mode]
        return store.ok_measurements(conn, ids) if ids else []
    finally:
        conn.close()
