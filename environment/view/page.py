"""The viewer's HTML: one self-contained document (styles, script and data inlined; figures as data URIs).

The same document is written by ``spu view --out FILE.html`` and served by ``spu view``. Its Content
Security Policy forbids every network request (``default-src 'none'``), so a page opened from a file or
from the local server never reaches out, whatever text a run holds.
"""

from __future__ import annotations

import html
from importlib import resources
from typing import Any

from environment.view.collect import to_json

CSP = (
    "default-src 'none'; img-src data:; style-src 'unsafe-inline'; script-src 'unsafe-inline'; "
    "base-uri 'none'; form-action 'none'"
)


def _static(name: str) -> str:
    return resources.files("environment.view").joinpath("static", name).read_text(encoding="utf-8")


def _problems_html(problems: list[dict[str, str]]) -> str:
    """The problems as plain HTML, shown before the script runs (and if it never does)."""
    if not problems:
        return ""
    items = "".join(
        f"<li><b>{html.escape(p['where'])}:</b> {html.escape(p['message'])}</li>" for p in problems
    )
    return f'<section class="problems"><ul>{items}</ul></section>'


def render_page(data: dict[str, Any]) -> str:
    """The whole page for the data of :func:`environment.view.collect.collect`."""
    title = html.escape(f"spu view · {data['title']}")
    script = _static("page.js").replace("</", "<\\/")
    return (
        "<!doctype html>\n"
        '<html lang="en"><head><meta charset="utf-8">\n'
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        f"<title>{title}</title>\n<style>{_static('page.css')}</style>\n</head>\n<body>\n"
        '<header class="top"><span class="brand">spu view</span>'
        f'<span class="muted">{html.escape(data["title"])}</span><nav id="nav"></nav></header>\n'
        '<main id="app"><p class="muted">Drawing the page…</p>'
        f"{_problems_html(data['problems'])}"
        "<noscript><p>This page needs JavaScript (inlined in the file; nothing is downloaded).</p></noscript>"
        "</main>\n"
        f'<footer>Written by <code>spu view</code> on {html.escape(data["generated"])} from '
        f"<code>{html.escape(data['title'])}</code>. Self-contained: it loads nothing from the network.</footer>\n"
        f'<script type="application/json" id="spu-data">{to_json(data)}</script>\n'
        f"<script>{script}</script>\n</body></html>\n"
    )
