"""Real images and real Harbor trials in Docker (marker ``container``; docs/harbor.md).

They need a Docker engine with the Compose v2 plugin (``bash scripts/setup-docker.sh``, as root) and Harbor
(``bash scripts/setup-harbor.sh``). Without them they skip, saying why, unless ``SPU_REQUIRE_CONTAINER=1``
(set by scripts/test.sh once it has installed both), where a missing part is a failure. Skip them in a quick
local run with ``-m "not container"``.

The test image is built from ``Dockerfile`` by ``scripts/build-image.sh`` with the extras of
``SPU_TEST_IMAGE_EXTRAS`` (default ``chem``: what the trials use) and tagged ``spu-scaffold:test``; Docker's
layer cache makes a rebuild after a source change take seconds.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from container_helpers import HARBOR, REPO, Trial, containers, docker, harbor_env, has_path

TEST_IMAGE = "spu-scaffold:test"
#: keep the trial's containers, stopped (started again, inspected, then removed by the fixture); no prompts;
#: no progress display
KEEP = ("--ek", "keep_containers=true", "-y", "-q")
EXTRAS = os.environ.get("SPU_TEST_IMAGE_EXTRAS", "chem")


def pytest_collection_modifyitems(config, items):
    here = Path(__file__).resolve().parent
    for item in items:
        if Path(str(item.fspath)).resolve().is_relative_to(here):
            item.add_marker(pytest.mark.container)
            item.add_marker(pytest.mark.slow)


def _missing() -> str | None:
    if shutil.which("docker") is None:
        return "no docker command: run `bash scripts/setup-docker.sh` (as root)"
    if subprocess.run(["docker", "info"], capture_output=True, timeout=60, check=False).returncode != 0:
        return "no Docker engine answers: run `bash scripts/setup-docker.sh` (as root)"
    if subprocess.run(
        ["docker", "compose", "version"], capture_output=True, timeout=60, check=False
    ).returncode:
        return "no `docker compose` (v2 plugin): run `bash scripts/setup-docker.sh`"
    if not HARBOR.exists():
        return "no .harbor-venv: run `bash scripts/setup-harbor.sh`"
    return None


@pytest.fixture(scope="session")
def docker_ready() -> None:
    reason = _missing()
    if reason is None:
        return
    if os.environ.get("SPU_REQUIRE_CONTAINER") == "1":
        pytest.fail(reason)
    pytest.skip(reason)


@pytest.fixture(scope="session")
def test_image(docker_ready) -> str:
    """``spu-scaffold:test`` built from the current sources (cached: seconds when only code changed)."""
    env = {**os.environ, "SPU_IMAGE": TEST_IMAGE, "SPU_EXTRAS": EXTRAS}
    proc = subprocess.run(
        ["bash", str(REPO / "scripts" / "build-image.sh"), "cpu"],
        capture_output=True,
        text=True,
        env=env,
        timeout=3600,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    return TEST_IMAGE


@pytest.fixture
def run_trial(tmp_path) -> Iterator:
    """``run_trial(task_dir, *harbor_args)``: `harbor run` on an exported task; the agent's and the
    verifier's containers are kept for inspection, then removed with the images built for them
    (compose down --rmi local: the verifier's image holds the answers)."""
    projects: set[str] = set()

    def run(task_dir: Path, *args: str) -> Trial:
        jobs = tmp_path / f"jobs-{uuid.uuid4().hex[:8]}"
        before = containers()
        proc = subprocess.run(
            [
                str(HARBOR),
                "run",
                "-p",
                str(task_dir),
                "-o",
                str(jobs),
                "-e",
                "docker",
                "-n",
                "1",
                *KEEP,
                *args,
            ],
            capture_output=True,
            text=True,
            env=harbor_env(),
            cwd=REPO,
            timeout=1800,
            check=False,
        )
        assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
        # the trial's containers are Harbor's compose projects (a build running beside leaves others)
        new = []
        for cid in sorted(containers() - before):
            inspected = docker("inspect", "--format", "{{json .Config.Labels}}", cid, check=False).strip()
            labels = json.loads(inspected or "null") or {}
            if "com.docker.compose.project" in labels:
                projects.add(labels["com.docker.compose.project"])
                new.append(cid)
        results = [
            p for p in jobs.rglob("result.json") if "trial_name" in json.loads(p.read_text(encoding="utf-8"))
        ]
        assert len(results) == 1, f"{len(results)} trial results under {jobs}: {proc.stdout[-2000:]}"
        for cid in new:  # Harbor stopped them; the same configuration (network included) runs again
            docker("start", cid)
        running = [c for c in new if docker("inspect", "--format", "{{.State.Running}}", c).strip() == "true"]
        agent = [c for c in running if has_path(c, "/app/task/contract.json") and not has_path(c, "/tests")]
        verifier = [c for c in running if has_path(c, "/tests/test.sh")]
        assert len(agent) == 1, f"agent container not found among {new}"
        return Trial(
            jobs_dir=jobs,
            result=json.loads(results[0].read_text(encoding="utf-8")),
            trial_dir=results[0].parent,
            agent_container=agent[0],
            verifier_container=verifier[0] if verifier else None,
        )

    yield run
    for project in projects:
        subprocess.run(
            ["docker", "compose", "-p", project, "down", "--rmi", "local", "--remove-orphans", "-t", "0"],
            capture_output=True,
            timeout=300,
            check=False,
        )
