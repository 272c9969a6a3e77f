"""What the sandbox check of the trials copies out of an agent's container to scan (`paths_to_scan`):
from `docker diff` lines generated as Docker writes them for generated changes, every file the container
added or changed lies under a path it copies, and no file of the image that the container left alone does
(outside /app, which it always copies), so a changed folder is not copied whole."""

from __future__ import annotations

from container_helpers import paths_to_scan
from hypothesis import given
from hypothesis import strategies as st

_names = st.sampled_from(["usr", "sbin", "lib", "app", "output", "x", "y"])
_paths = st.lists(_names, min_size=1, max_size=4).map(lambda parts: "/" + "/".join(parts))


def _parents(path: str) -> list[str]:
    parts = path.strip("/").split("/")
    return ["/" + "/".join(parts[:i]) for i in range(1, len(parts))]


def _diff(image: set[str], added: set[str], changed: set[str], deleted: set[str]) -> str:
    """Docker's lines: each change, and each folder above a change, changed (C) where the image has it,
    added (A) where it does not."""
    lines = {f"A {p}" for p in added} | {f"C {p}" for p in changed} | {f"D {p}" for p in deleted}
    for path in added | changed | deleted:
        for parent in _parents(path):
            lines.add(f"C {parent}" if parent in image else f"A {parent}")
    return "\n".join(sorted(lines, key=lambda line: line[2:]))


def _some(data: st.DataObject, paths: set[str]) -> set[str]:
    return data.draw(st.sets(st.sampled_from(sorted(paths)))) if paths else set()


def _under(path: str, tops: list[str]) -> bool:
    return any(path == top or path.startswith(top.rstrip("/") + "/") for top in tops)


@given(image_files=st.sets(_paths, min_size=1, max_size=12), new=st.sets(_paths, max_size=6), data=st.data())
def test_every_change_is_copied_and_no_untouched_image_file_outside_app(image_files, new, data):
    # the image's files (a path that is another's folder is a folder), and its folders
    files = {p for p in image_files if not any(q.startswith(p + "/") for q in image_files)}
    folders = {parent for p in files for parent in _parents(p)}
    added = {p for p in new if p not in files | folders and not any(_under(p, [f]) for f in files)}
    added = {p for p in added if not any(q.startswith(p + "/") for q in added)}  # files only
    changed = _some(data, files)
    deleted = _some(data, files - changed)
    tops = paths_to_scan(_diff(folders | files, added, changed, deleted))
    assert all(_under(p, tops) for p in added | changed)
    untouched = files - changed - deleted
    assert not [p for p in untouched if _under(p, tops) and not _under(p, ["/app"])]
