"""Which files tools may read, and how: every file is opened once below an allowed root without following a
link, checked on its descriptor, and read from that descriptor (:mod:`spu_common.confined`).

Roots: the server's work directory (artifacts included), the directory the server was started in, and
the directories named in ``SPU_INPUT_ROOTS`` (``os.pathsep``-separated). Below a root no symbolic link is
followed, in any component, whether it points in or out; ``..`` may not climb above the root. FIFOs,
sockets, devices and directories are refused, and so is anything under ``/proc``, ``/sys`` or ``/dev``
whatever the roots say (a server started in ``/`` must still not read ``/proc/self/environ``). A file with
more than one hard link is refused too: a hard link under a root to a file outside every root looks like
any other file, so the link count is the only sign of it (``SPU_ALLOW_HARD_LINKS=1`` lets an operator allow
them). Every file is sized on its descriptor before a byte of it is read, against the cap of its kind
(:data:`MAX_BYTES`, in docs/server.md): a larger one is ``too_large``. Errors name the path, never the
file's contents.

A tool declares a path argument with the annotated types below; pydantic runs the check when the
arguments are validated, in the core, before any tool code runs (so a bad path is refused before a job is
queued), and the tool receives the path below its root (a string)::

    class Input(BaseModel):
        pdb_path: StructurePath | None = Field(None, description="PDB file")
        task_dir: InputDir = Field(..., description="task folder")

The check does not hand a file over: whoever reads the file reads it with :func:`read_input` (its bytes,
from a descriptor opened and checked then) or :func:`private_copy` (a copy for an engine that wants a
file name), never by opening the path again. A file named some other way (a file reference inside a text
argument, :data:`FileReference` fields) is read the same way.

Cache keys of files come from the bytes read: :func:`file_key` (a file) and :func:`dir_key` (a folder);
the dispatcher keys every path-typed argument of a tool without its own key function that way, and
:func:`recording_reads` tells it which files a tool read, so a result is cached only under the digests
of the bytes it was computed from.

:func:`path_fields` lists a model's path-typed fields (the registry test walks every tool with it).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import tempfile
import typing
from collections.abc import Iterator
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel

from spu_common import confined
from spu_common.task import MAX_TASK_FILE_BYTES
from tools_server.core import settings
from tools_server.core.errors import ToolError

#: The largest file of each kind a tool reads (bytes): ``file`` for any other input file.
MAX_BYTES = {
    "file": 64 * 2**20,
    "molecule": 50 * 2**20,  # SDF, MOL, MOL2, XYZ and PDB files of small molecules
    "structure": 100 * 2**20,  # PDB and mmCIF files of proteins and complexes
    "trajectory": 2 * 2**30,  # DCD and XTC trajectories
    "task": MAX_TASK_FILE_BYTES,  # each file of a task folder (contract, targets, prose)
    "submission": 2**20,  # a rankings.json draft (the submission limit)
}
#: Set to 1 to let tools read files that have more than one hard link.
ALLOW_HARD_LINKS_ENV = "SPU_ALLOW_HARD_LINKS"
#: The most files a folder argument's key reads (:func:`dir_key`).
MAX_DIR_FILES = 10_000


def allowed_roots() -> list[Path]:
    """The folders tools read files below: the work directory, the directory the server started in, and
    those of ``SPU_INPUT_ROOTS``, as configured (a root may be reached through links: a path may spell it
    either way, :mod:`spu_common.confined`)."""
    roots = [settings.workdir(), Path.cwd()]
    roots += [Path(p) for p in os.environ.get("SPU_INPUT_ROOTS", "").split(os.pathsep) if p.strip()]
    return [r.expanduser().absolute() for r in roots]


def hard_links_allowed() -> bool:
    """Whether the operator lets tools read files with several hard links (``SPU_ALLOW_HARD_LINKS=1``)."""
    return os.environ.get(ALLOW_HARD_LINKS_ENV, "").strip() == "1"


_OUTSIDE_HINT = (
    "Use a file under the server's work directory or the directory it was started in, or add its directory "
    "to SPU_INPUT_ROOTS (`spu config claude|codex --write --task-root DIR` records it for the client)."
)


def tool_error(exc: confined.Refused, kind: str = "file") -> ToolError:
    """The :class:`ToolError` (stable code, message naming the path, recovery hint) for a refused path."""
    given = exc.path
    if exc.reason == "outside":
        return ToolError(
            "invalid_input", f"{given} is outside the directories tools may read", hint=_OUTSIDE_HINT
        )
    if exc.reason == "system":
        return ToolError("invalid_input", f"{given} is a system file; tools do not read it")
    if exc.reason == "link":
        return ToolError(
            "invalid_input",
            f"{given} goes through a symbolic link; tools do not follow links in any part of an input path",
            hint="Pass the file's own path (no symbolic link in it), or copy the file into the work "
            "directory.",
        )
    if exc.reason == "hard_link":
        return ToolError(
            "invalid_input",
            f"{given} has {exc.links} hard links; tools read only files with one (a hard link can reach a "
            "file outside the directories tools may read)",
            hint="Copy the file (cp, not ln) into the work directory and pass the copy; an operator who "
            f"trusts the links can set {ALLOW_HARD_LINKS_ENV}=1.",
        )
    if exc.reason == "too_large":
        size = f"{exc.size_bytes} bytes" if exc.size_bytes is not None else "too many bytes"
        limit = _size_text(exc.limit_bytes or MAX_BYTES[kind])
        return ToolError(
            "too_large",
            f"{given} has {size}; a {kind} file may have at most {limit}",
            hint="Pass a smaller file (fewer models, frames or records), or cut it down first.",
        )
    return ToolError("invalid_input", exc.message)


def _limit(kind: str, max_bytes: int | None) -> int:
    return MAX_BYTES[kind] if max_bytes is None else max_bytes


def readable_file(path: str | os.PathLike[str], *, kind: str = "file", max_bytes: int | None = None) -> Path:
    """The path below its root of a regular file under an allowed root, reached without following a link,
    with one hard link (unless the operator allows more) and at most ``max_bytes`` (default: the cap of its
    ``kind``, :data:`MAX_BYTES`); else :class:`ToolError` ``invalid_input`` or ``too_large``. Nothing of the
    file is read: read it with :func:`read_input`."""
    try:
        with confined.open_file(
            path, allowed_roots(), max_bytes=_limit(kind, max_bytes), allow_hard_links=hard_links_allowed()
        ) as opened:
            return opened.path
    except confined.Refused as exc:
        raise tool_error(exc, kind) from None


def _size_text(n: int) -> str:
    return f"{n // 2**30} GiB" if n >= 2**30 and n % 2**30 == 0 else f"{n // 2**20} MiB"


def readable_dir(path: str | os.PathLike[str]) -> Path:
    """The path below its root of a directory under an allowed root, reached without following a link, or
    :class:`ToolError` ``invalid_input``."""
    try:
        return confined.check_dir(path, allowed_roots())
    except confined.Refused as exc:
        if exc.reason == "not_regular":
            raise ToolError("invalid_input", f"{exc.path} is not a directory") from None
        raise tool_error(exc) from None


@dataclass
class InputReads:
    """What :func:`read_input` and :func:`private_copy` did while a :func:`recording_reads` block ran:
    the SHA-256 digests of the files read, and the paths refused."""

    digests: list[str] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)


_reads: ContextVar[InputReads | None] = ContextVar("spu_input_reads", default=None)


@contextlib.contextmanager
def recording_reads() -> Iterator[InputReads]:
    """Record the files read (and refused) in this context (thread or task) while the block runs."""
    found = InputReads()
    token = _reads.set(found)
    try:
        yield found
    finally:
        _reads.reset(token)


def _record(digest: str | None, path: str | os.PathLike[str]) -> None:
    found = _reads.get()
    if found is not None:
        if digest is None:
            found.refused.append(os.fspath(path))
        else:
            found.digests.append(digest)


def read_input(
    path: str | os.PathLike[str], *, kind: str = "file", max_bytes: int | None = None
) -> confined.FileRead:
    """The bytes of an input file (path below its root, bytes, SHA-256), read from the descriptor that was
    opened and checked as :func:`readable_file` says; :class:`ToolError` otherwise."""
    try:
        read = confined.read_file(
            path, allowed_roots(), max_bytes=_limit(kind, max_bytes), allow_hard_links=hard_links_allowed()
        )
    except confined.Refused as exc:
        _record(None, path)
        raise tool_error(exc, kind) from None
    _record(read.sha256, path)
    return read


@contextlib.contextmanager
def private_copy(path: str | os.PathLike[str], *, kind: str = "file") -> Iterator[Path]:
    """A copy of an input file, for an engine that opens files by name, in a private temporary folder
    (removed when the block ends), keeping the file's name; copied from the descriptor that was opened and
    checked as :func:`readable_file` says."""
    folder = Path(tempfile.mkdtemp(prefix="spu-input-"))
    try:
        try:
            with confined.open_file(
                path, allowed_roots(), max_bytes=MAX_BYTES[kind], allow_hard_links=hard_links_allowed()
            ) as opened:
                target = folder / opened.path.name
                fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
                try:
                    digest = opened.copy_to(fd, MAX_BYTES[kind])
                finally:
                    os.close(fd)
        except confined.Refused as exc:
            _record(None, path)
            raise tool_error(exc, kind) from None
        _record(digest, path)
        yield target
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def file_key(path: str | os.PathLike[str] | None, *, kind: str = "file") -> str | None:
    """What an input file contributes to a cache key: ``sha256:<hex>`` of its bytes, as read by
    :func:`read_input` (so an edited file gets a new key, and two spellings of one file the same key);
    None for no path."""
    if path is None:
        return None
    return "sha256:" + read_input(path, kind=kind).sha256


def dir_key(path: str | os.PathLike[str], *, kind: str = "file") -> str:
    """What an input folder contributes to a cache key: a SHA-256 over the relative name and the digest of
    each regular file below it (no link followed; links and other entries count by name and kind)."""
    roots = allowed_roots()
    try:
        entries = confined.walk(path, roots, max_entries=MAX_DIR_FILES)
    except confined.Refused as exc:
        raise tool_error(exc, kind) from None
    digest = hashlib.sha256()
    for entry in entries:
        inner = (
            read_input(os.path.join(os.fspath(path), entry.relative), kind=kind)
            if entry.kind == "file"
            else None
        )
        digest.update(f"{entry.relative}\0{entry.kind}\0{inner.sha256 if inner else ''}\n".encode())
    return "sha256:" + digest.hexdigest()


class PathKind:
    """Marks a path-typed field: ``kind`` is ``"file"``, ``"dir"`` or ``"reference"`` (a text that may name a
    file, :func:`file_reference`); ``size_kind`` the file's cap (:data:`MAX_BYTES`)."""

    def __init__(self, kind: str, size_kind: str | None = None) -> None:
        self.kind = kind
        self.size_kind = size_kind

    def __repr__(self) -> str:
        return f"PathKind({self.kind!r}, {self.size_kind!r})"


def input_file(kind: str) -> Any:
    """The type of an argument naming a file of ``kind`` (a key of :data:`MAX_BYTES`): checked by
    :func:`readable_file`; the tool receives the path below its root and reads it with :func:`read_input`
    or :func:`private_copy`."""
    if kind not in MAX_BYTES:
        raise ValueError(f"unknown file kind {kind!r} (known: {', '.join(MAX_BYTES)})")
    return Annotated[str, AfterValidator(lambda v: str(readable_file(v, kind=kind))), PathKind("file", kind)]


def file_reference(kind: str) -> Any:
    """The type of a text argument that may name a file of ``kind`` instead of holding the thing itself (a
    molecule: a SMILES, a molblock, or a path to an SDF file): not checked when validated (most values are
    no path); the tool reads a file it names with :func:`read_input`, and :func:`path_fields` lists the field
    as ``"reference"`` (the tests race every such field too)."""
    if kind not in MAX_BYTES:
        raise ValueError(f"unknown file kind {kind!r} (known: {', '.join(MAX_BYTES)})")
    return Annotated[str, PathKind("reference", kind)]


#: A readable regular file under the allowed roots (at most ``MAX_BYTES["file"]``).
InputPath = input_file("file")
#: A protein structure file (PDB, mmCIF).
StructurePath = input_file("structure")
#: A trajectory (DCD, XTC).
TrajectoryPath = input_file("trajectory")
#: A rankings.json draft.
SubmissionPath = input_file("submission")
#: A directory under the allowed roots; the tool receives its path below its root.
InputDir = Annotated[str, AfterValidator(lambda v: str(readable_dir(v))), PathKind("dir")]


def path_kind(annotation: Any) -> str | None:
    """``"file"``, ``"dir"`` or ``"reference"`` when ``annotation`` is (or wraps) a path type, else None."""
    marker = _marker(annotation)
    return marker.kind if marker is not None else None


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


def path_marker(model: type[BaseModel], dotted: str) -> PathKind | None:
    """The :class:`PathKind` of the field ``dotted`` (``outer.inner`` for nested models) of ``model``."""
    head, _, rest = dotted.partition(".")
    info = model.model_fields.get(head)
    if info is None:
        return None
    if rest:
        return next((m for n in _models_in(info.annotation) if (m := path_marker(n, rest))), None)
    annotated = Annotated[(info.annotation, *info.metadata)] if info.metadata else info.annotation
    return _marker(annotated)


def _marker(annotation: Any) -> PathKind | None:
    if typing.get_origin(annotation) is Annotated:
        for meta in typing.get_args(annotation)[1:]:
            if isinstance(meta, PathKind):
                return meta
    for arg in typing.get_args(annotation):
        if (found := _marker(arg)) is not None:
            return found
    return None


def path_locations(value: Any, dotted: str, where: tuple = ()) -> list[tuple]:
    """Where in the arguments ``value`` the path-typed field ``dotted`` (``outer.inner`` for nested models)
    holds a path: each a tuple of keys and list indices from the root."""
    head, _, rest = dotted.partition(".")
    if not isinstance(value, dict) or value.get(head) is None:
        return []
    inner = value[head]
    items = list(enumerate(inner)) if isinstance(inner, list) else [(None, inner)]
    found: list[tuple] = []
    for index, item in items:
        here = (*where, head) if index is None else (*where, head, index)
        if rest:
            found += path_locations(item, rest, here)
        elif isinstance(item, str):
            found.append(here)
    return found


def keyed_by_content(model: type[BaseModel], params: dict[str, Any]) -> dict[str, Any]:
    """``params`` with every file and folder named by a path-typed field replaced by its content key
    (:func:`file_key`, :func:`dir_key`): the cache key of a tool that has no key function of its own."""
    import copy

    out = copy.deepcopy(params)
    for dotted, kind in path_fields(model).items():
        if kind not in ("file", "dir"):
            continue
        size_kind = (path_marker(model, dotted) or PathKind(kind)).size_kind or "file"
        for where in path_locations(out, dotted):
            holder: Any = out
            for key in where[:-1]:
                holder = holder[key]
            path = holder[where[-1]]
            holder[where[-1]] = file_key(path, kind=size_kind) if kind == "file" else dir_key(path)
    return out


def _models_in(annotation: Any) -> list[type[BaseModel]]:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return [m for arg in typing.get_args(annotation) for m in _models_in(arg)]
