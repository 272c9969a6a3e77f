"""The ``mounts`` fixture: real disk faults (:mod:`disk_faults`), made as root and removed after the test."""

from __future__ import annotations

import os

import pytest
from disk_faults import Mounts


@pytest.fixture
def mounts():
    if os.geteuid() != 0:
        pytest.skip("needs root to mount a tmpfs and a read-only bind mount (CI runs the suite as root)")
    made = Mounts()
    try:
        yield made
    finally:
        made.undo()
