"""Helpers of the container tests: Docker and `spu` commands, the trial record, the answers search."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
HARBOR = REPO / ".harbor-venv" / "bin" / "harbor"


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


def containers() -> set[str]:
    return set(docker("ps", "-aq", "--no-trunc").split())


def has_path(container: str, path: str) -> bool:
    return (
        subprocess.run(
            ["docker", "exec", container, "test", "-e", path], capture_output=True, timeout=60, check=False
        ).returncode
        == 0
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


EVERY_ANSWERS = sorted((REPO / "environment").rglob("answers.json"))
#: any answers file or task spec folder in a container's filesystem
FIND_ANSWER_FILES = "find / -xdev \\( -name answers.json -o -path '*/tasks/*/spec/*' \\) -print"


def check_sandbox(trial: Trial) -> None:
    """No answer value in the agent's container; no network in the agent's (--network none) and the
    verifier's containers (only loopback)."""
    patterns = [p for path in EVERY_ANSWERS for p in answer_fingerprints(path)]
    assert search_container(trial.agent_container, patterns) == []
    assert docker("exec", "-u", "0", trial.agent_container, "sh", "-c", FIND_ANSWER_FILES).strip() == ""
    for container in filter(None, [trial.agent_container, trial.verifier_container]):
        assert docker("inspect", "--format", "{{.HostConfig.NetworkMode}}", container).strip() == "none"
        interfaces = [
            line.split(":")[0].strip()
            for line in docker("exec", container, "cat", "/proc/net/dev").splitlines()[2:]
        ]
        assert interfaces == ["lo"], interfaces
    assert trial.verifier_container is not None, "the separate verifier's container was not kept"
