"""The viewer's HTML: one self-contained document (styles, script and data inlined; figures as data URIs).

The same document is written by ``spu view --out FILE.html`` and served by ``spu view``. Its Content
Security Policy forbids every network request (``default-src 'none'``), so a page opened from a file or
from the local server never reaches out, whatever text a run holds.
"""

from __future__ import annotations

import html
from importlib import resources
from pathlib import Path
from typing import Any

from environment.view.collect import collect, encode_data, problem_data

CSP = (
    "default-src 'none'; img-src data:; style-src 'unsafe-inline'; script-src 'unsafe-inline'; "
    "base-uri 'none'; form-action 'none'"
)


#: names the page as spu view's own: ``spu view --out FILE`` replaces a file holding it (spu_common.outputs)
GENERATOR = '<meta name="generator" content="spu view">'


def is_view_page(path: Path) -> bool:
    """Whether ``path`` is a page ``spu view --out`` wrote (its head names the generator)."""
    try:
        with open(path, "rb") as handle:
            head = handle.read(4096)
    except OSError:
        return False
    return GENERATOR.encode() in head


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


#: fields of a timeline row kept out of the main data (arguments, output, provenance, raw payload), read on
#: demand
DETAIL_KEYS = ("a", "o", "p", "r")
#: timeline rows per separately compressed block of details
DETAIL_CHUNK = 500


def split_details(data: dict[str, Any]) -> tuple[dict[str, Any], list[tuple[str, Any]]]:
    """The data without the rows' bulky fields, and those fields in blocks of ``DETAIL_CHUNK`` rows.

    The page parses only the light part before drawing its first screen; a block is inflated when a row
    in it is opened (or a text filter needs it), so the first screen does not wait for 10,000 outputs.
    """
    runs, blocks = [], []
    for run_index, run in enumerate(data["runs"]):
        rows = []
        for start in range(0, len(run["rows"]), DETAIL_CHUNK):
            part = run["rows"][start : start + DETAIL_CHUNK]
            blocks.append(
                (
                    f"{run_index}-{start // DETAIL_CHUNK}",
                    [{k: row[k] for k in DETAIL_KEYS if row.get(k)} for row in part],
                )
            )
            rows.extend(
                {"i": start + j, **{k: v for k, v in row.items() if k not in DETAIL_KEYS}}
                for j, row in enumerate(part)
            )
        runs.append({**run, "rows": rows, "detail_chunk": DETAIL_CHUNK})
    return {**data, "runs": runs}, blocks


def render_page(data: dict[str, Any]) -> str:
    """The whole page for the data of :func:`environment.view.collect.collect`."""
    light, blocks = split_details(data)
    title = html.escape(f"spu view · {data['title']}")
    script = _static("page.js").replace("</", "<\\/")
    return (
        "<!doctype html>\n"
        '<html lang="en"><head><meta charset="utf-8">\n'
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        f"{GENERATOR}\n<title>{title}</title>\n<style>{_static('page.css')}</style>\n</head>\n<body>\n"
        '<header class="top"><span class="brand">spu view</span>'
        f'<span class="muted">{html.escape(data["title"])}</span><nav id="nav"></nav></header>\n'
        '<main id="app"><p class="muted">Drawing the page…</p>'
        f"{_problems_html(data['problems'])}"
        "<noscript><p>This page needs JavaScript (inlined in the file; nothing is downloaded).</p></noscript>"
        "</main>\n"
        f"<footer>Written by <code>spu view</code> on {html.escape(data['generated'])} from "
        f"<code>{html.escape(data['title'])}</code>. Self-contained: it loads nothing from the network."
        "</footer>\n"
        f'<script type="application/octet-stream" id="spu-data" data-encoding="gzip+base64">'
        f"{encode_data(light)}</script>\n"
        + "".join(
            f'<script type="application/octet-stream" id="spu-detail-{key}" data-encoding="gzip+base64">'
            f"{encode_data(block)}</script>\n"
            for key, block in blocks
        )
        + f"<script>{script}</script>\n</body></html>\n"
    )


def build_page(
    path: str | Path, *, tasks_dir: str | Path | None = None, answers: str | Path | None = None
) -> tuple[str, dict[str, Any]]:
    """The page for PATH and its data. Raises :class:`~environment.view.collect.ViewError` only when PATH
    does not exist; files that cannot be drawn at all (nested too deeply for the JSON encoder) give a
    page that says so instead of a traceback."""
    try:
        data = collect(path, tasks_dir=tasks_dir, answers=answers)
        return render_page(data), data
    except (RecursionError, ValueError) as exc:
        data = problem_data(
            Path(path),
            "its files cannot be drawn: "
            + ("a JSON value is nested too deeply" if isinstance(exc, RecursionError) else str(exc)[:300]),
            "look for a hand-edited or generated file in the folder; `spu view` shows what it can read",
        )
        return render_page(data), data
