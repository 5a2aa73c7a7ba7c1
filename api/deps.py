"""Dependencies: the dispatchers (one per device asked for, kept fresh in the background), the jobs."""
from __future__ import annotations

import threading
from typing import Annotated

from fastapi import Depends, Request

from dispatcher import Dispatcher, load
from dispatcher.live import Live, keep_fresh

from .jobs import JobManager


class Dispatchers:
    def __init__(self, db, default_device: str | None, refresh_s: float = 2.0):
        self.db, self.default_device, self.refresh_s = db, default_device, refresh_s
        self._by_device: dict[str, Dispatcher] = {}
        self._live: list[Live] = []
        self._lock = threading.Lock()   # only around a first load, never on a cached lookup

    def get(self, device: str | None) -> Dispatcher:
        key = device or self.default_device or "auto"
        d = self._by_device.get(key)
        if d is None:
            with self._lock:
                d = self._by_device.get(key)
                if d is None:
                    d = load(self.db, key)
                    self._live.append(keep_fresh(d, self.refresh_s))   # hot reload + miss flush
                    self._by_device[key] = d
        return d

    def all(self) -> list[Dispatcher]:
        return list(self._by_device.values())

    def close(self) -> None:
        for live in self._live:
            live.stop()


def get_dispatchers(request: Request) -> Dispatchers:
    return request.app.state.dispatchers


def get_jobs(request: Request) -> JobManager:
    return request.app.state.jobs


DispatchersDep = Annotated[Dispatchers, Depends(get_dispatchers)]
JobsDep = Annotated[JobManager, Depends(get_jobs)]
