"""The task contract's old name: it is :mod:`spu_common.task` now, shared by the tool server and the
benchmark side. Code written against ``environment.task`` keeps working, with a DeprecationWarning."""

from __future__ import annotations

import warnings
from typing import Any

import spu_common.task as _task


def __getattr__(name: str) -> Any:
    value = getattr(_task, name)  # an AttributeError names spu_common.task, where the name would be
    warnings.warn(
        f"environment.task.{name} is spu_common.task.{name}; import it from there",
        DeprecationWarning,
        stacklevel=2,
    )
    return value
