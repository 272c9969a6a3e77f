"""One agent run from a task (loaded once, by the caller), an output directory, a model spec and a config.

Builds the pieces (task, output directory, model adapter, tools, budget), turns SIGTERM and SIGINT into
the :class:`~scaffold.agent.endings.Interrupted` ending while the loop runs, and closes the tool server
and the HTTP client afterwards.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from scaffold.agent.config import AgentConfig, ModelSection
from scaffold.agent.endings import Interrupted
from scaffold.agent.limits import Budget, find_price
from scaffold.agent.loop import Agent, RunOutcome
from scaffold.agent.models import ModelSpec, make_model
from scaffold.agent.rundir import RunDir
from scaffold.agent.tools import Toolbox
from scaffold.agent.tools.builtin import BuiltinTools
from scaffold.agent.tools.mcp_tools import McpTools
from spu_common.task import Task

#: exit codes of ``spu agent run`` by exit status (docs/agent.md)
EXIT_CODES = {"submitted": 0, "limit_reached": 0, "model_gave_up": 1, "model_error": 1, "crashed": 1}
SIGNAL_EXIT_CODES = {signal.SIGTERM: 143, signal.SIGINT: 130}


def prompt_cache_key(config: ModelSection, task: Task) -> str | None:
    """One key per task: every run on a task shares the system prompt, tools and task message."""
    value = config.prompt_cache_key
    if value in (None, False, "", "false", "none"):
        return None
    if value == "auto":
        return f"spu-{task.task_id}-v{task.task_version}"
    return str(value)


def run_agent(
    task: Task,
    out: str | Path,
    model_spec: str | ModelSpec,
    config: AgentConfig,
    *,
    base_url: str | None = None,
    run_id: str | None = None,
) -> RunOutcome:
    """Run the agent on ``task`` (``spu_common.task.load_task``) with ``config``
    (``scaffold.agent.config.load_config``)."""
    spec = model_spec if isinstance(model_spec, ModelSpec) else ModelSpec.parse(model_spec)
    mcp_cfg = config.tools.mcp
    rundir = RunDir(out, task, server_workdir=mcp_cfg.workdir)
    rundir.create()
    paths = {"TASK_DIR": str(task.root), "OUT_DIR": str(rundir.root), "WORK_DIR": str(rundir.work)}
    model = make_model(
        spec,
        config.model,
        base_url=base_url,
        cache_key=prompt_cache_key(config.model, task),
        paths=paths,
    )
    budget = Budget(config.limits, find_price(config.prices, spec.model))
    builtin = BuiltinTools(rundir, config.tools)
    builtin.time_left = budget.wall_time_left_s
    mcp = None
    if mcp_cfg.enabled:
        mcp = McpTools(
            mcp_cfg,
            workdir=rundir.spu_work,
            cwd=rundir.work,
            input_roots=(task.root, rundir.root),  # ranking_check reads the task and the drafts
            max_output_chars=config.tools.max_output_chars,
        )
    tools = Toolbox(builtin, mcp, mcp_required=mcp_cfg.required)
    agent = Agent(rundir=rundir, model=model, tools=tools, config=config, budget=budget, run_id=run_id)
    try:
        with interrupts_end_the_run(agent):
            return agent.run()
    finally:
        tools.close()
        model.close()


@contextmanager
def interrupts_end_the_run(agent: Agent) -> Iterator[None]:
    """While the loop runs, SIGTERM/SIGINT raise :class:`Interrupted` in it (once; not while finishing)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum: int, _frame: Any) -> None:
        if agent.finishing:
            return
        agent.signal = signum
        raise Interrupted(f"received {signal.Signals(signum).name}")

    previous = {s: signal.signal(s, handler) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield
    finally:
        for s, h in previous.items():
            signal.signal(s, h)


def exit_code(outcome: RunOutcome) -> int:
    """0 when the run ended by submitting or at a budget; 1 when the model failed or gave up, or the agent
    crashed; 143/130 after SIGTERM/SIGINT. A valid rankings.json is in place in every case."""
    if outcome.exit_status == "interrupted":
        return SIGNAL_EXIT_CODES.get(outcome.result.get("signal"), 143)
    return EXIT_CODES.get(outcome.exit_status, 1)
