"""Keeping a serving-side dispatcher current, off the hot path: a background thread that flushes
miss counts to the store and reloads the table when the database changed (hot reload).

    d = load("heuristics.db")
    live = keep_fresh(d, every_s=5)      # returns a Live; live.stop() flushes and ends it
"""
from __future__ import annotations

import atexit
import threading

from . import store
from .dispatch import Dispatcher
from .measurements import held_elsewhere, table_for


class Live:
    def __init__(self, d: Dispatcher, every_s: float = 5.0, record_misses: bool = True):
        self.d, self.every_s, self.record_misses = d, every_s, record_misses
        self._sig = store.signature(d.db)
        self._content = store.content_version(d.db)
        self._stop = threading.Event()
        self.reloads = 0
        self._thread = threading.Thread(target=self._run, name="switchyard-live", daemon=True)
        self._thread.start()
        atexit.register(self.stop)

    def _run(self) -> None:
        while not self._stop.wait(self.every_s):
            self.tick()

    def tick(self) -> bool:
        """One round: flush misses, reload if the database changed. Returns True when it reloaded."""
        reloaded = False
        try:
            sig = store.signature(self.d.db)
            if sig != self._sig:                       # cheap: two stat calls
                self._sig = sig
                content = store.content_version(self.d.db)
                if content != self._content:           # measurements changed, not just misses
                    table = table_for(self.d.db, self.d.device, self.d.timing_mode, self.d.borrow,
                                      self.d.predictor.config.k_nearest)
                    self.d.elsewhere = held_elsewhere(self.d.db, self.d.device, self.d.timing_mode) if not table else ()
                    self.d.swap_table(table)
                    self._content = content
                    self.reloads += 1
                    reloaded = True
            if self.record_misses:
                self.flush()
        except Exception:  # noqa: BLE001 (a locked or missing database is retried next round)
            pass
        return reloaded

    def flush(self) -> None:
        counts = self.d.take_misses()
        if counts:
            store.add_misses(self.d.db, self.d.device.name, self.d.timing_mode, counts)

    def stop(self) -> None:
        if not self._stop.is_set():
            self._stop.set()
            try:
                if self.record_misses:
                    self.flush()
            except Exception:  # noqa: BLE001
                pass


def keep_fresh(d: Dispatcher, every_s: float = 5.0, record_misses: bool = True) -> Live:
    if d.db is None:
        raise ValueError("this dispatcher was not loaded from a database; use dispatcher.load(db)")
    return Live(d, every_s, record_misses)
