"""What a distributed artifact (the wheel, the sdist, an image layer) may hold of a task folder, and the
content scanner every such check uses (docs/harbor.md): shared by tests/integration/test_packaging.py,
tests/container/test_images.py and bench/leak_scan.py."""

from __future__ import annotations

import contextlib
import functools
import re
import subprocess
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import BinaryIO

from environment.leakscan import Limits, Scanner, marks_under
from environment.leakscan.verdicts import TarScan, VerdictCache, cache_dir, scan_tar_members

REPO = Path(__file__).resolve().parents[1]
#: a path inside a task folder of the suite or of the demo tasks, wherever the artifact puts the package
TASK_FOLDERS = re.compile(r"(?:^|/)environment/(?P<kind>tasks|demo_tasks)/(?P<rest>.+)$")


def outside_task_folders(names: Iterable[str]) -> list[str]:
    """The names of files of a task folder outside its ``task/`` (the allow-list: a suite task ships only
    ``task/``, the demo tasks their ``task/`` and the package's own ``__init__.py``)."""
    bad = []
    for name in names:
        match = TASK_FOLDERS.search(name)
        if match is None:
            continue
        parts = match["rest"].split("/")
        package_module = match["kind"] == "demo_tasks" and (
            parts == ["__init__.py"] or (parts[0] == "__pycache__" and parts[-1].startswith("__init__."))
        )
        if not package_module and (len(parts) < 3 or parts[1] != "task"):
            bad.append(name)
    return bad


def shipped_task_files() -> list[str]:
    """The files the allow-list ships: every tracked file under a task folder's ``task/``."""
    return sorted(
        p.relative_to(REPO).as_posix()
        for pattern in ("environment/tasks/*/task/**/*", "environment/demo_tasks/*/task/**/*")
        for p in REPO.glob(pattern)
        if p.is_file()
    )


@functools.cache
def every_task_scanner() -> Scanner:
    """The scanner with the marks of every task in the repository (suite and demo)."""
    return Scanner(marks_under(REPO / "environment"))


def image_id(image: str) -> str:
    """The image's id (``sha256:...``): what it names now, whatever later happens to the tag."""
    proc = subprocess.run(
        ["docker", "image", "inspect", "--format", "{{.Id}}", image],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, f"docker image inspect {image}: {proc.stderr[-2000:]}"
    return proc.stdout.strip()


@contextlib.contextmanager
def saved_image(image: str) -> Iterator[BinaryIO]:
    """``docker save`` of an image as a stream; read to its end, and docker must exit 0."""
    proc = subprocess.Popen(["docker", "save", image], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None and proc.stderr is not None
    try:
        yield proc.stdout
        while proc.stdout.read(1 << 20):  # the rest (the tar's padding): docker finishes writing
            pass
    except BaseException:
        proc.kill()
        raise
    finally:
        proc.stdout.close()
        returncode = proc.wait(timeout=600)
        error = proc.stderr.read().decode(errors="replace")
        proc.stderr.close()
    assert returncode == 0, f"docker save {image}: {error[-2000:]}"


def scan_image(image: str, cache: Path | None = None) -> TarScan:
    """Every layer of ``image`` (``docker save``: files a later layer deletes included, as an agent could read
    them) through the scanner of every task, each layer's verdict kept in ``cache`` (default: the scanner's
    cache folder) by its bytes, the marks and the scanner, so that an unchanged layer is scanned once per
    machine; the kept names are the files of task folders (:func:`outside_task_folders`)."""
    verdicts = VerdictCache(cache or cache_dir(), every_task_scanner(), Limits(), TASK_FOLDERS)
    fixed = image_id(image)  # both reads of the stream see the same image, whatever the tag does meanwhile
    return scan_tar_members(image, lambda: saved_image(fixed), verdicts)
