"""A domain: what one folder of tools declares to the server.

Every domain, the project's own (``tools_server/chem``, ``qc``, ``web`` …) and any third-party package's,
declares one :class:`Domain` and names it in the ``spu.tools`` entry-point group::

    # my_package/__init__.py
    DOMAIN = Domain(
        name="mydomain",
        tool_modules=("my_package.tools",),
        engines=(Engine("mylib", "mylib"),),
        doctor_checks=(DoctorCheck("mylib", "MyLib (what it computes)", CHECK_CODE, "pip install mylib"),),
        error_codes={"mylib_refused": "What the model should do when it sees this code."},
    )

    # pyproject.toml
    [project.entry-points."spu.tools"]
    mydomain = "my_package:DOMAIN"

The server imports the tool modules (each ``@tool`` function in them becomes an MCP tool), reports the
engines in ``system_info`` and provenance, runs the doctor checks in ``spu doctor`` and accepts the error
codes in :class:`~tools_server.core.errors.ToolError`. The domain's ``__init__`` must stay cheap to import:
engines are imported inside the tool functions, which run in worker processes.
"""

from __future__ import annotations

import functools
import importlib.util
from collections.abc import Mapping
from dataclasses import dataclass, field
from importlib import metadata

from tools_server.core.errors import register_error_codes


@functools.cache
def distribution_version(dist: str) -> str | None:
    """An installed distribution's version, read once per process (reading package metadata costs about
    a millisecond, more than the rest of a small job's bookkeeping)."""
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


@functools.cache
def _import_names() -> Mapping[str, list[str]]:
    """Import name -> the distributions providing it (a scan of every installed package: read once)."""
    return metadata.packages_distributions()


@functools.cache
def installed_version(name: str) -> str | None:
    """The installed version of what ``name`` names: a distribution (``fair-esm``), an import name
    (``numpy``, ``Bio``) or a submodule (``scipy.constants``); None when nothing installed provides it."""
    top = name.split(".")[0]
    for candidate in (name, top):
        found = distribution_version(candidate)
        if found is not None:
            return found
    if not top.isidentifier():
        return None
    for dist in _import_names().get(top, ()):
        found = distribution_version(dist)
        if found is not None:
            return found
    return None


@dataclass(frozen=True)
class Engine:
    """A package a domain's tools compute with: its import name and the distribution(s) that can provide it.

    ``distributions`` lists alternatives in order (gpu4pyscf ships as ``gpu4pyscf-cuda12x`` or
    ``gpu4pyscf-cuda13x``); the first one installed gives the version.
    """

    module: str
    distributions: str | tuple[str, ...]

    @property
    def names(self) -> tuple[str, ...]:
        return (self.distributions,) if isinstance(self.distributions, str) else self.distributions

    def version(self) -> str | None:
        """The installed version, read from package metadata without importing the engine."""
        for dist in self.names:
            found = distribution_version(dist)
            if found is not None:
                return found
        return None

    def importable(self) -> bool:
        if "." in self.module:  # finding a submodule would import its parent package
            return self.version() is not None
        try:
            return importlib.util.find_spec(self.module) is not None
        except (ImportError, ValueError):
            return False


@dataclass(frozen=True)
class DoctorCheck:
    """One ``spu doctor`` check: Python code run in a fresh interpreter that does a tiny real computation,
    compares it with a known value and calls ``report(version=..., detail=..., **facts)``.

    ``profile``: ``core`` (always required), ``all`` (required under ``spu doctor --profile all``) or
    ``optional`` (a warning when it fails). ``gpu_only`` checks are skipped without a GPU and required with
    one.
    """

    name: str
    what: str
    code: str
    fix: str
    profile: str = "all"
    gpu_only: bool = False
    timeout_s: float | None = None


@dataclass(frozen=True)
class Domain:
    """What a folder of tools declares: its tool modules, engines, doctor checks and error codes.

    Creating a Domain registers its error codes, so a worker that imports a tool module (whose package
    ``__init__`` defines the Domain) knows them too.
    """

    name: str
    tool_modules: tuple[str, ...]
    engines: tuple[Engine, ...] = ()
    doctor_checks: tuple[DoctorCheck, ...] = ()
    error_codes: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        register_error_codes(self.error_codes, owner=self.name)
