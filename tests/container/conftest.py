"""Real images and real Harbor trials in Docker (marker ``container``; docs/harbor.md).

They need a Docker engine with the Compose v2 plugin (``bash scripts/setup-docker.sh``, as root) and Harbor
(``bash scripts/setup-harbor.sh``). Without them they skip, saying why, unless ``SPU_REQUIRE_CONTAINER=1``
(set by scripts/test.sh once it has installed both), where a missing part is a failure. Skip them in a quick
local run with ``-m "not container"``.

The test image is built from ``Dockerfile`` by ``scripts/build-image.sh`` with the extras of
``SPU_TEST_IMAGE_EXTRAS`` (default ``chem,web``: what the trials use, the audit service included) and tagged
``spu-scaffold:test`` (or ``SPU_TEST_IMAGE``); Docker's layer cache makes a rebuild after a source change
take seconds.

The tests share the Docker engine with whatever else runs on it (other Harbor trials, other sessions of these
tests, the rest of the suite): each session owns its Docker objects. Its images carry a tag of its own
(``container_helpers.own_tag``: the shared tag and ``container_helpers.PREFIX``), built one at a time on the
machine (``build_lock``) and removed at its end; its trials, compose projects and containers are named with
``PREFIX``, and only compose projects that carry it are touched. So sessions can run beside each other and
beside the rest of the suite (``scripts/test.sh`` does).
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
from container_helpers import (
    HARBOR,
    PREFIX,
    REPO,
    TEST_IMAGE,
    Trial,
    build_image,
    build_script,
    compose_project,
    docker,
    harbor_env,
    project_containers,
    remove_image,
    remove_projects,
)

#: the documented safe mode (docs/harbor.md): the log folders mounted from the host, so that the collect hook
#: checks them before the host keeps anything (by default Harbor copies /logs/agent before any hook runs)
SAFE = ("--ek", "auto_mounting=true")
#: keep the trial's containers, stopped (started again, inspected, then removed by the fixture); no prompts;
#: no progress display
KEEP = ("--ek", "keep_containers=true", "-y", "-q")
EXTRAS = os.environ.get("SPU_TEST_IMAGE_EXTRAS", "chem,web")


def pytest_collection_modifyitems(config, items):
    here = Path(__file__).resolve().parent
    for item in items:
        if Path(str(item.fspath)).resolve().is_relative_to(here):
            item.add_marker(pytest.mark.container)
            item.add_marker(pytest.mark.slow)
            # a cold CI machine builds the images inside the first tests' fixtures (minutes each)
            item.add_marker(pytest.mark.timeout(3600))


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


@pytest.fixture(scope="session", name="test_image")
def built_test_image(docker_ready) -> Iterator[str]:
    """The test image built from the current sources (cached: seconds when only code changed), under this
    session's own tag (``spu-scaffold:test-<PREFIX>``), removed at the end; ``spu-scaffold:test`` names the
    last one built."""
    tag = build_image(TEST_IMAGE, lambda tag: build_script("cpu", tag, SPU_EXTRAS=EXTRAS))
    yield tag
    remove_image(tag)


@pytest.fixture
def run_trial(tmp_path) -> Iterator:
    """``run_trial(task, *harbor_args)``: `harbor run` on an exported task (exported into
    ``container_helpers.task_dir``, so that its name starts with ``PREFIX``); the agent's and the verifier's
    containers are kept for inspection, then removed with the images built for them (compose down --rmi
    local: the verifier's image holds the answers). Only the compose projects of this test's own trials are
    touched."""
    prefixes: list[str] = []

    def run(task: Path, *args: str) -> Trial:
        assert task.name.startswith(PREFIX), f"export the task with task_dir(): {task.name}"
        jobs = tmp_path / f"jobs-{uuid.uuid4().hex[:8]}"
        proc = subprocess.run(
            [
                str(HARBOR),
                "run",
                "-p",
                str(task),
                "-o",
                str(jobs),
                "-e",
                "docker",
                "-n",
                "1",
                *SAFE,
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
        results = [
            p for p in jobs.rglob("result.json") if "trial_name" in json.loads(p.read_text(encoding="utf-8"))
        ]
        assert len(results) == 1, f"{len(results)} trial results under {jobs}: {proc.stdout[-2000:]}"
        result = json.loads(results[0].read_text(encoding="utf-8"))
        # the trial's projects: <trial>__env (the agent and its services), <trial>__verifier__trial
        prefix = compose_project(result["trial_name"]) + "__"
        prefixes.append(prefix)
        projects = project_containers(prefix)
        services = dict(next((c for p, c in projects.items() if p.endswith("__env")), []))
        verifier = [cid for p, c in projects.items() if "__verifier__" in p for _, cid in c]
        # Harbor stopped them; the same configuration runs again (a container that shares another's network
        # after that one)
        stopped = [*services.values(), *verifier]
        shares = {
            c
            for c in stopped
            if docker("inspect", "--format", "{{.HostConfig.NetworkMode}}", c).startswith("container:")
        }
        for cid in sorted(stopped, key=lambda c: c in shares):
            docker("start", cid)
        assert "main" in services, f"no agent container among {projects}: {result.get('exception_info')}"
        return Trial(
            jobs_dir=jobs,
            result=result,
            trial_dir=results[0].parent,
            agent_container=services["main"],
            verifier_container=verifier[0] if verifier else None,
            services=services,
        )

    yield run
    for prefix in prefixes:
        remove_projects(prefix)
