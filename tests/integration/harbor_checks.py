"""Checks run by the Harbor venv's Python (.harbor-venv, Python >= 3.12 with harbor installed), called from
test_harbor.py: Harbor's own models validate what spu exported and what the agent wrote. Prints JSON.

    python harbor_checks.py config TASK_DIR
    python harbor_checks.py atif TRAJECTORY_JSON
    python harbor_checks.py agent LOGS_DIR TASK_DIR OUT_DIR MODEL [key=value ...]
    python harbor_checks.py context LOGS_DIR
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import warnings
from pathlib import Path, PurePosixPath


def check_config(task_dir: str) -> dict:
    from harbor.models.task.config import TaskConfig
    from harbor.models.task.task import Task
    from harbor.models.task.verifier_mode import resolve_verifier_environment_definition

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a deprecated field is a failure here
        config = TaskConfig.model_validate_toml((Path(task_dir) / "task.toml").read_text())
    task = Task(task_dir)
    definition = resolve_verifier_environment_definition(config, task.paths)
    env = config.environment
    return {
        "name": config.task.name,
        "version": config.task.version,
        "cpus": env.cpus,
        "memory_mb": env.memory_mb,
        "gpus": env.gpus,
        "gpu_types": env.gpu_types,
        "network_mode": env.network_mode.value,
        "allowed_hosts": env.allowed_hosts,
        "agent_timeout_sec": config.agent.timeout_sec,
        "agent_user": config.agent.user,
        "verifier_mode": config.verifier.environment_mode.value,
        "verifier_network_mode": config.verifier.environment.network_mode.value,
        "verifier_gpus": config.verifier.environment.gpus,
        "verifier_dir": definition.directory.name,
        "verifier_bundled_tests": definition.bundled_tests,
        "mcp_servers": [s.model_dump(mode="json") for s in env.mcp_servers],
        "env": env.env,
        "artifacts": [a if isinstance(a, str) else f"{a.service}:{a.source}" for a in config.artifacts],
        "healthcheck": env.healthcheck.command if env.healthcheck else None,
        "collect": [(c.service, c.user, c.command) for c in config.verifier.collect],
        "instruction_head": task.instruction[:80],
    }


def check_atif(path: str) -> dict:
    from harbor.models.trajectories import Trajectory

    trajectory = Trajectory.model_validate_json(Path(path).read_text())
    return {
        "schema_version": trajectory.schema_version,
        "steps": len(trajectory.steps),
        "agent": trajectory.agent.name,
        "tool_calls": sum(len(s.tool_calls or []) for s in trajectory.steps),
    }


class LocalShell:
    """Stands in for Harbor's container environment (no Docker here): exec runs bash on this machine."""

    default_user = None

    def __init__(self, env: dict[str, str]) -> None:
        self.env = env
        self.commands: list[str] = []

    async def exec(self, command, user=None, env=None, cwd=None, timeout_sec=None):
        from harbor.environments.base import ExecResult

        self.commands.append(command)
        proc = await asyncio.create_subprocess_exec(
            "bash",
            "-c",
            command,
            cwd=cwd,
            env={**self.env, **(env or {})},
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        stdout, stderr = await asyncio.wait_for(proc.communicate(), timeout=timeout_sec or 600)
        return ExecResult(stdout=stdout.decode(), stderr=stderr.decode(), return_code=proc.returncode)


def run_agent(logs_dir: str, task_dir: str, out_dir: str, model: str, *kwargs: str) -> dict:
    from harbor.models.agent.context import AgentContext
    from harbor.models.task.config import MCPServerConfig

    from scaffold.harbor_agent import SpuAgent

    options = dict(item.split("=", 1) for item in kwargs)
    agent = SpuAgent(
        logs_dir=Path(logs_dir),
        model_name=model,
        environment_logs_dir=PurePosixPath(logs_dir),
        mcp_servers=[MCPServerConfig(name="spu", transport="stdio", command="spu", args=["serve"])],
        task_dir=task_dir,
        output_dir=out_dir,
        **options,
    )
    shell = LocalShell(dict(os.environ))
    context = AgentContext()

    async def go() -> None:
        await agent.install(shell)
        await agent.run("(instruction)", shell, context)

    asyncio.run(go())
    agent.populate_context_post_run(context)
    return {
        "name": agent.name(),
        "command": shell.commands[-1],
        "context": context.model_dump(mode="json"),
        "atif": check_atif(str(Path(logs_dir) / "trajectory.json")),
        "logs": sorted(p.name for p in Path(logs_dir).iterdir()),
    }


def read_context(logs_dir: str) -> dict:
    """What SpuAgent takes into Harbor's context from a log folder as the container left it."""
    from harbor.models.agent.context import AgentContext

    from scaffold.harbor_agent import SpuAgent

    agent = SpuAgent(logs_dir=Path(logs_dir), model_name="replay/demo")
    context = AgentContext()
    agent.populate_context_post_run(context)
    return context.model_dump(mode="json")


if __name__ == "__main__":
    command, *args = sys.argv[1:]
    commands = {"config": check_config, "atif": check_atif, "agent": run_agent, "context": read_context}
    result = commands[command](*args)
    print(json.dumps(result))
