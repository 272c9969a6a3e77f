"""The content scanner's cost (environment/leakscan) on the artifacts it reads: the wheel and the sdist built
from the repository's tracked files, every export of the suite and the demo tasks, and, given an image name,
every layer of that image (`docker save`). For each it prints the bytes read, the scan's time and its ratio
to a baseline measured in the same run: reading the same documents (archives opened, streams decompressed)
without scanning them. The findings are printed too (there should be none).

The image is scanned as tests/container/test_images.py scans it, each layer's verdict kept by content
(environment/leakscan/verdicts.py), in a new cache folder: cold (every layer scanned), then warm (the same
image again: no layer scanned, each hashed); it prints both as ratios to reading, and cold / warm.

    .venv/bin/python bench/leak_scan.py [--image spu-scaffold:test] [--only-image]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "integration"))

from shipped_files import REPO, every_task_scanner, image_id, saved_image, scan_image
from test_packaging import _build, _tracked_copy

from environment.harbor.export import export_task
from environment.leakscan import Limits
from environment.leakscan.reading import Document, read_path, read_stream


def _docker_save(image: str) -> Callable[[], Iterator[Document]]:
    def documents() -> Iterator[Document]:
        with saved_image(image) as stream:
            yield from read_stream(image, stream, Limits())

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


def measure_image(name: str, image: str) -> None:
    """Every layer of the image: read, then scanned with the layers' verdicts kept in a new cache folder,
    cold (every layer scanned) and warm (none: each hashed)."""
    start = time.perf_counter()
    size = sum(len(data) for _, data in _docker_save(image)())
    read_s = time.perf_counter() - start
    print(f"image {name}: {size / 1e6:.1f} MB, read {read_s:.1f} s")
    with tempfile.TemporaryDirectory() as cache:
        times = []
        for run in ("cold", "warm"):
            start = time.perf_counter()
            scan = scan_image(image, Path(cache))
            times.append(time.perf_counter() - start)
            scanned_mb = sum(size for _, size in scan.scanned) / 1e6
            print(
                f"  scan, {run}: {times[-1]:.1f} s ({times[-1] / read_s:.1f}x reading); "
                f"{len(scan.scanned)} of {scan.members} members scanned ({scanned_mb:.0f} MB); "
                f"{len(scan.findings)} findings"
            )
            for finding in scan.findings:
                print(f"    {finding.where}: {finding.task_id}: {finding.what}")
    print(f"  cold / warm: {times[0] / times[1]:.1f}x")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--image", help="an image to read whole (docker save)")
    parser.add_argument(
        "--only-image", action="store_true", help="the image alone, not the wheel and exports"
    )
    args = parser.parse_args()
    every_task_scanner()  # built once, outside the timings
    if args.image:
        image = image_id(args.image)  # every read sees the same image, whatever the tag does meanwhile
        measure_image(args.image, image)
    if args.only_image:
        return
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


if __name__ == "__main__":
    main()
