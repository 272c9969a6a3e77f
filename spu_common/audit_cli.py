"""``spu audit verify|summary|sources``: read the audit log of web access (``spu audit serve`` is the
server's, in ``tools_server.web.cli``)."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Annotated

import typer

from spu_common.console import echo_json, fail, output_rule

audit_app = typer.Typer(help="The audit log of web access, and the audit service.", no_args_is_help=True)

LogArg = Annotated[Path | None, typer.Argument(help="Audit log (default: $SPU_WORKDIR/audit/audit.jsonl).")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Machine-readable output.")]


def _log_path(log: Path | None) -> Path:
    """The audit log a command reads: ``log``, else the one under ``$SPU_WORKDIR``; a folder is refused."""
    path = log or Path(os.environ.get("SPU_WORKDIR") or "spu-work").absolute() / "audit" / "audit.jsonl"
    if path.is_dir():
        raise fail(f"{path} is a folder: give the audit log itself (audit.jsonl)")
    return path


def _existing_log(log: Path | None) -> Path:
    path = _log_path(log)
    if not path.exists():
        raise fail(f"no audit log at {path}")
    return path


def _unreadable(path: Path, exc: ValueError) -> typer.Exit:
    return fail(f"{path} is not a readable audit log ({exc}); `spu audit verify {path}` names the bad line")


@audit_app.command("verify")
def verify_cmd(
    log: LogArg = None,
    as_json: JsonOpt = False,
    key: Annotated[
        Path | None,
        typer.Option("--key", help="The log's HMAC key file (the audit service's LOG.key): checks MACs too."),
    ] = None,
) -> None:
    """Check the hash chain and the seal; exit 1 if the log was modified, cut, truncated or forged.

    The log is read as a stream; on a long log the progress goes to stderr about once a second."""
    from spu_common.audit_log import verify

    path = _existing_log(log)
    try:
        key_bytes = bytes.fromhex(key.read_text(encoding="ascii").strip()) if key is not None else None
    except (OSError, ValueError) as exc:
        raise fail(f"cannot read the key {key}: {exc}") from None
    result = verify(path, key_bytes, progress=_progress_printer(path.name))
    if as_json:
        echo_json(result.to_dict())
    else:
        typer.echo(
            f"{path}: {result.count} records, head {result.head[:16]}… {'OK' if result.ok else 'FAILED'}"
        )
        for error in result.errors:
            typer.echo(f"  error: {error}")
        for warning in result.warnings:
            typer.echo(f"  warning: {warning}")
    raise typer.Exit(0 if result.ok else 1)


def _progress_printer(name: str):
    """A ``progress(done, total)`` callback printing ``name: N of M MiB verified (P%)`` on stderr, at most
    once a second (nothing for a log checked within the first second)."""
    last = time.monotonic()

    def progress(done: int, total: int) -> None:
        nonlocal last
        now = time.monotonic()
        if now - last >= 1.0:
            last = now
            share = 100 * done / total if total else 100
            typer.echo(
                f"{name}: {done / 2**20:.0f} of {total / 2**20:.0f} MiB verified ({share:.0f}%)", err=True
            )

    return progress


@audit_app.command("summary")
def summary_cmd(log: LogArg = None, as_json: JsonOpt = False) -> None:
    """Calls per tool, HTTP attempts by status, bytes, flagged calls and policy refusals."""
    from spu_common.audit_log import summary

    path = _existing_log(log)
    try:
        data = summary(path)
    except ValueError as exc:
        raise _unreadable(path, exc) from None
    if as_json:
        echo_json(data)
        return
    typer.echo(
        f"{data['calls']} calls, {data['http_attempts']} HTTP attempts, {data['bytes']} bytes, "
        f"{data['flagged_calls']} flagged, {data['refused_calls']} refused "
        f"({data['policy_refusals']} by the information policy, {data['url_refusals']} URLs by the address "
        "guard)"
    )
    for name, n in sorted(data["calls_by_tool"].items()):
        typer.echo(f"  {name}: {n}")
    typer.echo(f"  outcomes: {data['outcomes']}")
    typer.echo(f"  HTTP status: {data['http_status']}")


@audit_app.command("sources")
def sources_cmd(
    log: LogArg = None,
    out: Annotated[Path, typer.Option("--out", "-o", help="Where to write sources.json.")] = Path(
        "sources.json"
    ),
    force: Annotated[
        bool, typer.Option("--force", help="Replace OUT even if it is not a sources.json.")
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Also print it.")] = False,
) -> None:
    """Write the run's sources.json (searches, fetched sources, flags) from the audit log."""
    from spu_common.audit_log import SOURCES_SCHEMA, write_sources
    from spu_common.outputs import claim_file, json_file_with

    path = _existing_log(log)
    with output_rule():
        claim_file(out, force=force, ours=json_file_with("schema", lambda value: value == SOURCES_SCHEMA))
    try:
        data = write_sources(path, out)
    except ValueError as exc:
        raise _unreadable(path, exc) from None
    if as_json:
        echo_json(data)
    else:
        typer.echo(
            f"wrote {out}: {len(data['searches'])} searches, {len(data['sources'])} sources, "
            f"{len(data['flags'])} flags"
        )
    raise typer.Exit(0 if data["audit_log"]["verified"] else 1)
