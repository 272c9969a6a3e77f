"""The content scanner's cost (environment/leakscan) on the artifacts it reads: the wheel and the sdist built
from the repository's tracked files, every export of the suite and the demo tasks, and, given an image name,
every layer of that image (`docker save`). For each it prints the bytes read, the scan's time and its ratio
to a baseline measured in the same run: reading the same documents (archives opened, streams decompressed)
without scanning them. The findings are printed too (there should be none).

    .venv/bin/python bench/leak_scan.py [--image spu-scaffold:test]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "integration"))

from shipped_files import REPO, every_task_scanner
from test_packaging import _build, _tracked_copy

from environment.harbor.export import export_task
from environment.leakscan import Limits
from environment.leakscan.reading import Document, read_path, read_stream


def _docker_save(image: str) -> Callable[[], Iterator[Document]]:
    def documents() -> Iterator[Document]:
        proc = subprocess.Popen(["docker", "save", image], stdout=subprocess.PIPE)
        assert proc.stdout is not None
        yield from read_stream(image, proc.stdout, Limits())
        proc.wait()

    return documents


def measure(name: str, documents: Callable[[], Iterator[Document]]) -> None:
    start = time.perf_counter()
    size = sum(len(data) for _, data in documents())
    read_s = time.perf_counter() - start
    scanner = every_task_scanner()
    start = time.perf_counter()
    findings = [f for doc, data in documents() for f in scanner.scan(doc, data)]
    scan_s = time.perf_counter() - start
    ratio = scan_s / read_s
    print(f"{name}: {size / 1e6:.1f} MB, read {read_s:.1f} s, scan {scan_s:.1f} s ({ratio:.1f}x reading)")
    for finding in findings:
        print(f"  {finding.where}: {finding.task_id}: {finding.what}")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--image", help="an image to read whole (docker save)")
    args = parser.parse_args()
    every_task_scanner()  # built once, outside the timings
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        wheel, sdist = _build(_tracked_copy(root / "src"), root / "dist")
        measure("wheel", lambda: read_path(wheel, Limits()))
        measure("sdist", lambda: read_path(sdist, Limits()))
        agent_side = []
        for task in sorted((REPO / "environment").glob("*tasks/*/task")):
            out = root / "exports" / task.parent.name
            export_task(task, out, image="img:1")
            agent_side += [p for p in sorted(out.iterdir()) if p.name not in ("tests", "solution")]
        measure("every export's agent side", lambda: (d for p in agent_side for d in read_path(p, Limits())))
    if args.image:
        measure(f"image {args.image}", _docker_save(args.image))


if __name__ == "__main__":
    main()
