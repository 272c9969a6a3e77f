"""The images themselves (docs/docker.md): every layer of the test image (`docker save`) holds nothing of a
task folder but its `task/` and no mark of any task (the content scanner, environment/leakscan, each layer's
verdict kept by its bytes: environment/leakscan/verdicts.py);
`Dockerfile.gpu` built on this machine from a local stand-in base (its CUDA base image needs a registry),
and no image carries the local wheels folder as a dead layer."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from container_helpers import build_image, build_script, docker, remove_image
from shipped_files import outside_task_folders, scan_image

GPU_TEST_IMAGE = "spu-scaffold:test-gpu"
#: the base scripts/setup-docker.sh builds with debootstrap, standing in for nvidia/cuda:12.x-...-ubuntu24.04
STAND_IN_BASE = "debian:bookworm-slim"
#: the GPU stack without torch (the extras that need torch add the CPU wheel here: docs/docker.md)
GPU_TEST_EXTRAS = "chem,gpu"


def copied_layers_over(image: str, limit_bytes: int) -> list[str]:
    """The image's layers made by COPY that are larger than ``limit_bytes`` (the local wheels folder with
    the CPU torch build is 192 MB; the sources are 3 MB)."""
    lines = docker(
        "history", "--no-trunc", "--human=false", "--format", "{{.Size}}\t{{.CreatedBy}}", image
    ).splitlines()
    return [line[:150] for line in lines if "COPY" in line and int(line.split("\t", 1)[0]) > limit_bytes]


def test_every_layer_holds_only_task_folders_and_no_marks(test_image):
    """``docker save``: every layer, files deleted by a later layer included, as an agent could read them. A
    layer whose bytes were scanned before with the same marks and scanner keeps its verdict (the scanner's
    cache folder): a run after a source change scans the project's layers, not the base's."""
    scan = scan_image(test_image)
    scanned_mb = sum(size for _, size in scan.scanned) / 1e6
    print(f"{test_image}: {len(scan.scanned)} of {scan.members} members scanned ({scanned_mb:.0f} MB)")
    assert scan.warnings == []
    # the package is there (the suite's task folders among it), and nothing beside a task's task/
    assert any(
        n.endswith("site-packages/environment/tasks/chem-fragment-pka-logp/task/targets.csv")
        for n in scan.names
    )
    assert outside_task_folders(scan.names) == []
    assert [f"{f.where}: {f.task_id}: {f.what}" for f in scan.findings] == []


def test_the_test_image_has_no_dead_wheel_layer(test_image):
    assert copied_layers_over(test_image, 50e6) == []


@pytest.fixture
def gpu_image(docker_ready) -> Iterator[str]:
    """``Dockerfile.gpu`` on the stand-in base, under this session's own tag, removed at the end."""
    variables = {"SPU_EXTRAS": GPU_TEST_EXTRAS, "SPU_BASE_IMAGE": STAND_IN_BASE}
    image = build_image(GPU_TEST_IMAGE, lambda tag: build_script("gpu", tag, **variables))
    yield image
    remove_image(image)


def test_gpu_image_builds_from_a_stand_in_base(gpu_image):
    assert copied_layers_over(gpu_image, 50e6) == []
    cid = docker("run", "-d", "--network", "none", gpu_image, "sleep", "600").strip()
    try:
        assert docker("exec", cid, "id", "-un").strip() == "spu"
        # the GPU wheels of Dockerfile.gpu's CUDA 12 layer, at the versions it pins
        versions = docker(
            "exec",
            cid,
            "python",
            "-c",
            "import importlib.metadata as m; print(*(m.version(p) for p in "
            "('cupy-cuda12x', 'gpu4pyscf-cuda12x', 'openmm', 'spu-scaffold')))",
        ).split()
        assert versions[:3] == ["14.2.0", "1.9.0", "8.6.1"], versions
        assert docker("exec", cid, "sh", "-c", 'stat -c %U "$SPU_WEIGHTS_DIR"').strip() == "spu"
        # without a GPU the image says so and how to give it one, and the required checks pass
        doctor = json.loads(
            docker("exec", cid, "spu", "doctor", "--only", "gpu", "--only", "rdkit", "--json")
        )
        checks = {c["name"]: c for c in doctor["checks"]}
        assert doctor["ok"] is True and checks["rdkit"]["status"] == "ok"
        assert checks["gpu"]["status"] == "skip" and "--gpus all" in checks["gpu"]["fix"]
    finally:
        docker("rm", "-f", cid, check=False)
