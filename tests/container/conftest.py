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
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
HARBOR = REPO / ".harbor-venv" / "bin" / "harbor"
TEST_IMAGE = "spu-scaffold:test"
#: keep the trial's containers (inspected, then removed by the fixture); no prompts; no progress display
KEEP = ("--no-delete", "-y", "-q")
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


def harbor_env() -> dict[str, str]:
    # no telemetry, no remote LiteLLM price map; scaffold importable (--agent scaffold.harbor_agent:SpuAgent)
    return {
        **os.environ,
        "HARBOR_TELEMETRY": "0",
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
    }


def spu(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    proc = subprocess.run(
        [sys.executable, "-m", "spu.cli", *args],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=600,
        check=False,
    )
    if check:
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc


def docker(*args: str, check: bool = True, input: str | None = None, timeout: float = 600) -> str:
    proc = subprocess.run(
        ["docker", *args], capture_output=True, text=True, input=input, timeout=timeout, check=False
    )
    if check:
        assert proc.returncode == 0, f"docker {' '.join(args)}: {proc.stderr[-2000:]}"
    return proc.stdout


@dataclass
class Trial:
    """One finished `harbor run` with its containers kept (--no-delete) until the test ends."""

    jobs_dir: Path
    result: dict
    trial_dir: Path
    agent_container: str
    verifier_container: str | None


def _containers() -> set[str]:
    return set(docker("ps", "-aq", "--no-trunc").split())


def _has_path(container: str, path: str) -> bool:
    return (
        subprocess.run(
            ["docker", "exec", container, "test", "-e", path], capture_output=True, timeout=60, check=False
        ).returncode
        == 0
    )


@pytest.fixture
def run_trial(tmp_path) -> Iterator:
    """``run_trial(task_dir, *harbor_args)``: `harbor run` on an exported task; the agent's and the
    verifier's containers are kept for inspection and removed (compose down) afterwards."""
    projects: set[str] = set()

    def run(task_dir: Path, *args: str) -> Trial:
        jobs = tmp_path / f"jobs-{uuid.uuid4().hex[:8]}"
        before = _containers()
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
        new = sorted(_containers() - before)
        for cid in new:
            labels = json.loads(docker("inspect", "--format", "{{json .Config.Labels}}", cid)) or {}
            if "com.docker.compose.project" in labels:
                projects.add(labels["com.docker.compose.project"])
        results = [
            p for p in jobs.rglob("result.json") if "trial_name" in json.loads(p.read_text(encoding="utf-8"))
        ]
        assert len(results) == 1, f"{len(results)} trial results under {jobs}: {proc.stdout[-2000:]}"
        running = [c for c in new if docker("inspect", "--format", "{{.State.Running}}", c).strip() == "true"]
        agent = [c for c in running if _has_path(c, "/app/task/contract.json") and not _has_path(c, "/tests")]
        verifier = [c for c in running if _has_path(c, "/tests/test.sh")]
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
            ["docker", "compose", "-p", project, "down", "--remove-orphans", "--timeout", "5"],
            capture_output=True,
            timeout=300,
            check=False,
        )


def answer_fingerprints(answers_path: Path) -> list[str]:
    """Strings that only the answers hold: each measured value written beside its experiment id (as JSON
    and as CSV), and each value's source citation."""
    answers = json.loads(answers_path.read_text(encoding="utf-8"))
    found = []
    for group in answers["groups"]:
        for eid, value in group["values"].items():
            found += [f'"{eid}": {json.dumps(value)}', f"{eid},{value}"]
        found += [s for s in (group.get("sources") or {}).values() if isinstance(s, str) and len(s) >= 24]
    return sorted(set(found))


#: grep every top-level folder but /proc, /sys and /dev for the patterns given on standard input
SEARCH = (
    "cat > /tmp/.spu-patterns; roots=; for d in /*; do case $d in /proc|/sys|/dev) ;; "
    '*) roots="$roots $d";; esac; done; grep -rlF -f /tmp/.spu-patterns --exclude=.spu-patterns $roots; '
    "s=$?; rm -f /tmp/.spu-patterns; exit $s"
)


def search_container(container: str, patterns: list[str]) -> list[str]:
    """Files anywhere in the container's filesystem (but /proc, /sys, /dev) holding one of ``patterns``."""
    proc = subprocess.run(
        ["docker", "exec", "-i", "-u", "0", container, "sh", "-c", SEARCH],
        input="\n".join(patterns) + "\n",
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    # grep: 0 found, 1 none found, 2 unreadable files (as root there are none but special files)
    assert proc.returncode in (0, 1, 2), proc.stderr[-2000:]
    return [line for line in proc.stdout.splitlines() if line]
