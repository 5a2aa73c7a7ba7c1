"""Which measurements a dispatcher reads: its own device's, and where that device has none of a shape
family, a twin GPU's (the same compute capability and SM count), said in every decision that uses them."""
from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from . import store
from .device import DeviceInfo, folded, named
from .predictor_config import PredictorConfig
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


# a family stays lent until this device has measured this share of the twin's cells of it (and at least
# PredictorConfig.k_nearest): an adaptive sweep at its default budget measures 27-64% of each shipped family
LENT_UNTIL = 0.25


def table_for(db: store.DbPath, device: DeviceInfo, timing_mode: str, borrow: bool = True,
              enough: int = PredictorConfig().k_nearest) -> Table:
    """`device`'s measurements; with `borrow`, in each shape family `device` has measured too few cells of
    (fewer than LENT_UNTIL of a twin's, twin_of, or than `enough`), the twin's cells beside its own (its own
    stand where both measured a cell): a few measured misses then correct the twin's family instead of
    replacing it, and a family swept here is read from this device alone. What was lent: `table.lent`."""
    own = read_table(db, device, timing_mode)
    twin = twin_of(db, device, timing_mode) if borrow else None
    if twin is None:
        return own
    other = read_table(db, twin, timing_mode)
    families = frozenset(f for f, cells in other.by_family.items()
                         if len(own.by_family.get(f, ())) < max(enough, LENT_UNTIL * len(cells)))
    lent = []
    for fam in families:
        for cell in other.by_family[fam]:
            if cell in own.by_cell:
                continue
            for t in other.timings(cell):
                own.add(cell, t)
            own.measured_at[cell] = other.measured_at.get(cell, cell)
            lent.append(cell)
    own.lent = Lent(twin, families, frozenset(lent)) if families else None
    return own


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
