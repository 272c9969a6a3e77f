"""The deferred writer behind job records and cache entries (tools_server/core/deferred.py)."""

from __future__ import annotations

import time

from tools_server.core.deferred import DELAY_S, DeferredWrites


def test_only_the_newest_write_per_key_runs_and_flush_waits_for_it():
    ran: list[str] = []
    writes = DeferredWrites("test-writes")
    started = time.monotonic()
    for version in ("v1", "v2", "v3"):
        writes.add("job-a", lambda v=version: ran.append(f"a:{v}"))
    writes.add("job-b", lambda: ran.append("b"))
    assert ran == []  # nothing on the caller's path
    writes.flush()
    assert time.monotonic() - started >= DELAY_S
    assert ran == ["a:v3", "b"]
    writes.add("job-a", lambda: ran.append("a:v4"))  # the thread, idle now, wakes for a new write
    writes.flush()
    assert ran == ["a:v3", "b", "a:v4"]


def test_a_failing_write_does_not_stop_the_others():
    ran: list[str] = []
    writes = DeferredWrites("test-writes")

    def broken() -> None:
        raise OSError("disk full")

    writes.add("bad", broken)
    writes.add("good", lambda: ran.append("good"))
    writes.flush()
    assert ran == ["good"]
