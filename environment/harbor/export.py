"""Export a task directory as a Harbor task (``spu harbor export TASK_DIR OUT_DIR``).

Layout written (Harbor's task format, checked by ``harbor lint`` and ``harbor.models.task.config.TaskConfig``
in ``tests/integration/test_harbor.py``)::

    OUT_DIR/task.toml              resources (the machine's with ``profile="local"``; 8 CPUs, 16 GiB, 1 GPU
                                   with ``profile="benchmark"``), 8 h agent timeout, network policy, the spu
                                   MCP server, separate verifier, the boundary's lock (healthcheck) and
                                   collect hook, /app/collected collected as artifact
    OUT_DIR/instruction.md         the task's instruction plus where things are in the container
    OUT_DIR/environment/Dockerfile FROM our image (Dockerfile, Dockerfile.gpu), the task in /app/task
    OUT_DIR/environment/task/      the task directory (never the answers)
    OUT_DIR/environment/docker-compose.yaml
                                   the agent's container: root as PID 1 behind an init, a 1 s healthcheck;
                                   ``network_mode: none`` with ``network="none"``, and with
                                   ``network="audited"`` (no ``audit_url``), where the audit service's Unix
                                   socket, in a folder shared read-only, is the agent's only way out
    OUT_DIR/tests/Dockerfile       the verifier's own image: our image plus tests/ in /tests
    OUT_DIR/tests/docker-compose.yaml
                                   ``network_mode: none`` for the verifier (a plain Docker engine enforces
                                   it; Harbor's own no-network policy needs extra images from a registry)
    OUT_DIR/tests/test.sh          the verifier: `spu grade` with the hidden answers
                                   -> /logs/verifier/reward.json
    OUT_DIR/tests/answers.json     the answers: only the verifier's image and container ever hold tests/
    OUT_DIR/tests/task/            the task as graded (contract and targets), so grading needs nothing else
    OUT_DIR/solution/solve.sh      only with ``oracle=True``: writes the measured order
                                   (for `harbor run -a oracle`)

The verifier runs in Harbor's *separate* verifier mode: a fresh container built from ``tests/`` (our image
plus the tests), without network, into which Harbor restores what the collect hook copied out of the agent's
``/app/output`` (``environment/harbor/boundary.py``). So the answers never enter the agent's sandbox, and
nothing the agent leaves behind (a process, a link, a pipe, a huge file) reaches the grader or the host.
Before anything is handed over, every file outside ``tests/`` and ``solution/`` is checked for the answers'
marks by the content scanner (``environment/leakscan``).

The environment part imports neither ``scaffold`` nor ``tools_server`` (``tests/core/test_layers.py``).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

from environment.finder import find_answers
from environment.leakscan import ScanLimitError, Scanner, marks_beside, scan_path
from spu_common.task import Answers, Task, check_answers, load_task

#: The images built from Dockerfile.gpu and Dockerfile (docs/docker.md); the export takes the GPU one when
#: its resources hold a GPU. Pin one by digest for shared runs: ``--image registry/spu-scaffold@sha256:...``.
GPU_IMAGE = "spu-scaffold:gpu"
CPU_IMAGE = "spu-scaffold:cpu"
DEFAULT_IMAGE = GPU_IMAGE
CONTAINER_TASK_DIR = "/app/task"
CONTAINER_OUTPUT_DIR = "/app/output"
#: the output as collected after the agent (environment/harbor/boundary.py): what the verifier grades
COLLECTED_DIR = "/app/collected"
GRADED_SUBMISSION = f"{COLLECTED_DIR}/output/rankings.json"
#: the local audit service of ``--network audited`` without ``--audit-url``, and where its log is kept
AUDIT_SERVICE = "spu-audit"
AUDIT_LOG_DIR = "/srv/spu/audit"  # in the home of the image's user, who runs the service
#: the folder the agent's container shares with the audit service (read-only on the agent's side): the
#: service's Unix socket, the agent's only way to it (the agent's container has no network)
AUDIT_SOCKET_DIR = "/run/spu-audit"
AUDIT_SOCKET = f"{AUDIT_SOCKET_DIR}/audit.sock"
AGENT_USER = "spu"
AGENT_TIMEOUT_S = 8 * 3600
VERIFIER_TIMEOUT_S = 600
BUILD_TIMEOUT_S = 3600

#: Hosts the audited web tools reach (tools_server/web): search providers and scholarly databases.
PROVIDER_HOSTS = (
    "api.search.brave.com",
    "api.tavily.com",
    "google.serper.dev",
    "api.exa.ai",
    "html.duckduckgo.com",
    "www.ebi.ac.uk",
    "europepmc.org",
    "eutils.ncbi.nlm.nih.gov",
    "pubmed.ncbi.nlm.nih.gov",
    "api.crossref.org",
    "api.openalex.org",
    "export.arxiv.org",
    "pubchem.ncbi.nlm.nih.gov",
    "rest.uniprot.org",
    "www.uniprot.org",
    "data.rcsb.org",
    "files.rcsb.org",
    "www.rcsb.org",
)

#: --network choices: Harbor network_mode and allowed hosts for the agent's container.
NETWORK_CHOICES = ("public", "providers", "audited", "none")

#: --profile choices. ``benchmark``: the SPU setting (8 CPUs, 16 GiB, 1 GPU). ``local``: what this machine
#: can give (Docker refuses more CPUs than the machine has, and a GPU where there is none).
BENCHMARK_RESOURCES = {"cpus": 8, "memory_mb": 16384, "gpus": 1}
PROFILE_CHOICES = ("local", "benchmark")

#: What the boundary runs inside the agent's container (environment/harbor/boundary.py), as root: the
#: healthcheck locks the verifier's folders before the agent starts; the collect hook ends the agent's
#: processes and copies its output for the verifier once the agent's command has returned.
LOCK_COMMAND = f"python -I -m environment.harbor.boundary lock --user {AGENT_USER}"
COLLECT_COMMAND = (
    f"python -I -m environment.harbor.boundary collect --user {AGENT_USER} --output {CONTAINER_OUTPUT_DIR} "
    f"--into {COLLECTED_DIR} --clean /logs/agent --clean /logs/artifacts"
)

#: Compose settings of every container of a trial: PID 1 an init that passes SIGTERM on, so the container
#: stops at once (a shell as PID 1 ignores it and Docker waits its 10 s grace period), and a first
#: healthcheck after 1 s (Docker Engine before 25 has no start interval; `compose up --wait` waits for it)
FAST_START_STOP = """    init: true
    healthcheck:
      test: ["CMD", "true"]
      interval: 1s
      timeout: 10s
      retries: 30
"""


class ExportError(ValueError):
    """The export cannot be written as asked; the message says what to fix."""


def _toml_str(value: str) -> str:
    # A JSON string is a valid TOML basic string (same escapes, \uXXXX included).
    return json.dumps(value, ensure_ascii=False)


def _toml_list(values: list[str]) -> str:
    return "[" + ", ".join(_toml_str(v) for v in values) + "]"


def answers_of(task: Task, answers: str | Path | None) -> tuple[Path, Answers]:
    """The answers of ``task`` by :mod:`environment.finder`'s rules: from ``answers`` (a file, or a folder
    searched for the file with the task's id), else the ``answers.json`` beside the task directory."""
    source = Path(answers) if answers is not None else task.root.parent / "answers.json"
    if answers is None and not source.is_file():
        raise ExportError(f"no answers: pass --answers (none found beside {task.root})")
    found = find_answers(source).get(task.task_id)
    if found is None:
        raise ExportError(f"no answers for task {task.task_id!r} in {source}: pass its answers.json")
    return found.path, found.answers


def network_policy(network: str, audit_url: str | None, extra_hosts: list[str]) -> tuple[str, list[str]]:
    """(Harbor ``network_mode``, ``allowed_hosts``) for the agent's container."""
    if network not in NETWORK_CHOICES:
        raise ExportError(f"--network must be one of {', '.join(NETWORK_CHOICES)}; got {network!r}")
    if network == "public":
        if extra_hosts:
            raise ExportError("--allow-host needs --network providers or audited")
        return "public", []
    if network == "none":
        # enforced by a compose overlay (NO_NETWORK_COMPOSE): Harbor's own no-network policy needs extra
        # images from a registry that a plain Docker engine may not reach
        return "none", []
    if network == "providers":
        return "allowlist", list(dict.fromkeys([*PROVIDER_HOSTS, *extra_hosts]))
    if not audit_url:
        # the local audit service beside the agent (render_agent_compose): a plain Docker engine enforces it
        if extra_hosts:
            raise ExportError("--allow-host needs --network providers, or audited with --audit-url")
        return "audited", []
    from urllib.parse import urlsplit

    parts = urlsplit(audit_url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ExportError(
            f"--audit-url {audit_url!r} is not an http(s) URL with a host; leave --audit-url out for the "
            "audit service beside the agent, reached through its Unix socket"
        )
    host = parts.hostname
    return "allowlist", list(dict.fromkeys([host, *extra_hosts]))


def _count_gpus() -> int:
    """GPUs that ``nvidia-smi -L`` lists (0 without the tool or a driver)."""
    try:
        listing = subprocess.run(
            ["nvidia-smi", "-L"], capture_output=True, text=True, timeout=30, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return 0
    if listing.returncode != 0:
        return 0
    return sum(1 for line in listing.stdout.splitlines() if line.startswith("GPU "))


def profile_resources(profile: str) -> dict[str, int]:
    """CPUs, memory (MB) and GPUs of ``profile``: ``benchmark`` is the SPU setting; ``local`` is the same
    capped at what this machine has (its CPUs, three quarters of its memory, its GPUs)."""
    if profile not in PROFILE_CHOICES:
        raise ExportError(f"--profile must be one of {', '.join(PROFILE_CHOICES)}; got {profile!r}")
    if profile == "benchmark":
        return dict(BENCHMARK_RESOURCES)
    import psutil

    memory_mb = int(psutil.virtual_memory().total / 2**20 * 0.75)
    return {
        "cpus": max(1, min(BENCHMARK_RESOURCES["cpus"], os.cpu_count() or 1)),
        "memory_mb": max(512, min(BENCHMARK_RESOURCES["memory_mb"], memory_mb)),
        "gpus": min(BENCHMARK_RESOURCES["gpus"], _count_gpus()),
    }


def _is_smoke_test(task: Task) -> bool:
    """A demo task labelled as a pipeline smoke test in its contract (not a benchmark task)."""
    try:
        return json.loads((task.root / "contract.json").read_text(encoding="utf-8")).get("smoke_test") is True
    except (OSError, ValueError, AttributeError):
        return False


def _task_env(network_mode: str, audit_url: str | None) -> dict[str, str]:
    """The variables the agent's container and its tool server get: the work folder, the task folder as an
    input root (readable by the tools wherever the agent's client starts the server), and the audit
    service's address with a token resolved from the host at run time (never written into the task)."""
    env = {"SPU_WORKDIR": f"{CONTAINER_OUTPUT_DIR}/spu-work", "SPU_INPUT_ROOTS": CONTAINER_TASK_DIR}
    if network_mode == "audited":
        audit_url = f"unix://{AUDIT_SOCKET}"
    if audit_url:
        env |= {"SPU_AUDIT_URL": audit_url, "SPU_AUDIT_TOKEN": "${SPU_AUDIT_TOKEN}"}
    return env


def _task_lines(task: Task, org: str, network_mode: str) -> list[str]:
    """The schema, the artifacts collected after the trial, ``[task]`` and ``[metadata]``."""
    artifacts = [_toml_str(COLLECTED_DIR)]
    if network_mode == "audited":
        artifacts.append(f"{{source = {_toml_str(AUDIT_LOG_DIR)}, service = {_toml_str(AUDIT_SERVICE)}}}")
    return [
        "# Written by `spu harbor export` (spu-scaffold). Harbor task format: schema 1.4.",
        'schema_version = "1.4"',
        "# the agent's output as the collect hook below copied it (regular files only, within limits)",
        f"artifacts = [{', '.join(artifacts)}]",
        "",
        "[task]",
        f"name = {_toml_str(f'{org}/{task.task_id}')}",
        f"version = {_toml_str(task.task_version)}",
        f"description = {_toml_str(task.title or task.task_id)}",
        f"keywords = {_toml_list(['spu', 'ranking', 'wet-lab prediction'])}",
        "",
        "[metadata]",
        f"spu_task_id = {_toml_str(task.task_id)}",
        f"spu_task_version = {_toml_str(task.task_version)}",
        f"groups = {len(task.groups)}",
        f"experiments = {task.n_experiments}",
        f"submission = {_toml_str(f'{CONTAINER_OUTPUT_DIR}/rankings.json')}",
        *(["smoke_test = true"] if _is_smoke_test(task) else []),
    ]


def _agent_and_verifier_lines(agent_timeout_s: int, cpus: int, memory_mb: int) -> list[str]:
    """``[agent]``, the separate verifier's ``[verifier]`` and the collect hook that hands it the output."""
    return [
        "[agent]",
        f"timeout_sec = {float(agent_timeout_s)}",
        f"user = {_toml_str(AGENT_USER)}",
        "",
        "[verifier]",
        f"timeout_sec = {float(VERIFIER_TIMEOUT_S)}",
        'environment_mode = "separate"',
        "",
        "# The verifier's own container, built from tests/ (our image plus the tests): no GPU, no network",
        "# through tests/docker-compose.yaml (network_mode: none), which a plain Docker engine enforces.",
        "[verifier.environment]",
        f"build_timeout_sec = {float(BUILD_TIMEOUT_S)}",
        f"cpus = {min(2, cpus)}",
        f"memory_mb = {min(4096, memory_mb)}",
        'network_mode = "public"',
        "",
        "# After the agent's command: end every process of the agent's user, then copy its output into",
        f"# {COLLECTED_DIR} (root-owned) and clean the log folders mounted from the host (docs/harbor.md).",
        "[[verifier.collect]]",
        f"command = {_toml_str(COLLECT_COMMAND)}",
        'user = "root"',
        "timeout_sec = 600.0",
    ]


def _network_lines(network_mode: str, allowed_hosts: list[str]) -> list[str]:
    """The agent's network in ``[environment]``: Harbor's own policy, or the compose file's."""
    lines = []
    if network_mode in ("none", "audited"):
        lines.append(
            "# the network is set by environment/docker-compose.yaml, which a plain Docker engine enforces"
        )
    lines.append(
        f"network_mode = {_toml_str(network_mode if network_mode in ('public', 'allowlist') else 'public')}"
    )
    if network_mode == "allowlist":
        lines.append(f"allowed_hosts = {_toml_list(allowed_hosts)}")
    return lines


def _environment_lines(resources: dict[str, int], gpu_types: list[str], network: list[str]) -> list[str]:
    """``[environment]`` (resources, network, work folder) and the lock run before the agent starts."""
    return [
        "[environment]",
        f"build_timeout_sec = {float(BUILD_TIMEOUT_S)}",
        f"cpus = {resources['cpus']}",
        f"memory_mb = {resources['memory_mb']}",
        f"gpus = {resources['gpus']}",
        *([f"gpu_types = {_toml_list(gpu_types)}"] if gpu_types else []),
        *network,
        f"workdir = {_toml_str('/app')}",
        "",
        "# Run as root (the container's user: environment/docker-compose.yaml) before the agent starts:",
        "# makes /logs/verifier root-only; checks that the agent's user can write neither it nor /tests.",
        "[environment.healthcheck]",
        f"command = {_toml_str(LOCK_COMMAND)}",
        "interval_sec = 1.0",
        "timeout_sec = 60.0",
        "retries = 1",
    ]


def _env_and_mcp_lines(env: dict[str, str]) -> list[str]:
    """``[environment.env]`` and the spu tool server the agent's MCP client starts, with its settings."""
    server_env = [f"{key}={value}" for key, value in env.items() if key != "SPU_AUDIT_TOKEN"]
    return [
        "[environment.env]",
        *(f"{key} = {_toml_str(value)}" for key, value in env.items()),
        "",
        "# The spu tool server, started by the agent's MCP client over stdio. `env` hands it its settings:",
        "# Codex starts MCP servers with only a few variables of its own (without SPU_WORKDIR the server",
        "# would write ./spu-work into /app, which only root may write, and fail).",
        "[[environment.mcp_servers]]",
        'name = "spu"',
        'transport = "stdio"',
        'command = "env"',
        f"args = {_toml_list([*server_env, 'spu', 'serve'])}",
    ]


def render_task_toml(
    task: Task,
    *,
    org: str,
    network_mode: str,
    allowed_hosts: list[str],
    audit_url: str | None,
    gpu_types: list[str],
    cpus: int,
    memory_mb: int,
    gpus: int,
    agent_timeout_s: int,
) -> str:
    """``task.toml``: the task, the agent, the separate verifier, the agent's environment and tool server."""
    resources = {"cpus": cpus, "memory_mb": memory_mb, "gpus": gpus}
    sections = [
        _task_lines(task, org, network_mode),
        _agent_and_verifier_lines(agent_timeout_s, cpus, memory_mb),
        _environment_lines(resources, gpu_types, _network_lines(network_mode, allowed_hosts)),
        _env_and_mcp_lines(_task_env(network_mode, audit_url)),
    ]
    return "\n\n".join("\n".join(lines) for lines in sections) + "\n"


def render_agent_compose(network_mode: str, image: str) -> str:
    """``environment/docker-compose.yaml``: the agent's container ("main") as the boundary needs it, and
    for ``--network audited`` (without ``--audit-url``) the audit service it reaches the web through."""
    lines = [
        "# Written by `spu harbor export`: the agent's container (Harbor's service `main`).",
        "services:",
        "  main:",
        "    # PID 1 and Harbor's own commands run as root (the lock and the collect hook of task.toml);",
        f"    # the agent runs as {AGENT_USER} (task.toml [agent] user)",
        '    user: "0"',
        FAST_START_STOP.rstrip("\n"),
    ]
    if network_mode == "none":
        lines.append("    network_mode: none  # loopback only")
    if network_mode == "audited":
        lines += [
            "    # no network at all (loopback only): the audit service is reached through its socket, in a",
            "    # folder shared read-only (the agent can neither replace the socket nor write there)",
            "    network_mode: none",
            "    volumes:",
            "      - type: volume",
            f"        source: {AUDIT_SERVICE}-socket",
            f"        target: {AUDIT_SOCKET_DIR}",
            "        read_only: true",
            "    depends_on:",
            f"      {AUDIT_SERVICE}:",
            "        condition: service_healthy",
            f"  {AUDIT_SERVICE}:",
            f"    image: {image}",
            "    # the log and its key stay in this container; task.toml collects them after the trial",
            f'    command: ["spu", "audit", "serve", "--socket", "{AUDIT_SOCKET}",'
            f' "--log", "{AUDIT_LOG_DIR}/audit.jsonl"]',
            "    environment:",
            "      SPU_AUDIT_TOKEN: ${SPU_AUDIT_TOKEN:?set SPU_AUDIT_TOKEN to 32 random characters}",
            "    volumes:",
            f"      - {AUDIT_SERVICE}-socket:{AUDIT_SOCKET_DIR}",
            f"    networks: [{AUDIT_SERVICE}-egress]",
            "    init: true",
            "    healthcheck:",
            '      test: ["CMD", "python", "-c",',
            f"             \"import socket; socket.socket(socket.AF_UNIX).connect('{AUDIT_SOCKET}')\"]",
            "      interval: 1s",
            "      timeout: 10s",
            "      retries: 60",
            "volumes:",
            f"  {AUDIT_SERVICE}-socket:",
            "    # in memory, gone with the trial; only the audit service writes it (read-only to the agent)",
            '    driver_opts: {type: tmpfs, device: tmpfs, o: "size=1m,mode=1777"}',
            "networks:",
            f"  {AUDIT_SERVICE}-egress: {{}}  # the audit service's way out; the agent's container has none",
        ]
    return "\n".join(lines) + "\n"


VERIFIER_COMPOSE = f"""# Written by `spu harbor export`: the verifier (no network: loopback only).
services:
  main:
    network_mode: none
{FAST_START_STOP}"""


def render_instruction(task: Task) -> str:
    files = sorted(p.name for p in task.root.iterdir() if p.is_file())
    return (
        task.instruction.rstrip()
        + f"""

## In this container

- The task directory is `{CONTAINER_TASK_DIR}` ({", ".join(f"`{f}`" for f in files)}); it is read-only.
- Your output directory is `{CONTAINER_OUTPUT_DIR}`: write `{CONTAINER_OUTPUT_DIR}/rankings.json` (graded) and
  `{CONTAINER_OUTPUT_DIR}/report.md`. Only this directory is kept after the run.
- The `spu` MCP server (`spu serve`) provides the audited web search and fetch, cheminformatics, xTB,
  DFT (GPU), molecular dynamics, protein and ranking tools; `spu --help` lists the command line.
  Check a draft with `spu validate {CONTAINER_TASK_DIR} {CONTAINER_OUTPUT_DIR}/rankings.json`.
"""
    )


def render_verifier_dockerfile(image: str) -> str:
    return f"""# Verifier image: the spu-scaffold image plus tests/ (the grader and the answers) in /tests.
# Harbor builds it for the separate verifier only; the agent's image never holds tests/.
FROM {image}
USER root
COPY . /tests/
RUN chmod 0755 /tests/test.sh
WORKDIR /tests
"""


def render_dockerfile(image: str) -> str:
    return f"""# Agent image: the spu-scaffold image plus this task's files; no answers.
FROM {image}
USER root
COPY task/ {CONTAINER_TASK_DIR}/
RUN mkdir -p {CONTAINER_OUTPUT_DIR} \\
    && chown -R {AGENT_USER}:{AGENT_USER} {CONTAINER_OUTPUT_DIR} \\
    && chmod -R a-w {CONTAINER_TASK_DIR}
ENV SPU_TASK_DIR={CONTAINER_TASK_DIR} \\
    SPU_OUTPUT_DIR={CONTAINER_OUTPUT_DIR} \\
    SPU_WORKDIR={CONTAINER_OUTPUT_DIR}/spu-work \\
    SPU_INPUT_ROOTS={CONTAINER_TASK_DIR}
WORKDIR /app
USER {AGENT_USER}
"""


TEST_SH = f"""#!/usr/bin/env bash
# Harbor verifier (separate container, no network): grade the agent's submission with the hidden answers
# through `spu grade`, then write Harbor's reward file. The reward is the strict SPU task score (the
# benchmark's official score): the weighted Spearman correlation over groups, -1 for a missing or rejected
# file (a schema departure anywhere rejects it) and per invalid group. `recovered_score` beside it is the
# score after recovering schema departures (equal to the reward for a file the strict grader accepts).
# The submission is the one the collect hook copied after ending the agent's processes; its record
# (collection.json: what it ended, copied and left out, and why) goes into grade.json as `collection`.
set -uo pipefail
SUBMISSION=${{SPU_SUBMISSION:-{GRADED_SUBMISSION}}}
COLLECTION=${{SPU_COLLECTION:-{COLLECTED_DIR}/collection.json}}
TESTS_DIR=$(cd "$(dirname "$0")" && pwd)
LOGS=${{SPU_VERIFIER_LOGS:-/logs/verifier}}
mkdir -p "$LOGS"
spu grade "$TESTS_DIR/task" "$SUBMISSION" --answers "$TESTS_DIR/answers.json" --json \\
    > "$LOGS/grade.json" 2> "$LOGS/grade.stderr"
status=$?
# spu grade: 0 valid, 1 invalid submission (still scored), anything else is a verifier failure
if [ "$status" -gt 1 ]; then
    echo "verifier: spu grade failed with exit status $status" >&2
    cat "$LOGS/grade.stderr" >&2
    exit "$status"
fi
python3 - "$LOGS/grade.json" "$LOGS/reward.json" "$COLLECTION" <<'PY'
import json, os, sys
grade = json.load(open(sys.argv[1], encoding="utf-8"))
try:  # a regular file of the collect hook's own making (root-owned, small); anything else is not read
    if not os.path.isfile(sys.argv[3]) or os.path.islink(sys.argv[3]) or os.path.getsize(sys.argv[3]) > 2**22:
        raise OSError("no collection record")
    grade["collection"] = json.load(open(sys.argv[3], encoding="utf-8"))
except (OSError, ValueError) as exc:
    grade["collection"] = {{"error": f"{{exc}}: the collect hook did not run or failed"}}
json.dump(grade, open(sys.argv[1], "w", encoding="utf-8"), indent=1)
reward = {{"reward": float(grade["score"]), "recovered_score": float(grade["recovered_score"]),
          "valid": 1 if grade["valid"] else 0}}
json.dump(reward, open(sys.argv[2], "w", encoding="utf-8"))
print(f"reward {{reward['reward']:.4f}} (valid: {{bool(reward['valid'])}}; "
      f"recovered score {{reward['recovered_score']:.4f}})")
PY
"""


def render_solution(task: Task, answers: Answers) -> str:
    """An oracle ``solve.sh`` writing the measured order (ties broken by id) into the output directory."""
    orders = []
    for group in task.groups:
        values = answers.group(group.group_id).values
        orders.append(
            {"group_id": group.group_id, "order": sorted(group.experiment_ids, key=lambda e: (values[e], e))}
        )
    submission = {"task_id": task.task_id, "task_version": task.task_version, "rankings": orders}
    return f"""#!/usr/bin/env bash
# Oracle: the measured order, for checking the pipeline with `harbor run -a oracle`. Holds the answers'
# order: Harbor uploads solution/ only for the oracle agent, never into the agent image.
set -euo pipefail
mkdir -p {CONTAINER_OUTPUT_DIR}
cat > {CONTAINER_OUTPUT_DIR}/rankings.json <<'JSON'
{json.dumps(submission, indent=1)}
JSON
"""


def _resources(profile: str, overrides: dict[str, int | None]) -> dict[str, int]:
    """The profile's CPUs, memory and GPUs, with the values given one by one in their place."""
    resources = profile_resources(profile)
    resources |= {key: value for key, value in overrides.items() if value is not None}
    return resources


def _fresh_folder(out: Path, overwrite: bool) -> None:
    """An empty ``out`` with ``environment/`` and ``tests/``: a non-empty one only with ``overwrite``."""
    if out.exists() and any(out.iterdir()):
        if not overwrite:
            raise ExportError(f"{out} is not empty (use --force to replace it)")
        shutil.rmtree(out)
    (out / "environment").mkdir(parents=True)
    (out / "tests").mkdir()


def _write_text(path: Path, text: str, *, executable: bool = False) -> None:
    path.write_text(text, encoding="utf-8")
    if executable:
        path.chmod(0o755)


def _write_agent_side(out: Path, task: Task, image: str, network_mode: str, task_toml: str) -> None:
    """What the agent's image is built from and what it reads: the task, its Dockerfile and compose file,
    ``task.toml`` and ``instruction.md``."""
    shutil.copytree(task.root, out / "environment" / "task")
    _write_text(out / "task.toml", task_toml)
    _write_text(out / "instruction.md", render_instruction(task))
    _write_text(out / "environment" / "Dockerfile", render_dockerfile(image))
    _write_text(out / "environment" / "docker-compose.yaml", render_agent_compose(network_mode, image))


def _write_verifier_side(out: Path, task: Task, answers_path: Path, image: str) -> None:
    """``tests/``: the task as graded, the answers, the verifier's image, compose file and script."""
    shutil.copytree(task.root, out / "tests" / "task")
    shutil.copyfile(answers_path, out / "tests" / "answers.json")
    _write_text(out / "tests" / "Dockerfile", render_verifier_dockerfile(image))
    _write_text(out / "tests" / "docker-compose.yaml", VERIFIER_COMPOSE)
    _write_text(out / "tests" / "test.sh", TEST_SH, executable=True)


def _write_oracle(out: Path, task: Task, answers: Answers) -> None:
    (out / "solution").mkdir()
    _write_text(out / "solution" / "solve.sh", render_solution(task, answers), executable=True)


def export_task(
    task_dir: str | Path,
    out_dir: str | Path,
    *,
    answers: str | Path | None = None,
    image: str | None = None,
    org: str = "spu",
    network: str = "public",
    audit_url: str | None = None,
    allow_hosts: list[str] | None = None,
    gpu_types: list[str] | None = None,
    profile: str = "local",
    cpus: int | None = None,
    memory_mb: int | None = None,
    gpus: int | None = None,
    agent_timeout_s: int = AGENT_TIMEOUT_S,
    oracle: bool = False,
    overwrite: bool = False,
) -> dict[str, Any]:
    """Write the Harbor task for ``task_dir`` into ``out_dir``; returns a summary of what was written.

    Resources come from ``profile`` (``local``: what this machine has; ``benchmark``: 8 CPUs, 16 GiB,
    1 GPU); ``cpus``, ``memory_mb`` and ``gpus`` override it one by one. ``image`` defaults to the GPU
    image when the resources hold a GPU, else to the CPU image. ``answers``: a file, or a folder searched
    for the task's (default: ``answers.json`` beside the task directory)."""
    resources = _resources(profile, {"cpus": cpus, "memory_mb": memory_mb, "gpus": gpus})
    image = image or (GPU_IMAGE if resources["gpus"] else CPU_IMAGE)
    task = load_task(task_dir)
    answers_path, loaded_answers = answers_of(task, answers)
    check_answers(task, loaded_answers)
    if answers_path.resolve().is_relative_to(task.root.resolve()):
        raise ExportError(f"{answers_path} lies inside the task directory: answers must be kept apart")
    network_mode, allowed_hosts = network_policy(network, audit_url, list(allow_hosts or []))
    task_toml = render_task_toml(
        task,
        org=org,
        network_mode=network_mode,
        allowed_hosts=allowed_hosts,
        audit_url=audit_url if network == "audited" else None,
        gpu_types=list(gpu_types or []),
        agent_timeout_s=agent_timeout_s,
        **resources,
    )
    out = Path(out_dir)
    _fresh_folder(out, overwrite)
    _write_agent_side(out, task, image, network_mode, task_toml)
    _write_verifier_side(out, task, answers_path, image)
    if oracle:
        _write_oracle(out, task, loaded_answers)
    try:
        leaked = _answer_leaks(out, answers_path, task)
    except ExportError:
        shutil.rmtree(out)
        raise
    if leaked:
        shutil.rmtree(out)
        raise ExportError(f"the answers would reach the agent: {', '.join(leaked)}")
    return {
        "task_id": task.task_id,
        "task_version": task.task_version,
        "out": str(out),
        "image": image,
        "profile": profile,
        **resources,
        "network_mode": network_mode,
        "allowed_hosts": allowed_hosts,
        "oracle": oracle,
        "files": sorted(str(p.relative_to(out)) for p in out.rglob("*") if p.is_file()),
    }


def _answer_leaks(out: Path, answers_path: Path, task: Task) -> list[str]:
    """Every document the agent's side of the export holds (all but tests/ and solution/, archives and
    compressed files opened) that holds the task's marks (:mod:`environment.leakscan`): a last check before
    the export is handed over. A file that cannot be read within the scanner's bounds is refused too."""
    scanner = Scanner([marks_beside(answers_path, task)])
    found: dict[str, list[str]] = {}
    for path in sorted(out.iterdir()):
        if path.name in ("tests", "solution"):
            continue
        try:
            findings = scan_path(path, scanner, name=path.name)
        except ScanLimitError as exc:
            raise ExportError(f"{exc}: the export cannot check it for the answers; leave it out") from None
        for finding in findings:
            found.setdefault(finding.where, []).append(finding.what)
    return [f"{where} ({'; '.join(whats)})" for where, whats in found.items()]
