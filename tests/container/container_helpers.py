"""Helpers of the container tests: Docker and `spu` commands, the trial record, the content scan."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from shipped_files import every_task_scanner

from environment.demo_tasks import demo_answers_path, demo_task_dir
from environment.leakscan import scan_stream

REPO = Path(__file__).resolve().parents[2]
HARBOR = REPO / ".harbor-venv" / "bin" / "harbor"
#: every trial these tests run is named (by its task folder) with this prefix, unique to the session, and
#: only compose projects that carry it are ever started again, inspected or removed
PREFIX = f"spuct{uuid.uuid4().hex[:6]}"
#: the shared tag of the test image (each session runs its own tag of it: :func:`own_tag`); another tag keeps
#: two checkouts on one engine apart
TEST_IMAGE = os.environ.get("SPU_TEST_IMAGE", "spu-scaffold:test")


def own_tag(shared: str) -> str:
    """This session's own tag for an image whose shared tag is ``shared`` (``spu-scaffold:test`` ->
    ``spu-scaffold:test-<PREFIX>``): the tests run only images no other session can re-tag meanwhile."""
    repository, _, tag = shared.rpartition(":")
    return f"{repository}:{tag}-{PREFIX}"


@contextlib.contextmanager
def build_lock() -> Iterator[None]:
    """One test-image build at a time on this machine: a second session's build of the same sources then
    takes Docker's layer cache instead of building the same layers at once."""
    with open(Path(tempfile.gettempdir()) / "spu-test-image-build.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def build_image(shared: str, build: Callable[[str], None]) -> str:
    """``build(tag)`` for this session's own tag of ``shared``, then the result tagged ``shared`` as well
    (what a user finds, and what keeps the layers cached once the session's tag is removed:
    :func:`remove_image`). Returns the session's tag."""
    tag = own_tag(shared)
    with build_lock():
        build(tag)
        docker("tag", tag, shared)
    return tag


def build_script(kind: str, tag: str, **variables: str) -> None:
    """``scripts/build-image.sh KIND`` (``cpu`` or ``gpu``) tagging ``tag``, with build variables
    (``SPU_EXTRAS``, ``SPU_BASE_IMAGE``)."""
    proc = subprocess.run(
        ["bash", str(REPO / "scripts" / "build-image.sh"), kind],
        capture_output=True,
        text=True,
        env={**os.environ, **variables, "SPU_IMAGE": tag},
        timeout=3600,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]


def remove_image(tag: str) -> None:
    """Remove a session's tag (the image stays under its shared tag, or goes with its last tag)."""
    subprocess.run(["docker", "rmi", tag], capture_output=True, timeout=300, check=False)


def task_dir(tmp_path: Path, name: str) -> Path:
    """Where to export a task for the ``run_trial`` fixture: Harbor names the trial, and so its compose
    projects, after this folder, so they start with :data:`PREFIX`."""
    return tmp_path / f"{PREFIX}-{name}"


def harbor_env() -> dict[str, str]:
    # no telemetry, no remote LiteLLM price map; scaffold importable (--agent scaffold.harbor_agent:SpuAgent),
    # and the tests' own agent (--agent scripted_agent:ScriptedAgent)
    here = str(Path(__file__).resolve().parent)
    return {
        **os.environ,
        "HARBOR_TELEMETRY": "0",
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), here, os.environ.get("PYTHONPATH")])),
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


def grade_demo(rankings: Path, slug: str) -> dict:
    """`spu grade --json` of a submission to a demo task, with its answers."""
    answers = demo_answers_path(slug)
    return json.loads(
        spu(
            "grade", str(rankings), "--task", str(demo_task_dir(slug)), "--answers", str(answers), "--json"
        ).stdout
    )


def docker(*args: str, check: bool = True, input: str | None = None, timeout: float = 600) -> str:
    proc = subprocess.run(
        ["docker", *args], capture_output=True, text=True, input=input, timeout=timeout, check=False
    )
    if check:
        assert proc.returncode == 0, f"docker {' '.join(args)}: {proc.stderr[-2000:]}"
    return proc.stdout


@dataclass
class Trial:
    """One finished `harbor run` with its containers kept (keep_containers) until the test ends."""

    jobs_dir: Path
    result: dict
    trial_dir: Path
    agent_container: str
    verifier_container: str | None
    #: compose service name -> container id, of the agent's project (the agent is ``main``)
    services: dict[str, str]


def compose_project(name: str) -> str:
    """The compose project name Harbor derives from a session or trial name (its own rule, re-stated)."""
    name = name.lower()
    if not re.match(r"^[a-z0-9]", name):
        name = "0" + name
    return re.sub(r"[^a-z0-9_-]", "-", name)


def project_containers(prefix: str) -> dict[str, list[tuple[str, str]]]:
    """Compose projects whose name starts with ``prefix``: project -> [(service, container id)]. Only
    these are ever touched by the tests: other work on the same Docker engine is left alone."""
    lines = docker(
        "ps",
        "-a",
        "--no-trunc",
        "--filter",
        "label=com.docker.compose.project",
        "--format",
        '{{.ID}} {{.Label "com.docker.compose.project"}} {{.Label "com.docker.compose.service"}}',
    ).splitlines()
    found: dict[str, list[tuple[str, str]]] = {}
    for line in lines:
        cid, project, service = [*line.split(), "", ""][:3]
        if project.startswith(prefix):
            found.setdefault(project, []).append((service, cid))
    return found


def remove_projects(prefix: str) -> None:
    """`docker compose down` every project whose name starts with ``prefix``, with the images built for
    it (the verifier's holds the answers) and its volumes (the audit service's socket folder)."""
    for project in project_containers(prefix):
        subprocess.run(
            [
                "docker",
                "compose",
                "-p",
                project,
                "down",
                "--rmi",
                "local",
                "-v",
                "--remove-orphans",
                "-t",
                "0",
            ],
            capture_output=True,
            timeout=300,
            check=False,
        )


def scan_container(container: str, paths: list[str]) -> list[str]:
    """What of any task's marks the files under ``paths`` in the container hold (the content scanner,
    environment/leakscan, on each path copied out as a tar stream by ``docker cp``)."""
    tops = [
        p for p in sorted(set(paths)) if not any(p.startswith(q.rstrip("/") + "/") for q in paths if q != p)
    ]
    found = []
    for path in tops:
        proc = subprocess.Popen(["docker", "cp", f"{container}:{path}", "-"], stdout=subprocess.PIPE)
        assert proc.stdout is not None
        found += [f"{f.where}: {f.what}" for f in scan_stream(path, proc.stdout, every_task_scanner())]
        proc.stdout.close()
        assert proc.wait(timeout=600) == 0, f"docker cp {container}:{path} failed"
    return found


def changed_paths(container: str) -> list[str]:
    """What a container added or changed over its image (``docker diff``), with the task under /app
    (:func:`paths_to_scan`)."""
    return paths_to_scan(docker("diff", container))


def paths_to_scan(diff: str) -> list[str]:
    """From ``docker diff``'s lines: ``/app``, every added path, and every changed one but a folder listed
    only because something under it changed (``C /usr`` for an added ``/usr/sbin/docker-init``: the rest of
    /usr is the image's, which test_images.py reads whole)."""
    lines = diff.splitlines()
    added = {line[2:] for line in lines if line[:2] == "A "}
    changed = {line[2:] for line in lines if line[:2] == "C "}
    listed = {line[2:] for line in lines}
    leaves = {p for p in changed if not any(q.startswith(p.rstrip("/") + "/") for q in listed)}
    return sorted({"/app", *added, *leaves})


def check_sandbox(trial: Trial) -> None:
    """No task's marks in what the trial put into the agent's container (the task under /app and every file
    the trial added or changed: the image's layers are read once, whole, by test_images.py), and
    :func:`check_no_network`."""
    assert scan_container(trial.agent_container, changed_paths(trial.agent_container)) == []
    check_no_network(trial)


def check_no_network(trial: Trial) -> None:
    """No network in the agent's (--network none) and the verifier's containers: only loopback."""
    assert trial.verifier_container is not None, "the separate verifier's container was not kept"
    for container in [trial.agent_container, trial.verifier_container]:
        assert docker("inspect", "--format", "{{.HostConfig.NetworkMode}}", container).strip() == "none"
        interfaces = [
            line.split(":")[0].strip()
            for line in docker("exec", container, "cat", "/proc/net/dev").splitlines()[2:]
        ]
        assert interfaces == ["lo"], interfaces
