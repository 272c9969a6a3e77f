"""Rendering the prompt templates of ``prompts/`` (or of a folder that overrides some of them)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jinja2

from prompts import TEMPLATE_DIR


class Templates:
    def __init__(self, override_dir: str | Path | None = None) -> None:
        search = [str(Path(override_dir))] if override_dir else []
        self.env = jinja2.Environment(
            loader=jinja2.FileSystemLoader([*search, str(TEMPLATE_DIR)]),
            undefined=jinja2.StrictUndefined,
            keep_trailing_newline=False,
            autoescape=False,
        )

    def render(self, name: str, **values: Any) -> str:
        return self.env.get_template(name).render(**values).strip()
