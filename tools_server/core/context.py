"""What a running tool can ask of the server: progress, artifacts, warnings, engine and device facts."""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tools_server.core import settings

ProgressSink = Callable[[float, str | None], None]


class ToolContext:
    """Passed as the second argument to a tool that declares one.

    ``progress(fraction, message)`` reports progress in [0, 1]; ``artifact(filename)`` gives a path under
    the work directory to write a file the result refers to; ``warn(text)`` adds a quality warning
    (SCF not converged, imaginary modes, energy drift); ``set_engine(name, version, device)`` fills the
    provenance. ``threads`` is how many threads a tool that parallelises internally may use;
    ``memory_limit_mb`` and ``time_limit_s`` are what the job may use before it is stopped (None when
    unknown), for cost checks made before launching something big.
    """

    def __init__(
        self,
        tool: str,
        job_id: str,
        *,
        progress_sink: ProgressSink | None = None,
        threads: int = 1,
        gpu: bool = False,
        memory_limit_mb: int | None = None,
        time_limit_s: float | None = None,
    ) -> None:
        self.tool = tool
        self.job_id = job_id
        self.threads = threads
        self.gpu_available = gpu
        self.memory_limit_mb = memory_limit_mb
        self.time_limit_s = time_limit_s
        self.warnings: list[str] = []
        self.engine: dict[str, Any] = {}
        self._progress_sink = progress_sink
        self._artifact_dir: Path | None = None

    def progress(self, fraction: float, message: str | None = None) -> None:
        if self._progress_sink is not None:
            self._progress_sink(max(0.0, min(1.0, float(fraction))), message)

    def warn(self, text: str) -> None:
        self.warnings.append(text)

    def set_engine(
        self, name: str, version: str | None = None, device: str | None = None, **extra: Any
    ) -> None:
        """Name the engine that computed the result for its provenance. Without ``version``, the installed
        version of the distribution ``name`` names (a distribution, import or submodule name) is used."""
        if version is None:
            from tools_server.core.domain import installed_version

            version = installed_version(name)
        self.engine.update({"engine": name, "engine_version": version, **extra})
        if device is not None:
            self.engine["device"] = device

    @property
    def artifact_dir(self) -> Path:
        """The job's artifact folder (created)."""
        if self._artifact_dir is None:
            self._artifact_dir = self.artifact_path
            self._artifact_dir.mkdir(parents=True, exist_ok=True)
        return self._artifact_dir

    @property
    def artifact_path(self) -> Path:
        """The job's artifact folder, not created: for a tool that often writes nothing (it creates the
        folder when it writes)."""
        return artifact_dir_for(self.tool, self.job_id)

    def artifact(self, filename: str) -> Path:
        """A path for an output file; the name must be a plain file name."""
        if os.path.basename(filename) != filename or filename in ("", ".", ".."):
            raise ValueError(f"artifact name must be a plain file name, not {filename!r}")
        return self.artifact_dir / filename


def artifact_dir_for(tool: str, job_id: str) -> Path:
    """The folder a job's artifacts go to: ``$SPU_WORKDIR/artifacts/<tool>/<job id>`` (not created)."""
    return settings.artifacts_dir(create=False) / tool / re.sub(r"[^A-Za-z0-9_.-]", "_", job_id)
