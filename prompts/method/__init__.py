"""The working method rendered for each client, from one set of templates (``method.md.jinja``).

The reference agent's system prompt includes ``method.md.jinja`` (client ``agent``); the Claude Code skill
(``SKILL.md`` plus reference files) and the Codex ``AGENTS.md`` section render the same template with
client ``claude`` / ``codex``. ``spu config claude --skill`` and ``spu config codex --agents-md`` write them.
"""

from __future__ import annotations

from typing import Any

import jinja2

from prompts import TEMPLATE_DIR
from spu_common.scoring import FAILED, MAX_SUBMISSION_BYTES

SKILL_NAME = "spu-method"
SKILL_DESCRIPTION = (
    "Working method for ranking wet-lab experiments by a measured outcome with the spu tools (Science "
    "Prediction Universe tasks): what governs the endpoint first, hardware check, long jobs with "
    "job_wait, distrust of one-condition orderings, an early complete rankings.json checked with "
    "ranking_check, disclosure of recollections, stop on exposure."
)
#: file name in the skill folder -> template
SKILL_FILES = {
    "SKILL.md": "method/SKILL.md.jinja",
    "long-jobs.md": "method/long-jobs.md.jinja",
    "tools.md": "method/tools.md.jinja",
    "submission.md": "method/submission.md.jinja",
}


def _env() -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(TEMPLATE_DIR)),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=False,
        autoescape=False,
    )


Tools = dict[str, list[dict[str, str]]]


def _values(client: str, tools_by_domain: Tools, wait_s: tuple[float, float]) -> dict[str, Any]:
    default, maximum = wait_s
    return {
        "client": client,
        "skill_name": SKILL_NAME,
        "skill_description": SKILL_DESCRIPTION,
        "tools_by_domain": tools_by_domain,
        "wait_s_max": f"{maximum:g}",
        "wait_s_default": f"{default:g}",
        # the grader's rules (tests/core/test_method_texts.py grades examples and reads these back)
        "failed_score": f"{FAILED:g}",
        "max_submission_mib": f"{MAX_SUBMISSION_BYTES / 2**20:g}",
    }


def render(
    template: str, client: str, tools_by_domain: Tools | None = None, wait_s: tuple[float, float] = (40, 600)
) -> str:
    """``wait_s``: the server's (default, maximum) seconds, which the long-job notes quote."""
    text = _env().get_template(template).render(**_values(client, tools_by_domain or {}, wait_s))
    return text.strip() + "\n"


def render_method(client: str) -> str:
    """The information policy and working method as ``client`` reads it."""
    return render("method/method.md.jinja", client)


def render_skill(tools_by_domain: Tools, wait_s: tuple[float, float]) -> dict[str, str]:
    """The Claude Code skill's files: ``{file name: text}``."""
    return {name: render(t, "claude", tools_by_domain, wait_s) for name, t in SKILL_FILES.items()}


def render_agents_md(tools_by_domain: Tools, wait_s: tuple[float, float]) -> str:
    """The AGENTS.md section for Codex (without the markers)."""
    return render("method/AGENTS.md.jinja", "codex", tools_by_domain, wait_s)
