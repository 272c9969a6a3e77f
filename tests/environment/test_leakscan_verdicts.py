"""The scanner's verdicts kept by content (environment/leakscan/verdicts.py), on generated tar streams of
generated layers (harmless files, files holding a task's marks, compressed or not, files in a kept folder):
whatever layers change between two images, the scan with the cache finds exactly what a scan of the whole
stream without it finds (`scan_stream`), and it scans again exactly the layers whose bytes it has not seen;
other marks or a damaged cache file scan again; the first scan scans everything."""

from __future__ import annotations

import contextlib
import functools
import gzip
import io
import json
import re
import tarfile
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from environment.leakscan import Limits, Scanner, marks_beside, scan_stream
from environment.leakscan.reading import read_stream
from environment.leakscan.verdicts import (
    StreamChangedError,
    VerdictCache,
    cache_dir,
    marks_digest,
    scan_tar_members,
)
from spu_common.task import load_task

SUITE = Path(__file__).resolve().parents[2] / "environment" / "tasks"
KEEP = re.compile(r"(?:^|/)keep/")
FAST = settings(derandomize=True, max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
#: what a file may hold: harmless text, an author key of chem-fragment-pka-logp, its study's DOI
#: (tests/integration/test_harbor.py finds each in an export)
CONTENTS = [
    b"molecule\nethanol\n",
    b"molecule\npka-w-sm01\n",
    b"Data: DOI 10.1007/S10822-018-0168-0.",
    b"nothing to see here " * 50,
]


@functools.cache
def _scanner(task_id: str) -> Scanner:
    task_dir = SUITE / task_id
    return Scanner([marks_beside(task_dir / "answers.json", load_task(task_dir / "task"))])


def _tar(files: list[tuple[str, bytes]]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.USTAR_FORMAT) as archive:
        for name, data in files:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def _image(layers: list[list[tuple[str, bytes]]]) -> bytes:
    """A `docker save`-like stream: each layer a tar member of its own, then a manifest."""
    members = [(f"layer{i}/layer.tar", _tar(files)) for i, files in enumerate(layers)]
    manifest = json.dumps([{"Layers": [name for name, _ in members]}]).encode()
    return _tar([*members, ("manifest.json", manifest)])


def _opener(*streams: bytes):
    """Opens the given streams one after the other, the last one again and again."""
    queue = list(streams)

    @contextlib.contextmanager
    def open_stream():
        yield io.BytesIO(queue.pop(0) if len(queue) > 1 else queue[0])

    return open_stream


def _whole(stream: bytes, scanner: Scanner) -> tuple[set[tuple[str, str, str]], list[str]]:
    """What a scan of the whole stream without any cache finds, and the names in kept folders."""
    findings = {(f.where, f.task_id, f.what) for f in scan_stream("img", io.BytesIO(stream), scanner)}
    names = [name for name, _ in read_stream("img", io.BytesIO(stream), Limits()) if KEEP.search(name)]
    return findings, list(dict.fromkeys(names))


def _cached(stream: bytes, cache: VerdictCache):
    scan = scan_tar_members("img", _opener(stream), cache)
    return scan, {(f.where, f.task_id, f.what) for f in scan.findings}


_file = st.tuples(
    st.sampled_from(["a.txt", "keep/b.csv", "deep/keep/c.json", "d.bin"]),
    st.sampled_from(CONTENTS),
    st.booleans(),  # gzip it
).map(lambda f: (f[0] + (".gz" if f[2] else ""), gzip.compress(f[1], mtime=0) if f[2] else f[1]))
_layer = st.lists(_file, min_size=1, max_size=3, unique_by=lambda f: f[0])


@FAST
@given(
    before=st.lists(_layer, min_size=1, max_size=4),
    changes=st.lists(st.tuples(st.integers(0, 5), st.one_of(st.none(), _layer)), max_size=3),
)
def test_a_cached_scan_finds_what_a_whole_scan_finds_and_scans_only_new_bytes(before, changes):
    after = list(before)
    for index, layer in changes:  # a layer replaced, removed (None) or added
        if layer is None and len(after) > 1:
            del after[index % len(after)]
        elif layer is not None:
            after.insert(index % (len(after) + 1), layer)
    scanner = _scanner("chem-fragment-pka-logp")
    first, second = _image(before), _image(after)
    with tempfile.TemporaryDirectory() as root:
        cache = VerdictCache(Path(root), scanner, Limits(), KEEP)
        cold, found = _cached(first, cache)
        assert (found, cold.names) == _whole(first, scanner)
        # the first scan: every member (one of several with the same bytes)
        assert cold.members == len(before) + 1
        assert _scanned_bytes(cold, first) == list(dict.fromkeys(data for _, data in _members(first)))
        warm, found = _cached(first, cache)
        assert (found, warm.names) == _whole(first, scanner) and warm.scanned == []
        seen = {data for _, data in _members(first)}
        changed, found = _cached(second, cache)
        assert (found, changed.names) == _whole(second, scanner)
        new = list(dict.fromkeys(data for _, data in _members(second) if data not in seen))
        assert _scanned_bytes(changed, second) == new  # the bytes not seen before, each once


def _scanned_bytes(scan, stream: bytes) -> list[bytes]:
    members = dict(_members(stream))
    return [members[name] for name, _ in scan.scanned]


def _members(stream: bytes) -> list[tuple[str, bytes]]:
    with tarfile.open(fileobj=io.BytesIO(stream)) as archive:
        return [(m.name, archive.extractfile(m).read()) for m in archive if m.isreg()]  # type: ignore[union-attr]


def test_other_marks_scan_every_layer_again(tmp_path):
    stream = _image([[("a.txt", CONTENTS[1])], [("b.txt", CONTENTS[0])]])
    pka, other = _scanner("chem-fragment-pka-logp"), _scanner(_other_task())
    assert marks_digest(pka) != marks_digest(other)
    _cached(stream, VerdictCache(tmp_path, pka, Limits(), KEEP))
    scan, found = _cached(stream, VerdictCache(tmp_path, other, Limits(), KEEP))
    assert len(scan.scanned) == 3 and (found, scan.names) == _whole(stream, other)


def _other_task() -> str:
    return next(
        p.parent.name for p in sorted(SUITE.glob("*/task")) if p.parent.name != "chem-fragment-pka-logp"
    )


@pytest.mark.parametrize("damage", ["not json", '{"key": {}, "findings": [], "names": []}', '{"key": 1}'])
def test_a_damaged_verdict_is_a_miss_not_a_pass(tmp_path, damage):
    stream = _image([[("a.txt", CONTENTS[1])]])
    scanner = _scanner("chem-fragment-pka-logp")
    cache = VerdictCache(tmp_path, scanner, Limits(), KEEP)
    _, found = _cached(stream, cache)
    assert any("pka-w-sm01" in what for _, _, what in found)
    for path in tmp_path.glob("*.json"):
        path.write_text(damage)
    scan, again = _cached(stream, cache)
    assert len(scan.scanned) == 2 and again == found


def test_a_verdict_that_cannot_be_stored_is_said_and_the_scan_stands(tmp_path):
    (tmp_path / "file").write_text("a file where the cache folder would be")
    stream = _image([[("a.txt", CONTENTS[2])]])
    scanner = _scanner("chem-fragment-pka-logp")
    scan, found = _cached(stream, VerdictCache(tmp_path / "file" / "cache", scanner, Limits(), KEEP))
    assert found == _whole(stream, scanner)[0] and found
    assert len(scan.warnings) == 2 and "verdict not stored" in scan.warnings[0]


def test_a_stream_that_changes_between_the_two_reads_is_an_error(tmp_path):
    scanner = _scanner("chem-fragment-pka-logp")
    before = _image([[("a.txt", CONTENTS[0])]])
    after = _image([[("a.txt", CONTENTS[3])]])
    with pytest.raises(StreamChangedError, match=r"layer0/layer\.tar: its bytes changed"):
        scan_tar_members("img", _opener(before, after), VerdictCache(tmp_path, scanner, Limits(), KEEP))


def test_the_cache_folder_is_the_users_unless_named(monkeypatch, tmp_path):
    monkeypatch.delenv("SPU_LEAKSCAN_CACHE", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache_dir() == tmp_path / "xdg" / "spu-leakscan"
    monkeypatch.setenv("SPU_LEAKSCAN_CACHE", str(tmp_path / "mine"))
    assert cache_dir() == tmp_path / "mine"
