"""Which device a name means: this host's (auto, cpu, cuda[:N]) or one recorded in a database."""
from __future__ import annotations

import dataclasses
from typing import Any, Literal

from . import store
from .device import KNOWN, DeviceInfo, describe, folded, named

LOCAL = ("auto", "cpu", "cuda")
TimingMode = Literal["graph", "eager", "wall"]     # the timer a table was measured with (tuner/timing/)


def default_timing_mode(device: DeviceInfo) -> TimingMode:
    return "graph" if device.kind == "cuda" else "wall"


def is_local(device: str | None) -> bool:
    """auto, cpu, cuda or cuda:N: this host's device, not a name in a database."""
    spec = (device or "auto").lower()
    return spec in LOCAL or spec.startswith("cuda:")


def resolve_device(device: str | None, envs: list[dict[str, Any]]) -> DeviceInfo:
    """None/"auto"/"cpu"/"cuda[:N]": this host's device; anything else a device name in the database."""
    spec = (device or "auto")
    if is_local(spec):
        return describe(spec)
    rows = [e for e in envs if e["device_name"] == spec]
    if not rows:                          # "nvidia  h200" is NVIDIA H200: as recorded, in any case and spacing
        rows = [e for e in envs if folded(e["device_name"]) == folded(spec)]
    if not rows:
        known = {folded(k): v for k, v in KNOWN.items()}.get(folded(spec))
        if known is not None and any(_twins(known, e) for e in envs):
            return known            # asked as that GPU would ask: its twin's measurements answer, and say so
        names = sorted({e["device_name"] for e in envs})
        twinned = [k for k, d in KNOWN.items() if k not in names and any(_twins(d, e) for e in envs)]
        hint = (f" ({known.name} could be asked about with a GPU of SM{known.sm} and {known.sm_count} SMs measured "
                "here)" if known else f"; or a GPU whose twin it holds: {', '.join(twinned)}" if twinned else "")
        raise ValueError(f"device {spec!r} is not in the database; it holds: "
                         f"{', '.join(names) if names else 'no environments yet (run tuner sweep)'}{hint}")
    cc = rows[-1]["compute_capability"]
    major, _, minor = (cc or "").partition(".")
    cc_t = (int(major), int(minor or 0)) if major else None
    return dataclasses.replace(named(rows[-1]["device_name"], cc_t, rows[-1]["sm_count"] or 0),
                               memory_bytes=rows[-1].get("memory_bytes") or 0)


def device_of(db: store.DbPath, device: str | None) -> DeviceInfo:
    """The device `device` names (see resolve_device), without loading its table."""
    conn = store.open_readonly(db)
    try:
        return resolve_device(device, store.environments(conn) if conn else [])
    except ValueError:
        known = {folded(k): v for k, v in KNOWN.items()}
        if conn is None and folded(device or "") in known:    # load(missing_ok=True): the rule until it appears
            return known[folded(device or "")]
        if conn is None and not is_local(device):      # the likelier mistake: a path that names no file
            raise ValueError(f"{store.default_path(db)} does not exist, so device {device!r} has no measurements "
                             f"and no description here (only {', '.join(KNOWN)} have one without a database); "
                             "give the path of a heuristics.db (or run tuner sweep), or this host's device") from None
        raise
    finally:
        if conn:
            conn.close()


def _twins(d: DeviceInfo, env: dict[str, Any]) -> bool:
    """Whether a recorded environment is of a GPU with d's compute capability and SM count."""
    cc = d.compute_capability
    return cc is not None and env["compute_capability"] == f"{cc[0]}.{cc[1]}" and env["sm_count"] == d.sm_count
