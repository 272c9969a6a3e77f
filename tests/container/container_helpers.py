"""Helpers of the container tests: Docker and `spu` commands, the trial record, the answers search."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import uuid
from dataclasses import dataclass
from pathlib import Path

from environment.harbor.leaks import fingerprints

REPO = Path(__file__).resolve().parents[2]
HARBOR = REPO / ".harbor-venv" / "bin" / "harbor"
#: every trial these tests run is named (by its task folder) with this prefix, unique to the session, and
#: only compose projects that carry it are ever started again, inspected or removed
PREFIX = f"spuct{uuid.uuid4().hex[:6]}"


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


def answer_fingerprints(answers_path: Path) -> list[str]:
    """The strings only the answers hold (environment/harbor/leaks.py, the export's own check): each
    measured value beside its experiment id (as JSON and as CSV), each source, DOI and author key."""
    return fingerprints(json.loads(answers_path.read_text(encoding="utf-8"))).fixed


#: grep the paths given as arguments (default: every top-level folder but /proc, /sys and /dev) for the
#: patterns given on standard input
SEARCH = (
    'cat > /tmp/.spu-patterns; if [ "$#" = 0 ]; then for d in /*; do case $d in /proc|/sys|/dev) ;; '
    '*) set -- "$@" "$d";; esac; done; fi; grep -rlF -f /tmp/.spu-patterns --exclude=.spu-patterns "$@"; '
    "s=$?; rm -f /tmp/.spu-patterns; exit $s"
)


def search_container(container: str, patterns: list[str], paths: list[str] | None = None) -> list[str]:
    """Files in the container holding one of ``patterns``: under ``paths``, or anywhere but /proc, /sys and
    /dev."""
    proc = subprocess.run(
        ["docker", "exec", "-i", "-u", "0", container, "sh", "-c", SEARCH, "search", *(paths or [])],
        input="\n".join(patterns) + "\n",
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    # grep: 0 found, 1 none found, 2 unreadable or vanished files (as root: only special files)
    assert proc.returncode in (0, 1, 2), proc.stderr[-2000:]
    return [line for line in proc.stdout.splitlines() if line]


def changed_paths(container: str) -> list[str]:
    """What a container added or changed over its image (``docker diff``), with the task under /app."""
    lines = docker("diff", container).splitlines()
    return sorted({"/app", *(line[2:] for line in lines if line[:2] in ("A ", "C "))})


EVERY_ANSWERS = sorted((REPO / "environment").rglob("answers.json"))
#: any answers file or task spec folder in a container's filesystem
FIND_ANSWER_FILES = "find / -xdev \\( -name answers.json -o -path '*/tasks/*/spec/*' \\) -print"


def check_sandbox(trial: Trial) -> None:
    """No answer value in what the trial put into the agent's container (the task under /app and every file
    the trial added or changed: the image itself is searched once, by test_image_holds_no_answers), no
    answers file or task spec anywhere in it, and :func:`check_no_network`."""
    patterns = [p for path in EVERY_ANSWERS for p in answer_fingerprints(path)]
    assert search_container(trial.agent_container, patterns, changed_paths(trial.agent_container)) == []
    assert docker("exec", "-u", "0", trial.agent_container, "sh", "-c", FIND_ANSWER_FILES).strip() == ""
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
