"""Dependencies: the dispatchers (one per device, kept fresh in the background), the jobs."""
from __future__ import annotations

import re
import threading
from typing import Annotated

from fastapi import Depends, Request

from dispatcher import Dispatcher, load
from dispatcher.live import Live, keep_fresh
from dispatcher.resolve import default_timing_mode, device_of
from dispatcher.store import DbPath

from .jobs import JobManager

MAX_DEVICE_CHARS = 128
SPELLINGS_KEPT = 256        # device spellings remembered (each maps to one of the dispatchers)
_CUDA = re.compile(r"cuda:0*([0-9]{1,3})")
DeviceKey = tuple[str, int, str]     # device name, index, timing mode


def canonical_device(spec: str | None) -> str:
    """One spelling per device: 'CUDA:00' and 'cuda:0' are the same GPU; names are kept as given."""
    s = (spec or "auto").strip()
    if len(s) > MAX_DEVICE_CHARS:
        raise ValueError(f"device {s[:40]!r}... is {len(s)} characters; a device is auto, cpu, cuda[:N] or a "
                         "device name in the database")
    low = s.lower()
    if low in ("auto", "cpu", "cuda"):
        return low
    m = _CUDA.fullmatch(low)
    return f"cuda:{int(m.group(1))}" if m else s


class Dispatchers:
    """One dispatcher per device the requests name, each kept fresh by a background thread. Spellings
    are canonicalised and resolved to the device they name, so the count is bounded by the devices
    of this host and of the database, whatever the traffic."""

    def __init__(self, db: DbPath, default_device: str | None, refresh_s: float = 2.0):
        self.db, self.default_device, self.refresh_s = db, default_device, refresh_s
        self._by_device: dict[DeviceKey, Dispatcher] = {}
        self._spellings: dict[str, DeviceKey] = {}
        self._live: list[Live] = []
        self._lock = threading.Lock()   # only around a first load, never on a cached lookup

    def get(self, device: str | None) -> Dispatcher:
        spelling = device or self.default_device or "auto"
        key = self._spellings.get(spelling)
        if key is not None:
            return self._by_device[key]
        with self._lock:
            spec = canonical_device(spelling)
            dev = device_of(self.db, spec)                  # ValueError for a device nobody has
            key = (dev.name, dev.index, default_timing_mode(dev))
            if key not in self._by_device:
                d = load(self.db, spec, missing_ok=True)    # moved away while serving: /healthz says so
                self._live.append(keep_fresh(d, self.refresh_s))   # hot reload + miss flush
                self._by_device[key] = d
            if len(self._spellings) >= SPELLINGS_KEPT:
                self._spellings.clear()
            self._spellings[spelling] = key
            return self._by_device[key]

    def all(self) -> list[Dispatcher]:
        return list(self._by_device.values())

    def close(self) -> None:
        for live in self._live:
            live.stop()


def get_dispatchers(request: Request) -> Dispatchers:
    ds: Dispatchers = request.app.state.dispatchers
    return ds


def get_jobs(request: Request) -> JobManager:
    jobs: JobManager = request.app.state.jobs
    return jobs


DispatchersDep = Annotated[Dispatchers, Depends(get_dispatchers)]
JobsDep = Annotated[JobManager, Depends(get_jobs)]
