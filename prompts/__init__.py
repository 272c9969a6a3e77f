"""The reference agent's prompts, as Jinja2 templates (each states at its top what it is for).

``system.md.jinja`` (role, information policy, working method), ``task.md.jinja`` (the task message),
``reminder_*.md.jinja`` (messages the loop adds when the run needs steering). A folder given as
``prompts.dir`` in the agent config overrides templates of the same name.
"""

from __future__ import annotations

from pathlib import Path

TEMPLATE_DIR = Path(__file__).resolve().parent
TEMPLATES = (
    "system.md.jinja",
    "task.md.jinja",
    "reminder_draft.md.jinja",
    "reminder_wrapup.md.jinja",
    "reminder_no_tool.md.jinja",
)
