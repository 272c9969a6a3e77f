"""Which files tools may read: regular files under the allowed roots, of a bounded size, checked in one place.

Roots: the server's work directory (artifacts included), the directory the server was started in, and
the directories named in ``SPU_INPUT_ROOTS`` (``os.pathsep``-separated). A path is resolved (symlinks
followed) before the check, so a link that leaves the roots is refused; devices, FIFOs, sockets and
directories are refused, and so is anything under ``/proc``, ``/sys`` or ``/dev`` whatever the roots say
(a server started in ``/`` must still not read ``/proc/self/environ``). A file with more than one hard
link is refused too: a hard link under a root to a file outside every root looks like any other file once
resolved, so the link count is the only sign of it (``SPU_ALLOW_HARD_LINKS=1`` lets an operator allow them).
Every file is sized before a byte of it is read, against the cap of its kind (:data:`MAX_BYTES`, in
docs/server.md): a larger one is ``too_large``. Errors name the path, never the file's contents.

A tool declares a path argument with the annotated types below; pydantic runs the check when the
arguments are validated, in the core, before any tool code runs, and the tool receives the resolved
path (a string)::

    class Input(BaseModel):
        pdb_path: StructurePath | None = Field(None, description="PDB file")
        task_dir: InputDir = Field(..., description="task folder")

A tool that reads a file named some other way (a file reference inside a text argument) calls
:func:`readable_file` with the file's kind before reading it.

:func:`path_fields` lists a model's path-typed fields (the registry test walks every tool with it).
"""

from __future__ import annotations

import os
import stat
import typing
from pathlib import Path
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel

from tools_server.core import settings
from tools_server.core.errors import ToolError

#: Never readable, whatever the roots: kernel and device pseudo-filesystems.
SYSTEM_PREFIXES = (Path("/proc"), Path("/sys"), Path("/dev"))

#: The largest file of each kind a tool reads (bytes): ``file`` for any other input file.
MAX_BYTES = {
    "file": 64 * 2**20,
    "molecule": 50 * 2**20,  # SDF, MOL, MOL2, XYZ and PDB files of small molecules
    "structure": 100 * 2**20,  # PDB and mmCIF files of proteins and complexes
    "trajectory": 2 * 2**30,  # DCD and XTC trajectories
    "task": 16 * 2**20,  # each file of a task folder (contract, targets, prose)
    "submission": 2**20,  # a rankings.json draft (the submission limit)
}
#: Set to 1 to let tools read files that have more than one hard link.
ALLOW_HARD_LINKS_ENV = "SPU_ALLOW_HARD_LINKS"


def allowed_roots() -> list[Path]:
    roots = [settings.workdir(), Path.cwd()]
    roots += [Path(p) for p in os.environ.get("SPU_INPUT_ROOTS", "").split(os.pathsep) if p.strip()]
    return [r.expanduser().resolve() for r in roots]


def _resolved_under_roots(path: str | os.PathLike[str]) -> tuple[Path, Path]:
    """(as given, resolved) for a path that exists under an allowed root, else ``invalid_input``."""
    text = os.fspath(path)
    if not text.strip() or "\x00" in text:
        raise ToolError("invalid_input", "The path is empty or holds a NUL character.")
    given = Path(text).expanduser()
    try:
        resolved = given.resolve(strict=True)
    except (OSError, RuntimeError, ValueError):
        raise ToolError("invalid_input", f"No such file: {given}") from None
    if any(resolved == p or resolved.is_relative_to(p) for p in SYSTEM_PREFIXES):
        raise ToolError("invalid_input", f"{given} is a system file; tools do not read it")
    if not any(resolved == root or resolved.is_relative_to(root) for root in allowed_roots()):
        raise ToolError(
            "invalid_input",
            f"{given} is outside the directories tools may read",
            hint="Use a file under the server's work directory or the directory it was started in, "
            "or add its directory to SPU_INPUT_ROOTS (`spu config claude|codex --write --task-root DIR` "
            "records it for the client).",
        )
    return given, resolved


def readable_file(path: str | os.PathLike[str], *, kind: str = "file", max_bytes: int | None = None) -> Path:
    """The resolved path of a regular file under an allowed root, with one hard link (unless the operator
    allows more) and at most ``max_bytes`` (default: the cap of its ``kind``, :data:`MAX_BYTES`);
    else :class:`ToolError` ``invalid_input`` or ``too_large``. Nothing of the file is read."""
    given, resolved = _resolved_under_roots(path)
    try:
        st = resolved.stat()
    except OSError:
        raise ToolError("invalid_input", f"No such file: {given}") from None
    if not stat.S_ISREG(st.st_mode):
        raise ToolError("invalid_input", f"{given} is not a regular file")
    if st.st_nlink > 1 and os.environ.get(ALLOW_HARD_LINKS_ENV, "").strip() != "1":
        raise ToolError(
            "invalid_input",
            f"{given} has {st.st_nlink} hard links; tools read only files with one (a hard link can reach a "
            "file outside the directories tools may read)",
            hint="Copy the file (cp, not ln) into the work directory and pass the copy; an operator who "
            f"trusts the links can set {ALLOW_HARD_LINKS_ENV}=1.",
        )
    limit = MAX_BYTES[kind] if max_bytes is None else max_bytes
    if st.st_size > limit:
        raise ToolError(
            "too_large",
            f"{given} has {st.st_size} bytes; a {kind} file may have at most {_size_text(limit)}",
            hint="Pass a smaller file (fewer models, frames or records), or cut it down first.",
        )
    return resolved


def _size_text(n: int) -> str:
    return f"{n // 2**30} GiB" if n >= 2**30 and n % 2**30 == 0 else f"{n // 2**20} MiB"


def readable_dir(path: str | os.PathLike[str]) -> Path:
    """The resolved path of a directory under an allowed root, or :class:`ToolError` ``invalid_input``."""
    given, resolved = _resolved_under_roots(path)
    if not resolved.is_dir():
        raise ToolError("invalid_input", f"{given} is not a directory")
    return resolved


class PathKind:
    """Marks a path-typed field: ``kind`` is ``"file"`` or ``"dir"``; ``size_kind`` the file's cap
    (:data:`MAX_BYTES`)."""

    def __init__(self, kind: str, size_kind: str | None = None) -> None:
        self.kind = kind
        self.size_kind = size_kind

    def __repr__(self) -> str:
        return f"PathKind({self.kind!r}, {self.size_kind!r})"


def input_file(kind: str) -> Any:
    """The type of an argument naming a file of ``kind`` (a key of :data:`MAX_BYTES`): checked by
    :func:`readable_file`; the tool receives the resolved path."""
    if kind not in MAX_BYTES:
        raise ValueError(f"unknown file kind {kind!r} (known: {', '.join(MAX_BYTES)})")
    return Annotated[str, AfterValidator(lambda v: str(readable_file(v, kind=kind))), PathKind("file", kind)]


#: A readable regular file under the allowed roots (at most ``MAX_BYTES["file"]``).
InputPath = input_file("file")
#: A protein structure file (PDB, mmCIF).
StructurePath = input_file("structure")
#: A trajectory (DCD, XTC).
TrajectoryPath = input_file("trajectory")
#: A rankings.json draft.
SubmissionPath = input_file("submission")
#: A directory under the allowed roots; the tool receives its resolved path.
InputDir = Annotated[str, AfterValidator(lambda v: str(readable_dir(v))), PathKind("dir")]


def path_kind(annotation: Any) -> str | None:
    """``"file"`` or ``"dir"`` when ``annotation`` is (or optionally wraps) a path type, else None."""
    if typing.get_origin(annotation) is Annotated:
        for meta in typing.get_args(annotation)[1:]:
            if isinstance(meta, PathKind):
                return meta.kind
    for arg in typing.get_args(annotation):
        if (kind := path_kind(arg)) is not None:
            return kind
    return None


def path_fields(model: type[BaseModel]) -> dict[str, str]:
    """The model's path-typed fields (``name -> kind``), nested models included (``outer.inner``)."""
    out: dict[str, str] = {}
    for name, info in model.model_fields.items():
        annotated = Annotated[(info.annotation, *info.metadata)] if info.metadata else info.annotation
        if (kind := path_kind(annotated)) is not None:
            out[name] = kind
        for nested in _models_in(info.annotation):
            out.update({f"{name}.{k}": v for k, v in path_fields(nested).items()})
    return out


def _models_in(annotation: Any) -> list[type[BaseModel]]:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return [m for arg in typing.get_args(annotation) for m in _models_in(arg)]
