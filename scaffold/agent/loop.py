"""The agent loop: ask the model, run its tool calls, repeat until something ends the run.

Each step: check the budgets, add a reminder if one is due, keep the conversation inside the context
window, query the model, run the tool calls. Whatever ends the run is an exception (``endings.py``):
a final submission, a spent budget, a model that gave up or failed, SIGTERM, or a crash. ``finish``
then makes sure the output directory holds a valid ``rankings.json``, ``report.md``, ``sources.json``
and the trajectory, and says how the run ended.
"""

from __future__ import annotations

import csv
import io
import logging
import time
import traceback
import uuid
from dataclasses import dataclass
from typing import Any

from scaffold.agent.config import AgentConfig
from scaffold.agent.context import ContextWindow, request_chars
from scaffold.agent.endings import ModelFailed, ModelGaveUp, RunEnded, Submitted
from scaffold.agent.limits import Budget
from scaffold.agent.models import Model
from scaffold.agent.models.base import ContextOverflow, ModelError, ModelTurn, ToolDef
from scaffold.agent.rundir import RunDir
from scaffold.agent.templates import Templates
from scaffold.agent.tools import Toolbox, ToolResult
from scaffold.agent.trajectory import TrajectoryWriter, agent_version, write_atif

log = logging.getLogger(__name__)

MAX_OVERFLOW_RETRIES = 8
#: stop reasons meaning the reply hit the output-token limit (Chat, Responses, Messages)
CUT_OFF = frozenset({"length", "max_output_tokens", "max_tokens"})


def _first_sentence(text: str) -> str:
    text = " ".join(text.split())
    cut = text.find(". ")
    return text if cut < 0 else text[: cut + 1]


def _strip_schema(schema: Any) -> Any:
    """A JSON schema without descriptions, titles and examples (property names are kept as they are)."""
    if isinstance(schema, list):
        return [_strip_schema(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key in ("description", "title", "examples"):
            continue
        if key in ("properties", "$defs", "definitions") and isinstance(value, dict):
            out[key] = {name: _strip_schema(sub) for name, sub in value.items()}
        else:
            out[key] = _strip_schema(value)
    return out


def compact_tool(tool: ToolDef) -> ToolDef:
    """``tool`` with the first sentence of its description and a schema without descriptions."""
    return ToolDef(tool.name, _first_sentence(tool.description), _strip_schema(tool.parameters))


@dataclass
class RunOutcome:
    exit_status: str
    reason: str
    submission: str
    result: dict[str, Any]


class Agent:
    def __init__(
        self,
        *,
        rundir: RunDir,
        model: Model,
        tools: Toolbox,
        config: AgentConfig,
        budget: Budget,
        templates: Templates | None = None,
        run_id: str | None = None,
    ) -> None:
        self.rundir = rundir
        self.task = rundir.task
        self.model = model
        self.tools = tools
        self.tool_defs: list[Any] = []
        self.config = config
        self.limits = config.limits
        self.budget = budget
        self.templates = templates or Templates(config.prompts.dir)
        self.context = ContextWindow(config.context, config.model.context_window_tokens)
        self.run_id = run_id or uuid.uuid4().hex[:12]
        self.trajectory = TrajectoryWriter(rundir.trajectory)
        self.messages: list[dict[str, Any]] = []
        self.reminded: set[str] = set()
        self.nudges = 0
        self.format_errors = 0
        self.finishing = False
        self.signal: int | None = None  # set by the runner's signal handler

    # -- the loop ---------------------------------------------------------------------------------------

    def run(self) -> RunOutcome:
        try:
            self.start()
            while True:
                self.step()
        except RunEnded as end:
            return self.finish(end.exit_status, str(end) or end.exit_status)
        except Exception as exc:
            detail = "".join(traceback.format_exception_only(type(exc), exc)).strip()
            self.event("crash", traceback=traceback.format_exc(limit=8))
            return self.finish("crashed", detail)

    def start(self) -> None:
        self.rundir.create()  # the fallback ranking exists before anything else can fail
        self.tools.start()
        self.tool_defs = self.tools.definitions()
        self.trajectory.write(
            {
                "type": "run_start",
                "run_id": self.run_id,
                "task_id": self.task.task_id,
                "task_version": self.task.task_version,
                "model": self.model.name,
                "config": self.config.model_dump(mode="json"),
                "task_dir": str(self.task.root),
                "out_dir": str(self.rundir.root),
                "work_dir": str(self.rundir.work),
                "tools": [
                    {"name": t.name, "description": t.description, "parameters": t.parameters}
                    for t in self.tool_defs
                ],
            }
        )
        if self.tools.mcp_error:
            self.event("mcp_unavailable", error=self.tools.mcp_error)
        self.add_message("system", self.templates.render("system.md.jinja"), kind="system")
        self.add_message("user", self.task_message(), kind="task")
        self.fit_first_request()

    def fit_first_request(self) -> None:
        """Before the first request: make it fit the model's window (compact MCP tool descriptions when
        ``tools.mcp.compact_descriptions`` allows) or stop with an error that says what to change."""
        window = self.context.window_tokens
        reserve = min(self.config.model.max_output_tokens, window // 4)
        limit = window - reserve
        mode = str(self.config.tools.mcp.compact_descriptions)
        mcp_names = set(self.tools.mcp_names)
        before = self.context.estimate_tokens(self.messages, self.tool_defs)
        if mcp_names and (mode.lower() == "true" or (mode.lower() == "auto" and before > limit)):
            self.tool_defs = [compact_tool(t) if t.name in mcp_names else t for t in self.tool_defs]
            after = self.context.estimate_tokens(self.messages, self.tool_defs)
            self.event("tools_compacted", tokens_before=before, tokens_after=after, tools=len(mcp_names))
        estimate = self.context.estimate_tokens(self.messages, self.tool_defs)
        if estimate <= limit:
            return
        tools_chars = request_chars([], self.tool_defs)
        detail = (
            f"the first request is about {estimate} tokens ({len(self.tool_defs)} tools, about "
            f"{int(tools_chars / self.context.chars_per_token)} tokens of them), more than the "
            f"{limit} the model's window allows (model.context_window_tokens={window} minus "
            f"{reserve} for the reply)"
        )
        self.event(
            "request_too_large", estimate_tokens=estimate, limit_tokens=limit, tools=len(self.tool_defs)
        )
        raise ModelFailed(
            f"{detail}. Offer fewer MCP tools (tools.mcp.include=[chem_*,job_wait,...] or "
            "tools.mcp.exclude), set tools.mcp.compact_descriptions=true, or use a model with a larger "
            "window (and set model.context_window_tokens to it)."
        )

    def step(self) -> None:
        self.budget.check()
        self.remind()
        if elided := self.context.fit(self.messages, self.tool_defs):
            self.event("context_elided", outputs=elided, reason="approaching the context window")
        turn = self.query()
        cost = self.budget.record(turn.usage)
        self.messages.append(turn.message)
        self.trajectory.write(
            {
                "type": "model_turn",
                "step": self.budget.steps,
                "model": self.model.name,
                "message": turn.message,
                "usage": turn.usage.to_dict(),
                "cost_usd": round(cost, 8),
                "latency_s": round(turn.latency_s, 3),
                "attempts": turn.attempts,
                "stop_reason": turn.stop_reason,
                **({"retries": turn.retries} if turn.retries else {}),
            }
        )
        calls = turn.message.get("tool_calls") or []
        if not calls:
            self.trajectory.checkpoint()
            self.no_tool_call()
            return
        self.nudges = 0
        if turn.stop_reason in CUT_OFF:
            for call in calls:
                if call.get("error"):
                    call["error"] += (
                        " The reply was cut off at the output-token limit: send shorter arguments "
                        "(write long code to a file first)."
                    )
        results = [self.execute(call) for call in calls]
        self.trajectory.checkpoint()
        usable = [c for c in calls if not c.get("error") and c.get("name") in self.tools.names]
        self.format_errors = 0 if usable else self.format_errors + 1
        if self.format_errors >= self.limits.max_format_errors:
            raise ModelGaveUp(f"{self.format_errors} turns in a row without a usable tool call")
        if any(r.final for r in results):
            raise Submitted("the model submitted its final ranking")

    def query(self) -> ModelTurn:
        """One model call; on context overflow, elide older tool outputs and try again."""
        for _ in range(MAX_OVERFLOW_RETRIES):
            try:
                turn = self.model.query(self.messages, self.tool_defs)
            except ContextOverflow as exc:
                elided = self.context.fit(self.messages, self.tool_defs, overflowed=True)
                self.event("context_overflow", error=str(exc), outputs_elided=elided)
                if not elided:
                    raise ModelFailed(f"context window exhausted with nothing left to elide: {exc}") from exc
                continue
            except ModelError as exc:
                self.event("model_error", error=str(exc), status=exc.status, body=exc.body)
                raise ModelFailed(str(exc)) from exc
            if turn.usage.prompt_tokens:
                self.context.calibrate(request_chars(self.messages, self.tool_defs), turn.usage.prompt_tokens)
            return turn
        raise ModelFailed("the request still overflowed the context window after eliding old tool outputs")

    def execute(self, call: dict[str, Any]) -> ToolResult:
        name = call.get("name") or ""
        started = time.monotonic()
        if call.get("error"):
            result = ToolResult(f"Your call to {name!r} was not run: {call['error']}", is_error=True)
        else:
            try:
                result = self.tools.call(name, call.get("arguments") or {})
            except Exception as exc:
                result = ToolResult(
                    f"{name} failed inside the agent: {type(exc).__name__}: {exc}", is_error=True
                )
        wall_s = time.monotonic() - started
        self.messages.append(
            {
                "role": "tool",
                "tool_call_id": call["id"],
                "name": name,
                "content": result.content,
                "is_error": result.is_error,
            }
        )
        self.trajectory.write(
            {
                "type": "tool_result",
                "step": self.budget.steps,
                "tool_call_id": call["id"],
                "name": name,
                "arguments": call.get("arguments"),
                "content": result.content,
                "is_error": result.is_error,
                "data": result.data,
                "wall_s": round(wall_s, 3),
            }
        )
        return result

    def no_tool_call(self) -> None:
        if self.rundir.n_drafts:
            raise Submitted("the model stopped calling tools after a valid draft")
        self.nudges += 1
        remaining = self.limits.max_nudges - self.nudges
        if remaining <= 0:  # max_nudges replies without a tool call end the run (docs/agent.md)
            raise ModelGaveUp(f"{self.nudges} replies without a tool call and no valid ranking")
        self.add_message(
            "user",
            self.templates.render("reminder_no_tool.md.jinja", remaining=remaining),
            kind="reminder_no_tool",
        )

    def remind(self) -> None:
        used = self.budget.used_fraction()
        if (
            "draft" not in self.reminded
            and not self.rundir.n_drafts
            and used >= self.limits.draft_reminder_fraction
        ):
            self.reminded.add("draft")
            text = self.templates.render(
                "reminder_draft.md.jinja", used_fraction=used, budget=self.budget.describe()
            )
            self.add_message("user", text, kind="reminder_draft")
        if "wrapup" not in self.reminded and used >= self.limits.wrapup_reminder_fraction:
            self.reminded.add("wrapup")
            text = self.templates.render(
                "reminder_wrapup.md.jinja",
                used_fraction=used,
                budget=self.budget.describe(),
                has_draft=bool(self.rundir.n_drafts),
            )
            self.add_message("user", text, kind="reminder_wrapup")

    # -- records ----------------------------------------------------------------------------------------

    def task_message(self) -> str:
        rows = self.task.targets
        shown = rows if len(rows) <= 200 else rows[:200]
        buffer = io.StringIO()
        writer = csv.DictWriter(buffer, fieldnames=self.task.target_columns, lineterminator="\n")
        writer.writeheader()
        for row in shown:
            writer.writerow({k: "" if v is None else v for k, v in row.items()})
        return self.templates.render(
            "task.md.jinja",
            task=self.task,
            task_dir=str(self.task.root),
            targets_csv=buffer.getvalue().strip(),
            targets_truncated=len(shown) < len(rows),
            targets_shown=len(shown),
        )

    def add_message(self, role: str, content: str, *, kind: str) -> None:
        message = {"role": role, "content": content}
        self.messages.append(message)
        self.trajectory.write({"type": "message", "kind": kind, "message": message})

    def event(self, name: str, **details: Any) -> None:
        try:
            self.trajectory.write({"type": "event", "event": name, **details})
        except Exception:  # an event is never worth a crash
            log.exception("could not record the event %s", name)

    # -- the end ----------------------------------------------------------------------------------------

    def finish(self, exit_status: str, reason: str) -> RunOutcome:
        """Leave valid files whatever happened; each file is attempted even if another fails."""
        self.finishing = True
        errors: list[str] = []
        submission = "fallback"
        try:
            submission = self.rundir.secure_submission()
        except Exception as exc:
            errors.append(f"rankings.json: {exc!r}")
        result = {
            "run_id": self.run_id,
            "task_id": self.task.task_id,
            "task_version": self.task.task_version,
            "model": self.model.name,
            "exit_status": exit_status,
            "reason": reason,
            "submission": submission,
            "drafts": self.rundir.n_drafts,
            "steps": self.budget.steps,
            "elapsed_s": round(self.budget.elapsed_s, 3),
            "usage": self.budget.usage.to_dict(),
            "cost_usd": round(self.budget.cost_usd, 6),
            "context_outputs_elided": self.context.elided_total,
        }
        if self.signal is not None:
            result["signal"] = self.signal
        steps = [
            ("trajectory", lambda: self.trajectory.write({"type": "run_end", **result})),
            (
                "report.md",
                lambda: self.rundir.write_report(
                    {
                        k: result[k]
                        for k in (
                            "exit_status",
                            "reason",
                            "submission",
                            "drafts",
                            "steps",
                            "elapsed_s",
                            "cost_usd",
                            "model",
                        )
                    }
                ),
            ),
            ("sources.json", self.rundir.write_sources),
            (
                "trajectory.json",
                lambda: write_atif(self.rundir.trajectory, self.rundir.atif, agent_version=agent_version()),
            ),
        ]
        for name, action in steps:
            try:
                action()
            except Exception as exc:
                errors.append(f"{name}: {exc!r}")
        if errors:
            result["finish_errors"] = errors
        self.trajectory.close()
        self.rundir.write_result(result)
        return RunOutcome(exit_status, reason, submission, result)
