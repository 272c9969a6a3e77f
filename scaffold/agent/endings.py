"""How a run ends. The loop raises one of these; whatever is raised, the run's files are finished.

``exit_status`` goes into ``run.json``, the trajectory and the command's exit code (docs/agent.md).
Like ``KeyboardInterrupt``, these derive from ``BaseException``: an ``except Exception`` that guards a
tool call or a file write can never swallow the end of the run (a SIGTERM arriving mid-call, say).
"""

from __future__ import annotations


class RunEnded(BaseException):
    exit_status = "ended"


class Submitted(RunEnded):
    """The model submitted a valid ranking with final=true, or stopped calling tools after a valid draft."""

    exit_status = "submitted"


class LimitReached(RunEnded):
    """A budget (steps, wall time, tokens, cost) is spent; checked before every model call."""

    exit_status = "limit_reached"


class ModelGaveUp(RunEnded):
    """The model stopped calling tools without a valid draft, or kept sending unusable tool calls."""

    exit_status = "model_gave_up"


class ModelFailed(RunEnded):
    """The model API failed for good (authentication, quota, retries exhausted, context exhausted)."""

    exit_status = "model_error"


class Interrupted(RunEnded):
    """SIGTERM or SIGINT."""

    exit_status = "interrupted"
