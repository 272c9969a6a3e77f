"""The images themselves (docs/docker.md): every layer of the test image (`docker save`) holds nothing of a
task folder but its `task/` and no mark of any task (the content scanner, environment/leakscan);
`Dockerfile.gpu` built on this machine from a local stand-in base (its CUDA base image needs a registry),
and no image carries the local wheels folder as a dead layer."""

from __future__ import annotations

import json
import os
import subprocess

from container_helpers import REPO, docker
from shipped_files import every_task_scanner, outside_task_folders

from environment.leakscan import Limits
from environment.leakscan.reading import read_stream

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
    """``docker save``: every layer, files deleted by a later layer included, as an agent could read them."""
    proc = subprocess.Popen(["docker", "save", test_image], stdout=subprocess.PIPE)
    assert proc.stdout is not None
    names, findings = [], []
    scanner = every_task_scanner()
    for name, data in read_stream(test_image, proc.stdout, Limits()):
        names.append(name)
        findings += [f"{f.where}: {f.task_id}: {f.what}" for f in scanner.scan(name, data)]
    assert proc.wait(timeout=600) == 0
    # the package is there (the suite's task folders among it), and nothing beside a task's task/
    assert any(
        n.endswith("site-packages/environment/tasks/chem-fragment-pka-logp/task/targets.csv") for n in names
    )
    assert outside_task_folders(names) == []
    assert findings == []


def test_the_test_image_has_no_dead_wheel_layer(test_image):
    assert copied_layers_over(test_image, 50e6) == []


def test_gpu_image_builds_from_a_stand_in_base(docker_ready):
    env = {
        **os.environ,
        "SPU_IMAGE": GPU_TEST_IMAGE,
        "SPU_EXTRAS": GPU_TEST_EXTRAS,
        "SPU_BASE_IMAGE": STAND_IN_BASE,
    }
    proc = subprocess.run(
        ["bash", str(REPO / "scripts" / "build-image.sh"), "gpu"],
        capture_output=True,
        text=True,
        env=env,
        timeout=3600,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    assert copied_layers_over(GPU_TEST_IMAGE, 50e6) == []
    cid = docker("run", "-d", "--network", "none", GPU_TEST_IMAGE, "sleep", "600").strip()
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
