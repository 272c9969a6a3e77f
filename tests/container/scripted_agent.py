"""A Harbor agent for the container tests: it runs one shell script in the agent's container, as the agent's
user, and nothing else. Harbor imports it on the host (``tests/container`` on ``PYTHONPATH``:
``container_helpers.harbor_env``); the script is a file on the host.

    harbor run -p TASK --agent scripted_agent:ScriptedAgent --ak script=hostile.sh

The script's output and exit status go to ``script.txt`` in the trial's agent log folder.
"""

from __future__ import annotations

from pathlib import Path

from harbor.agents.base import BaseAgent
from harbor.agents.capabilities import AgentCapabilities
from harbor.agents.options import AgentOptions
from harbor.environments.base import BaseEnvironment
from harbor.models.agent.context import AgentContext
from pydantic import Field


class ScriptedOptions(AgentOptions):
    script: str = Field(description="Path on the host of the shell script to run in the container.")


class ScriptedAgent(BaseAgent):
    # the exported tasks declare the spu MCP server; this agent takes it and does not use it
    capabilities = AgentCapabilities(mcp_servers=True)
    options_model = ScriptedOptions

    @staticmethod
    def name() -> str:
        return "spu-scripted"

    def version(self) -> str:
        return "1"

    async def setup(self, environment: BaseEnvironment) -> None:
        pass

    async def run(self, instruction: str, environment: BaseEnvironment, context: AgentContext) -> None:
        script = Path(self.options.script).read_text(encoding="utf-8")
        result = await environment.exec(command=script, timeout_sec=600)
        (Path(self.logs_dir) / "script.txt").write_text(
            f"exit status {result.return_code}\n--- stdout\n{result.stdout}\n--- stderr\n{result.stderr}\n",
            encoding="utf-8",
        )
