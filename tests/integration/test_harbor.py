"""`spu harbor export` checked by Harbor's own code (harbor 0.25 from PyPI in .harbor-venv, Python >= 3.12:
`bash scripts/setup-harbor.sh`), the verifier script run for real with `spu grade`, and the installed agent
class driven through Harbor's BaseInstalledAgent with a local shell standing in for the container."""

from __future__ import annotations

import gzip
import json
import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import yaml

from environment.demo_tasks import demo_answers_path, demo_task_dir
from environment.harbor.export import COLLECT_COMMAND, LOCK_COMMAND, ExportError, export_task

REPO = Path(__file__).resolve().parents[2]
HARBOR_PYTHON = REPO / ".harbor-venv" / "bin" / "python"
HARBOR_CLI = REPO / ".harbor-venv" / "bin" / "harbor"
CHECKS = Path(__file__).resolve().parent / "harbor_checks.py"
PINNED = "registry.example/spu-scaffold@sha256:" + "ab" * 32

needs_harbor = pytest.mark.skipif(
    not HARBOR_PYTHON.exists(),
    reason="no .harbor-venv: run `bash scripts/setup-harbor.sh` (needs Python >= 3.12)",
)


def _harbor_env(spu_env: dict[str, str]) -> dict[str, str]:
    # no telemetry (PostHog) and no remote LiteLLM price map; the loopback guard is on PYTHONPATH already
    return {
        **spu_env,
        "HARBOR_TELEMETRY": "0",
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{spu_env.get('PATH', '')}",
    }


def _harbor_json(args: list[str], env: dict[str, str], timeout: float = 300) -> object:
    proc = subprocess.run(
        [str(HARBOR_PYTHON), str(CHECKS), *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=REPO,
        timeout=timeout,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_export_layout_keeps_answers_in_tests_only(tmp_path):
    out = tmp_path / "harbor-task"
    result = export_task(demo_task_dir("aromatic-acidity"), out, image=PINNED, profile="benchmark")
    answers_text = demo_answers_path("aromatic-acidity").read_text()
    assert (out / "tests" / "answers.json").read_text() == answers_text
    outside = [f for f in result["files"] if not f.startswith("tests/")]
    # no file the agent's image is built from (environment/) or reads (instruction.md, task.toml) holds
    # answers
    for name in outside:
        assert "answers.json" not in name
        text = (out / name).read_text()
        assert '"values"' not in text
    dockerfile = (out / "environment" / "Dockerfile").read_text()
    assert dockerfile.splitlines()[1] == f"FROM {PINNED}"
    assert "tests" not in dockerfile and dockerfile.rstrip().endswith("USER spu")
    config = tomllib.loads((out / "task.toml").read_text())
    assert config["environment"]["cpus"] == 8 and config["environment"]["memory_mb"] == 16384
    assert config["environment"]["gpus"] == 1 and config["agent"]["timeout_sec"] == 8 * 3600
    assert config["verifier"]["environment_mode"] == "separate"
    # the tools may read the task folder wherever the agent's client starts the server
    assert config["environment"]["env"]["SPU_INPUT_ROOTS"] == "/app/task"
    assert "SPU_INPUT_ROOTS=/app/task" in dockerfile
    # the verifier's own image (tests/) and a compose overlay that a plain Docker engine enforces
    assert (out / "tests" / "Dockerfile").read_text().splitlines()[2] == f"FROM {PINNED}"
    verifier = yaml.safe_load((out / "tests" / "docker-compose.yaml").read_text())["services"]["main"]
    assert verifier["network_mode"] == "none" and verifier["init"] is True
    # the agent's container: root as PID 1 (the boundary's lock and collect hook), behind an init that
    # passes SIGTERM on, the first healthcheck after 1 s, and its network kept (the default: public)
    main = yaml.safe_load((out / "environment" / "docker-compose.yaml").read_text())["services"]["main"]
    assert main == {
        "user": "0",
        "init": True,
        "healthcheck": {"test": ["CMD", "true"], "interval": "1s", "timeout": "10s", "retries": 30},
    }
    assert config["artifacts"] == ["/app/collected"]
    assert config["verifier"]["collect"] == [
        {"command": COLLECT_COMMAND, "user": "root", "timeout_sec": 600.0}
    ]
    assert config["environment"]["healthcheck"]["command"] == LOCK_COMMAND
    assert config["metadata"]["smoke_test"] is True  # the demo tasks are labelled smoke tests
    assert "/app/output/rankings.json" in (out / "instruction.md").read_text()
    assert not (out / "solution").exists()


def _spu_command_lines(text: str) -> list[list[str]]:
    """Every ``spu`` command the text writes out, as words (shell quotes, backticks and line joins
    dropped)."""
    text = text.replace("\\\n", " ")
    found = []
    for line in text.splitlines():
        for part in re.split(r"`|\$\(|\|", line):
            words = part.replace('"', "").split()
            if words[:1] == ["spu"] and words[1:]:  # not the bare name ("the `spu` MCP server")
                found.append(words[1:])
    return found


def test_exported_commands_use_the_documented_grammar(tmp_path):
    """The commands an exported task writes for the agent (instruction.md) and runs (tests/test.sh) name
    no option the CLI hides (``--task`` is a hidden alias of the positional TASK), and name commands that
    exist."""
    import typer

    from spu.cli import make_app

    commands = {}
    stack = [((), typer.main.get_command(make_app()))]
    while stack:
        path, command = stack.pop()
        for name, sub in getattr(command, "commands", {}).items():
            stack.append(((*path, name), sub))
        commands[path] = command
    out = tmp_path / "task"
    export_task(demo_task_dir("aromatic-acidity"), out, image=PINNED, profile="benchmark")
    lines = [
        w for f in ("instruction.md", "tests/test.sh") for w in _spu_command_lines((out / f).read_text())
    ]
    assert {tuple(w[:1]) for w in lines} >= {("validate",), ("grade",)}
    for words in lines:
        path = max((p for p in commands if tuple(words[: len(p)]) == p), key=len)
        shown = {"--help"} | {
            o for p in commands[path].params if not getattr(p, "hidden", False) for o in p.opts
        }
        used = {w.split("=", 1)[0] for w in words if w.startswith("--")}
        assert (path or words[0].startswith("-")) and used <= shown, (words, used - shown)


def test_export_profiles_fit_the_machine(tmp_path, monkeypatch):
    import psutil

    from environment.harbor import export

    monkeypatch.setattr(export.os, "cpu_count", lambda: 2)
    monkeypatch.setattr(export, "_count_gpus", lambda: 0)
    monkeypatch.setattr(psutil, "virtual_memory", lambda: type("VM", (), {"total": 8 * 2**30})())
    assert export.profile_resources("local") == {"cpus": 2, "memory_mb": 6144, "gpus": 0}
    assert export.profile_resources("benchmark") == {"cpus": 8, "memory_mb": 16384, "gpus": 1}
    monkeypatch.setattr(export.os, "cpu_count", lambda: 64)
    monkeypatch.setattr(export, "_count_gpus", lambda: 4)
    assert export.profile_resources("local") == {"cpus": 8, "memory_mb": 6144, "gpus": 1}
    with pytest.raises(ExportError, match="--profile must be one of local, benchmark"):
        export.profile_resources("cloud")
    monkeypatch.setattr(export, "_count_gpus", lambda: 0)
    result = export_task(demo_task_dir("enzyme-kinetics"), tmp_path / "l", cpus=1)
    assert (result["cpus"], result["memory_mb"], result["gpus"]) == (1, 6144, 0)
    assert result["image"] == "spu-scaffold:cpu"  # no GPU in the resources: the CPU image
    config = tomllib.loads((tmp_path / "l" / "task.toml").read_text())
    assert config["verifier"]["environment"]["cpus"] == 1
    gpu = export_task(demo_task_dir("enzyme-kinetics"), tmp_path / "b", profile="benchmark")
    assert gpu["image"] == "spu-scaffold:gpu"


def test_export_network_none_is_a_compose_overlay(tmp_path):
    result = export_task(demo_task_dir("enzyme-kinetics"), tmp_path / "n", network="none")
    assert result["network_mode"] == "none"
    overlay = yaml.safe_load((tmp_path / "n" / "environment" / "docker-compose.yaml").read_text())
    assert overlay["services"]["main"]["network_mode"] == "none" and list(overlay["services"]) == ["main"]
    # Harbor's own no-network policy needs images from a registry; the overlay needs none
    config = tomllib.loads((tmp_path / "n" / "task.toml").read_text())
    assert config["environment"]["network_mode"] == "public"


def test_export_network_policies_and_errors(tmp_path):
    task = demo_task_dir("enzyme-kinetics")
    providers = export_task(task, tmp_path / "p", network="providers", allow_hosts=["example.org"])
    assert providers["network_mode"] == "allowlist"
    assert "api.crossref.org" in providers["allowed_hosts"] and "example.org" in providers["allowed_hosts"]
    audited = export_task(task, tmp_path / "a", network="audited", audit_url="https://audit.internal:8443")
    assert audited["allowed_hosts"] == ["audit.internal"]
    env = tomllib.loads((tmp_path / "a" / "task.toml").read_text())["environment"]["env"]
    assert env["SPU_AUDIT_TOKEN"] == "${SPU_AUDIT_TOKEN}"  # resolved on the host at run time, never stored
    with pytest.raises(ExportError, match=r"is not an http\(s\) URL with a host"):
        export_task(task, tmp_path / "u", network="audited", audit_url="unix:///run/audit.sock")
    with pytest.raises(ExportError, match="--allow-host needs --network providers, or audited with"):
        export_task(task, tmp_path / "b", network="audited", allow_hosts=["example.org"])
    with pytest.raises(ExportError, match="not empty"):
        export_task(task, tmp_path / "p")
    with pytest.raises(ExportError, match="no answers"):
        export_task(tmp_path / "a" / "environment" / "task", tmp_path / "c")


def test_export_audited_without_a_url_gives_the_agent_no_network_but_the_audit_socket(tmp_path):
    result = export_task(demo_task_dir("enzyme-kinetics"), tmp_path / "a", image="img:1", network="audited")
    assert result["network_mode"] == "audited" and result["allowed_hosts"] == []
    compose = yaml.safe_load((tmp_path / "a" / "environment" / "docker-compose.yaml").read_text())
    main, service = compose["services"]["main"], compose["services"]["spu-audit"]
    # the agent's container has no network at all; it shares with the audit service only the socket's
    # folder, read-only on its side
    assert main["network_mode"] == "none" and "networks" not in main and "dns" not in main
    assert main["volumes"] == [
        {"type": "volume", "source": "spu-audit-socket", "target": "/run/spu-audit", "read_only": True}
    ]
    assert service["volumes"] == ["spu-audit-socket:/run/spu-audit"]
    assert compose["volumes"]["spu-audit-socket"]["driver_opts"]["type"] == "tmpfs"
    # the audit service alone has a network, its way out
    assert service["networks"] == ["spu-audit-egress"] and compose["networks"] == {"spu-audit-egress": {}}
    assert service["image"] == "img:1"
    assert service["command"] == [
        *("spu", "audit", "serve", "--socket", "/run/spu-audit/audit.sock"),
        *("--log", "/srv/spu/audit/audit.jsonl"),
    ]
    assert service["environment"]["SPU_AUDIT_TOKEN"].startswith("${SPU_AUDIT_TOKEN:?")  # never stored
    config = tomllib.loads((tmp_path / "a" / "task.toml").read_text())
    assert config["environment"]["env"]["SPU_AUDIT_URL"] == "unix:///run/spu-audit/audit.sock"
    assert config["environment"]["env"]["SPU_AUDIT_TOKEN"] == "${SPU_AUDIT_TOKEN}"
    server = config["environment"]["mcp_servers"][0]
    assert "SPU_AUDIT_URL=unix:///run/spu-audit/audit.sock" in server["args"]
    # the log and its key are collected from the audit service's own container after the trial
    assert config["artifacts"] == ["/app/collected", {"source": "/srv/spu/audit", "service": "spu-audit"}]
    assert config["environment"]["network_mode"] == "public"  # Harbor's egress images are not needed


def test_export_finds_the_answers_by_task_id_in_a_folder(tmp_path):
    """--answers may be a folder (environment.finder's rules): the file with the task's id is taken."""
    suite = REPO / "environment" / "tasks"
    result = export_task(suite / "chem-fragment-pka-logp" / "task", tmp_path / "a", answers=suite)
    copied = json.loads((tmp_path / "a" / "tests" / "answers.json").read_text())
    assert result["task_id"] == copied["task_id"] == "chem-fragment-pka-logp"
    with pytest.raises(ExportError, match="no answers for task 'demo-enzyme-kinetics' in"):
        export_task(demo_task_dir("enzyme-kinetics"), tmp_path / "b", answers=suite)


def _spoiled_copy(tmp_path: Path, name: str, text: str | bytes) -> Path:
    task = tmp_path / f"task-{name}"
    shutil.copytree(REPO / "environment" / "tasks" / "chem-fragment-pka-logp" / "task", task)
    (task / name).write_bytes(text if isinstance(text, bytes) else text.encode())
    return task


@pytest.mark.parametrize(
    ("name", "text", "found"),
    [
        # values in any format: tests/environment/test_leakscan.py generates them; one written as stored
        (
            "notes.md",
            "Measured: b2c6: 4.09, c012 3.98 and 'aa24' = 3.21\n",
            "the measured values of 3 of the 3",
        ),
        (
            "source.txt",
            "see SAMPL6 repository physical_properties/logP/experimental_data/logP_experimental_"
            "values.csv, Molecule ID SM02, logP mean (SEM 0.03), pH-metric octanol logP",
            "the source 'SAMPL6",
        ),
        ("cite.md", "Data: DOI 10.1007/S10822-018-0168-0.", "the DOI '10.1007/s10822-018-0168-0'"),
        ("keys.csv", "molecule\npka-w-sm01\n", "the author key 'pka-w-sm01'"),
        # weak keys (the task holds 9 of the 100 logp-sm##: 3.5 bits each) count only together
        (
            "keys.txt.gz",
            gzip.compress(b"logp-sm02 logp-sm04, logp-sm07 logp-sm09 logp-sm11 logp-sm12", mtime=0),
            "6 weak",
        ),
    ],
)
def test_export_refuses_a_file_that_holds_the_answers(tmp_path, name, text, found):
    answers = REPO / "environment" / "tasks" / "chem-fragment-pka-logp" / "answers.json"
    values = {e: v for g in json.loads(answers.read_text())["groups"] for e, v in g["values"].items()}
    assert (values["b2c6"], values["c012"]) == (4.09, 3.98)  # what the spoiled files hold
    task = _spoiled_copy(tmp_path, name, text)
    with pytest.raises(ExportError, match="the answers would reach the agent") as info:
        export_task(task, tmp_path / "out", answers=answers)
    # named by the file (a compressed one with ! for what it holds) and what it holds
    said = str(info.value)
    assert re.search(rf"environment/task/{re.escape(name)}!? \({re.escape(found)}", said), said
    assert not (tmp_path / "out").exists()  # nothing is left behind for a run to pick up


def test_export_leak_check_passes_every_task_of_the_repository(tmp_path):
    # the same check finds nothing in what the suite and the demo tasks show the agent (no false alarm)
    tasks = sorted((REPO / "environment").glob("*tasks/*/task"))
    assert len(tasks) >= 20
    for task in tasks:
        export_task(task, tmp_path / task.parent.name, image="img:1", oracle=True)


@pytest.mark.slow
def test_verifier_script_grades_with_spu_grade(tmp_path, spu_env):
    out = tmp_path / "t"
    export_task(demo_task_dir("aromatic-acidity"), out, oracle=True)
    solve = (out / "solution" / "solve.sh").read_text()
    oracle = json.loads(solve.split("<<'JSON'\n", 1)[1].split("\nJSON", 1)[0])
    env = {**spu_env, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{spu_env['PATH']}"}
    # the oracle's orders under an object keyed by group id: a schema departure the strict grader rejects
    departure = {**oracle, "rankings": {r["group_id"]: r["order"] for r in oracle["rankings"]}}
    cases = {"oracle": oracle, "missing": None, "departure": departure}
    rewards, grades = {}, {}
    for name, submission in cases.items():
        logs = tmp_path / f"logs-{name}"
        sub = tmp_path / f"{name}.json"
        record = tmp_path / f"collection-{name}.json"
        if submission is not None:
            sub.write_text(json.dumps(submission))
            record.write_text(json.dumps({"user": "spu", "ended_processes": {"count": 2, "listed": []}}))
        proc = subprocess.run(
            ["bash", str(out / "tests" / "test.sh")],
            capture_output=True,
            text=True,
            env={
                **env,
                "SPU_SUBMISSION": str(sub),
                "SPU_COLLECTION": str(record),
                "SPU_VERIFIER_LOGS": str(logs),
            },
            timeout=120,
            check=False,
        )
        assert proc.returncode == 0, proc.stderr
        rewards[name] = json.loads((logs / "reward.json").read_text())
        grades[name] = json.loads((logs / "grade.json").read_text())
    # the measured order scores the attainable maximum, 1.0 here (no ties in this task's answers)
    assert rewards["oracle"] == {"reward": 1.0, "recovered_score": 1.0, "valid": 1}
    assert rewards["missing"] == {"reward": -1.0, "recovered_score": -1.0, "valid": 0}
    # the reward is the strict (official) score; the recovered figure rides beside it
    assert rewards["departure"] == {"reward": -1.0, "recovered_score": 1.0, "valid": 0}
    # the collect hook's record rides in grade.json; without one, grade.json says so
    assert grades["oracle"]["collection"]["ended_processes"]["count"] == 2
    assert grades["missing"]["collection"] == {
        "error": "no collection record: the collect hook did not run or failed"
    }


@needs_harbor
def test_harbor_models_and_lint_accept_the_export(tmp_path, spu_env):
    env = _harbor_env(spu_env)
    out = tmp_path / "task"
    task = demo_task_dir("electrolyte-solvents")
    export_task(task, out, image=PINNED, gpu_types=["H20", "H100"], profile="benchmark")
    config = _harbor_json(["config", str(out)], env)
    assert config["name"] == "spu/demo-electrolyte-solvents"
    assert (config["cpus"], config["memory_mb"], config["gpus"]) == (8, 16384, 1)
    assert config["gpu_types"] == ["H20", "H100"]
    assert config["agent_timeout_sec"] == 28800.0 and config["agent_user"] == "spu"
    # Harbor's policy is public; tests/docker-compose.yaml takes the network away (network_mode: none)
    assert config["verifier_mode"] == "separate" and config["verifier_network_mode"] == "public"
    assert config["verifier_dir"] == "tests" and config["verifier_bundled_tests"] is True
    # `env` passes the server its settings (Codex gives MCP servers only a few variables of its own)
    assert config["mcp_servers"] == [
        {
            "name": "spu",
            "transport": "stdio",
            "url": None,
            "command": "env",
            "args": ["SPU_WORKDIR=/app/output/spu-work", "SPU_INPUT_ROOTS=/app/task", "spu", "serve"],
        }
    ]
    assert config["artifacts"] == ["/app/collected"] and config["network_mode"] == "public"
    assert config["healthcheck"] == LOCK_COMMAND
    assert config["collect"] == [["main", "root", COLLECT_COMMAND]]
    lint = subprocess.run(
        [str(HARBOR_CLI), "lint", "--select", "ALL", "--json", str(out)],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert lint.returncode == 0, lint.stdout + lint.stderr
    assert json.loads(lint.stdout) == []
    # an unpinned base image is the one thing harbor lint --select ALL reports on a default export
    export_task(demo_task_dir("electrolyte-solvents"), tmp_path / "tag")
    lint = subprocess.run(
        [str(HARBOR_CLI), "lint", "--select", "ALL", "--json", str(tmp_path / "tag")],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    # (once for the agent's Dockerfile, once for the verifier's)
    assert [f["rule"] for f in json.loads(lint.stdout)] == ["unpinned-image", "unpinned-image"]


@needs_harbor
@pytest.mark.slow
def test_installed_agent_runs_reference_agent_and_leaves_atif(tmp_path, spu_env):
    env = _harbor_env(spu_env)
    logs, out = tmp_path / "logs", tmp_path / "output"
    logs.mkdir()
    result = _harbor_json(
        [
            "agent",
            str(logs),
            str(demo_task_dir("aromatic-acidity")),
            str(out),
            "replay/demo-aromatic-acidity",
            "overrides=limits.step_limit=20",
        ],
        env,
        timeout=600,
    )
    assert result["name"] == "spu-agent"
    assert "--model replay:demo-aromatic-acidity" in result["command"]
    assert "tools.mcp.command=" in result["command"] and "limits.step_limit=20" in result["command"]
    assert result["context"]["metadata"]["exit_status"] == "submitted"
    # the shipped recording calls system_info, chem_parse, python and submit_rankings
    # (scaffold/agent/recordings)
    assert result["atif"]["schema_version"] == "ATIF-v1.6" and result["atif"]["tool_calls"] >= 4
    assert {"trajectory.json", "spu-agent.txt", "run.json", "rankings.json"} <= set(result["logs"])
    grade = subprocess.run(
        [
            sys.executable,
            "-m",
            "spu",
            "grade",
            str(out / "rankings.json"),
            "--task",
            str(demo_task_dir("aromatic-acidity")),
            "--answers",
            str(demo_answers_path("aromatic-acidity")),
            "--json",
        ],
        capture_output=True,
        text=True,
        env=spu_env,
        cwd=REPO,
        timeout=120,
        check=False,
    )
    assert json.loads(grade.stdout)["score"] == pytest.approx(1.0)


@needs_harbor
def test_installed_agent_reads_only_regular_log_files_on_the_host(tmp_path, spu_env):
    # /logs/agent is a host folder the agent's container writes into: a link (symbolic or hard) there must
    # not make the host read a file of its own, and a pipe must not hang it
    env = _harbor_env(spu_env)
    elsewhere = tmp_path / "host-file.json"
    elsewhere.write_text(json.dumps({"final_metrics": {"total_prompt_tokens": 7}, "exit_status": "done"}))
    regular, hostile = tmp_path / "regular", tmp_path / "hostile"
    regular.mkdir()
    hostile.mkdir()
    shutil.copy(elsewhere, regular / "trajectory.json")
    shutil.copy(elsewhere, regular / "run.json")
    (hostile / "trajectory.json").symlink_to(elsewhere)
    os.mkfifo(hostile / "run.json")
    assert _harbor_json(["context", str(regular)], env)["n_input_tokens"] == 7
    context = _harbor_json(["context", str(hostile)], env, timeout=120)
    assert context["n_input_tokens"] is None and context["metadata"] is None
    # a hard link of a host file (the same inode under a second name) is not read either
    linked = tmp_path / "linked"
    linked.mkdir()
    os.link(elsewhere, linked / "trajectory.json")
    assert _harbor_json(["context", str(linked)], env)["n_input_tokens"] is None


@needs_harbor
def test_model_names_map_to_agent_specs(spu_env):
    code = (
        "from scaffold.harbor_agent import spu_model_spec as f; import json; print(json.dumps("
        "[f('anthropic/claude-sonnet-4-5'), f('openai/gpt-4.1'), f('replay:demo'), f('vllm/qwen/Qwen3-8B')]))"
    )
    proc = subprocess.run(
        [str(HARBOR_PYTHON), "-c", code],
        capture_output=True,
        text=True,
        env=_harbor_env(spu_env),
        cwd=REPO,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == [
        "anthropic:claude-sonnet-4-5",
        "openai:gpt-4.1",
        "replay:demo",
        "openai:qwen/Qwen3-8B",
    ]


def _trial_result(folder: Path, name: str, reward: float | None, exception: dict | None = None) -> None:
    folder.mkdir(parents=True)
    result = {
        "trial_name": name,
        "task_name": "spu/demo-aromatic-acidity",
        "agent_info": {"name": "oracle"},
        "verifier_result": {"rewards": {"reward": reward}} if reward is not None else None,
        "exception_info": exception,
        "started_at": "2026-12-01T15:00:00",
        "finished_at": "2026-12-01T15:00:45",
    }
    (folder / "result.json").write_text(json.dumps(result))


def test_harbor_results_summarizes_and_fails_on_failed_trials(tmp_path, spu_env):
    jobs = tmp_path / "jobs"
    (jobs / "job-1").mkdir(parents=True)
    (jobs / "job-1" / "result.json").write_text(json.dumps({"id": "job", "n_total_trials": 3}))  # job-level
    _trial_result(jobs / "job-1" / "t1", "t1", 1.0)
    _trial_result(jobs / "job-1" / "t2", "t2", -1.0)

    def results(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", "spu.cli", "harbor", "results", *args],
            capture_output=True,
            text=True,
            env=spu_env,
            timeout=120,
            check=False,
        )

    ok = results(str(jobs))
    assert ok.returncode == 0, ok.stderr
    assert ok.stdout.strip() == "2 trials, 2 rewarded, reward mean 0.0000 (min -1.0000, max 1.0000), 0 failed"
    strict = results(str(jobs), "--min-reward", "0")
    assert strict.returncode == 1 and strict.stdout.strip().endswith("1 failed: t2 (reward -1.0000)")
    _trial_result(
        jobs / "job-1" / "t3", "t3", None, {"exception_type": "AgentTimeoutError", "exception_message": "8 h"}
    )
    failed = results(str(jobs), "--json")
    assert failed.returncode == 1
    summary = json.loads(failed.stdout)
    assert summary["trials"] == 3 and summary["rewarded"] == 2
    assert [t["trial_name"] for t in summary["failed"]] == ["t3"]
    assert (
        summary["failed"][0]["exception"] == "AgentTimeoutError: 8 h"
        and summary["items"][0]["seconds"] == 45.0
    )
    missing = results(str(tmp_path / "nowhere"))
    assert missing.returncode == 2 and "is not a folder" in missing.stderr
    empty = tmp_path / "empty"
    empty.mkdir()
    assert results(str(empty)).returncode == 1  # no trials found is a failure too
