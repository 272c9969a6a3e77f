"""Where a GPU check extension (``gpu_check_md.py``, ``gpu_check_mlip.py``) adds its checks.

Run through ``bench/gpu_check.py``, that script is the module ``__main__``: an extension appends to its
``CHECKS``, not to those of a second import of ``gpu_check``. Run on its own, an extension uses
``gpu_check``'s, or a stand-in with the same fields when that file is absent.
"""

from __future__ import annotations

import sys
from typing import Any


def registry() -> tuple[list[Any], type]:
    """``(CHECKS, CheckResult)`` for an extension module to use."""
    runner = sys.modules.get("__main__")
    if runner is not None and hasattr(runner, "EXTENSION_MODULES") and hasattr(runner, "CHECKS"):
        return runner.CHECKS, runner.CheckResult
    try:
        from gpu_check import CHECKS, CheckResult
    except ImportError:
        from dataclasses import dataclass

        @dataclass
        class CheckResult:  # type: ignore[no-redef]
            name: str
            status: str
            gpu_s: float | None = None
            cpu_s: float | None = None
            difference: str | None = None
            detail: str | None = None

        return [], CheckResult
    return CHECKS, CheckResult
