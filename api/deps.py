"""Dependencies: the dispatchers, one per device asked for, loaded once per process."""
from __future__ import annotations

import threading
from typing import Annotated

from fastapi import Depends, Request

from dispatcher import Dispatcher, load


class Dispatchers:
    def __init__(self, db, default_device: str | None):
        self.db, self.default_device = db, default_device
        self._by_device: dict[str, Dispatcher] = {}
        self._lock = threading.Lock()   # only around a first load, never on a cached lookup

    def get(self, device: str | None) -> Dispatcher:
        key = device or self.default_device or "auto"
        d = self._by_device.get(key)
        if d is None:
            with self._lock:
                d = self._by_device.get(key) or load(self.db, key)
                self._by_device[key] = d
        return d


def get_dispatchers(request: Request) -> Dispatchers:
    return request.app.state.dispatchers


DispatchersDep = Annotated[Dispatchers, Depends(get_dispatchers)]
