"""``spu view PATH [--port N] [--out FILE.html]``: runs, trajectories and reports in the browser.

Exit codes: 0 the page was written or served, 2 usage error (PATH missing, port taken, an --out file spu
view did not write). A run directory that is empty, cut short or malformed is not an error here: the page
says what is wrong.
"""

from __future__ import annotations

import errno
from pathlib import Path
from typing import Annotated

import typer

DEFAULT_PORT = 8777


def view_cmd(
    path: Annotated[
        Path,
        typer.Argument(
            help="A run directory, a directory of runs, or a `spu report` / `spu analyze` output."
        ),
    ],
    port: Annotated[
        int, typer.Option("--port", min=0, max=65535, help="Port on 127.0.0.1 (0: any free port).")
    ] = DEFAULT_PORT,
    out: Annotated[
        Path | None,
        typer.Option("--out", "-o", help="Write one self-contained HTML file instead of serving."),
    ] = None,
    tasks: Annotated[
        Path | None, typer.Option("--tasks", help="Directory searched for task dirs (to grade drafts).")
    ] = None,
    answers: Annotated[
        Path | None, typer.Option("--answers", help="answers.json file or directory searched for them.")
    ] = None,
    force: Annotated[
        bool, typer.Option("--force", help="Replace the --out file even if spu view did not write it.")
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print what was done as JSON.")] = False,
) -> None:
    """Show agent runs in the browser: timeline of steps and tool calls, drafts, sources, scores."""
    from environment.view.collect import ViewError
    from environment.view.page import build_page, is_view_page
    from spu_common.console import echo_json, fail, output_rule
    from spu_common.outputs import claim_file

    def build() -> str:
        return build_page(path, tasks_dir=tasks, answers=answers)[0]

    _check_inputs(tasks, answers)
    if out is not None:
        with output_rule():
            claim_file(out, force=force, ours=is_view_page)
    try:
        text, data = build_page(path, tasks_dir=tasks, answers=answers)
    except ViewError as exc:
        raise fail(
            f"{exc}\nhint: give the directory of `spu agent run --out`, `spu batch --out` or a report"
        ) from None
    if out is not None:
        _write_page(out, text, data, as_json)
        return
    from environment.view.server import make_server, page_url

    try:
        server = make_server(build, port)
    except OSError as exc:
        reason = "is in use" if exc.errno == errno.EADDRINUSE else f"cannot be opened ({exc.strerror})"
        raise fail(
            f"port {port} on 127.0.0.1 {reason}\nhint: --port 0 picks any free port; --out writes a file"
        ) from None
    url = page_url(server)
    if as_json:
        echo_json({"url": url}, one_line=True)
    else:
        typer.echo(f"spu view: {url}  (Ctrl-C to stop)")
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()


def register(app: typer.Typer) -> None:
    """Add ``spu view`` to the root ``spu`` app."""
    app.command("view")(view_cmd)


def _check_inputs(tasks: Path | None, answers: Path | None) -> None:
    """--tasks must be a folder, --answers a folder or an answers file."""
    from spu_common.console import fail
    from spu_common.task import TaskError, load_answers

    for given, option in ((tasks, "--tasks"), (answers, "--answers")):
        if given is not None and not given.exists():
            raise fail(f"{option} {given} does not exist")
    if tasks is not None and not tasks.is_dir():
        raise fail(f"--tasks {tasks} is not a folder: give the folder the tasks lie in")
    if (
        answers is not None and answers.is_file()
    ):  # a file given by name must be answers (a folder is searched)
        try:
            load_answers(answers)
        except TaskError as exc:
            raise fail(f"--answers {answers}: {exc}") from None


def _write_page(out: Path, text: str, data: dict, as_json: bool) -> None:
    """The page as one file, and what was written."""
    from spu_common.console import echo_json
    from spu_common.jsonfiles import atomic_write_text

    out.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(out, text, fsync=False)
    summary = {
        "out": str(out),
        "bytes": len(text.encode("utf-8")),
        "runs": len(data["runs"]),
        "problems": len(data["problems"]) + sum(len(r["problems"]) for r in data["runs"]),
    }
    if as_json:
        echo_json(summary)
    else:
        typer.echo(
            f"wrote {out} ({summary['bytes']:,} bytes, {summary['runs']} run(s)); open it in a browser"
        )
