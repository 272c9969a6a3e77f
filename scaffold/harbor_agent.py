"""The reference agent as a Harbor installed agent: ``harbor run --agent scaffold.harbor_agent:SpuAgent``.

Imported by Harbor (Python >= 3.12, ``pip install harbor``) on the host; it needs nothing from this project
but the standard library, so only the ``scaffold`` folder must be importable there (``PYTHONPATH=.`` in a
checkout). Inside the task container, built on our image by ``spu harbor export``, it runs
``spu agent run`` on ``/app/task`` with ``/app/output`` as output directory, tees its log to
``/logs/agent/spu-agent.txt`` and copies the run's ATIF trajectory to ``/logs/agent/trajectory.json``,
where Harbor (``harbor view``) finds it. Afterwards ``populate_context_post_run`` fills Harbor's token
and cost counts from that trajectory and the run record.

Model names follow Harbor's ``provider/model`` (``-m anthropic/claude-sonnet-4-5``); they map to the agent's
``PROVIDER:MODEL``. Options (``--ak key=value``): ``overrides`` (agent ``-c`` overrides separated by ``;``),
``model_base_url``, ``task_dir``, ``output_dir``. Provider and search keys are passed through from the host
environment (or ``--ae``).
"""

from __future__ import annotations

import json
import os
import shlex
import stat
from pathlib import Path
from typing import Any

from harbor.agents.capabilities import AgentCapabilities
from harbor.agents.installed.base import BaseInstalledAgent, with_prompt_template
from harbor.agents.options import InstalledAgentOptions
from harbor.environments.base import BaseEnvironment
from harbor.models.agent.context import AgentContext
from pydantic import Field

#: Harbor provider prefix -> the reference agent's provider (scaffold/agent/models)
PROVIDER_MAP = {
    "anthropic": "anthropic",
    "openai": "openai",
    "openai-responses": "openai-responses",
    "replay": "replay",
    "openrouter": "openai",
    "vllm": "openai",
    "deepseek": "openai",
}

#: Variables passed from the host into the agent's command (model APIs and the web tools' providers).
PASSTHROUGH_ENV = (
    "ANTHROPIC_API_KEY",
    "OPENAI_API_KEY",
    "OPENROUTER_API_KEY",
    "DEEPSEEK_API_KEY",
    "BRAVE_API_KEY",
    "TAVILY_API_KEY",
    "SERPER_API_KEY",
    "EXA_API_KEY",
    "SEARXNG_URL",
    "NCBI_API_KEY",
    "OPENALEX_API_KEY",
    "SPU_AUDIT_URL",
    "SPU_AUDIT_TOKEN",
)


class SpuAgentOptions(InstalledAgentOptions):
    overrides: str | None = Field(default=None, description="Agent config overrides, 'key=value;key=value'.")
    model_base_url: str | None = Field(default=None, description="Model API base URL (vLLM, OpenRouter ...).")
    task_dir: str = Field(default="/app/task", description="Task directory in the container.")
    output_dir: str = Field(default="/app/output", description="Output directory in the container.")


def spu_model_spec(model_name: str | None) -> str:
    """Harbor's ``provider/model`` (or the agent's own ``provider:model``) as the agent's
    ``PROVIDER:MODEL``."""
    if not model_name:
        raise ValueError("spu-agent needs a model: -m PROVIDER/MODEL, e.g. anthropic/claude-sonnet-4-5")
    provider, sep, model = model_name.partition(":")
    if not sep:
        provider, sep, model = model_name.partition("/")
    if not sep or not model:
        raise ValueError(f"model {model_name!r} is not PROVIDER/MODEL")
    if provider not in PROVIDER_MAP:
        raise ValueError(f"provider {provider!r} is not one of {', '.join(sorted(PROVIDER_MAP))}")
    return f"{PROVIDER_MAP[provider]}:{model}"


class SpuAgent(BaseInstalledAgent):
    """Runs ``spu agent run`` (the spu-scaffold reference agent) in the task container."""

    capabilities = AgentCapabilities(atif=True, mcp_servers=True)
    options_model = SpuAgentOptions

    @staticmethod
    def name() -> str:
        return "spu-agent"

    def get_version_command(self) -> str | None:
        return "python3 -c \"import importlib.metadata as m; print(m.version('spu-scaffold'))\""

    @property
    def _options(self) -> SpuAgentOptions:
        return self.options if isinstance(self.options, SpuAgentOptions) else SpuAgentOptions()

    async def install(self, environment: BaseEnvironment) -> None:
        # The task image (FROM the spu-scaffold image) already holds everything; only check it.
        await self.exec_as_agent(
            environment,
            command=(
                "command -v spu >/dev/null || { echo 'spu is not installed in this image: build the task "
                "environment on the spu-scaffold image (docs/harbor.md)' >&2; exit 1; }; "
                f"mkdir -p {shlex.quote(self._options.output_dir)}"
            ),
        )

    def build_command(self) -> str:
        """The shell command run in the container (exit status of the agent kept; files copied regardless)."""
        opts = self._options
        logs = str(self.environment_logs_dir)
        out = opts.output_dir
        args = [
            "spu",
            "agent",
            "run",
            "--task",
            opts.task_dir,
            "--out",
            out,
            "--model",
            spu_model_spec(self.model_name),
        ]
        if opts.model_base_url:
            args += ["--base-url", opts.model_base_url]
        for server in self.mcp_servers:
            if server.name != "spu":
                continue
            if server.transport == "stdio" and server.command:
                args += ["-c", "tools.mcp.command=" + json.dumps([server.command, *server.args])]
            elif server.url:
                args += ["-c", f"tools.mcp.url={server.url}"]
        for item in (opts.overrides or "").split(";"):
            if item.strip():
                args += ["-c", item.strip()]
        run = " ".join(shlex.quote(a) for a in args)
        q = shlex.quote
        return (
            f"mkdir -p {q(logs)}; {run} 2>&1 | tee {q(logs + '/spu-agent.txt')}; status=$?; "
            f"for f in trajectory.json trajectory.jsonl run.json rankings.json report.md sources.json; do "
            f"[ -f {q(out)}/$f ] && cp {q(out)}/$f {q(logs)}/$f; done; exit $status"
        )

    @with_prompt_template
    async def run(self, instruction: str, environment: BaseEnvironment, context: AgentContext) -> None:
        # The agent reads the task from its directory (instruction.md included), so `instruction` is not
        # passed on; Harbor's copy of it is the same file.
        env = {key: value for key in PASSTHROUGH_ENV if (value := self._get_env(key))}
        await self.exec_as_agent(environment, command=self.build_command(), env=env or None)

    def populate_context_post_run(self, context: AgentContext) -> None:
        metrics = _read_log_json(Path(self.logs_dir) / "trajectory.json").get("final_metrics") or {}
        if metrics:
            context.n_input_tokens = int(metrics.get("total_prompt_tokens") or 0)
            context.n_output_tokens = int(metrics.get("total_completion_tokens") or 0)
            context.n_cache_tokens = int(metrics.get("total_cached_tokens") or 0)
            context.cost_usd = float(metrics.get("total_cost_usd") or 0.0)
        record = _read_log_json(Path(self.logs_dir) / "run.json")
        if record:
            context.metadata = {
                k: record.get(k)
                for k in ("exit_status", "reason", "submission", "steps", "elapsed_s", "drafts")
                if k in record
            }


#: the largest log file read on the host (a run's trajectory is a few MB; the agent's container writes these)
MAX_LOG_JSON_BYTES = 64 * 2**20


def _read_log_json(path: Path) -> dict[str, Any]:
    """A JSON object from the agent's log folder, which is mounted from the host and written from inside the
    container (Harbor reads it before the task's collect hook has cleaned the folder): read only when the file
    opened (without following a link or waiting) is, by its descriptor, a regular file of at most
    :data:`MAX_LOG_JSON_BYTES` with one link; else, or when it is not a JSON object, ``{}``."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        with os.fdopen(fd, "rb") as fh:
            st = os.fstat(fh.fileno())
            if not stat.S_ISREG(st.st_mode) or st.st_size > MAX_LOG_JSON_BYTES or st.st_nlink != 1:
                return {}
            data = json.loads(fh.read(MAX_LOG_JSON_BYTES + 1))
    except (OSError, ValueError, RecursionError):
        return {}
    return data if isinstance(data, dict) else {}
