"""Writes that must not slow down a call: job records and cache entries.

A file write costs about as much as the rest of a trivial job's dispatch, and in the server process it
competes for the interpreter lock with the reply being sent. :class:`DeferredWrites` runs them on one
background thread, :data:`DELAY_S` after they are asked for, keeping only the newest write per key (a
short job's submission and result become one record).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

log = logging.getLogger(__name__)

#: How long the writer waits after a write is asked for before it runs (seconds).
DELAY_S = 0.05


class DeferredWrites:
    def __init__(self, name: str) -> None:
        self.name = name
        self._pending: dict[str, Callable[[], None]] = {}  # key -> its newest write, in order
        self._running = 0
        self._idle = False  # the thread waits for a notification (else it looks again by itself)
        self._cond = threading.Condition()
        self._thread: threading.Thread | None = None

    def add(self, key: str, write: Callable[[], None]) -> None:
        """Run ``write`` soon, unless another write for ``key`` is added first (only the newest runs)."""
        with self._cond:
            self._pending.pop(key, None)  # re-added at the end: writes run in the order last asked for
            self._pending[key] = write
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, daemon=True, name=self.name)
                self._thread.start()
            elif self._idle:
                self._cond.notify_all()

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._pending:
                    self._idle = True
                    self._cond.wait()
                self._idle = False
            time.sleep(DELAY_S)
            with self._cond:
                batch, self._pending = self._pending, {}
                self._running = len(batch)
            for key, write in batch.items():
                try:
                    write()
                except Exception:  # a lost record or cache entry costs a recomputation, not the server
                    log.warning("%s: the write for %s failed", self.name, key, exc_info=True)
            with self._cond:
                self._running = 0
                self._cond.notify_all()

    def discard(self, key: str) -> None:
        """Drop the pending write for ``key``: the caller has just written something newer itself."""
        with self._cond:
            if self._pending.pop(key, None) is not None:
                self._cond.notify_all()  # a flush may be waiting for this write

    def flush(self) -> None:
        """Wait until every write added so far has run."""
        with self._cond:
            while self._pending or self._running:
                self._cond.wait()
