"""``spu audit``: the audit log of web access (``verify``, ``summary``, ``sources``, ``rotate``), the audit
service (``serve``) and information policy files (``policy check``).

The log's format and its reading side live in ``spu_common.audit_log`` (the agent and the grader read it
too); its writer and the service are this part's, and so are the commands."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Annotated

import typer

from spu_common.console import EXIT_INVALID, echo_json, fail, output_rule

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
        verdict = {"ok": "OK", "rotated": "OK, rotated", "failed": "FAILED"}[result.state]
        typer.echo(f"{path}: {result.count} records, head {result.head[:16]}… {verdict}")
        for earlier in result.rotations:
            typer.echo(
                f"  after {earlier['file']}: {earlier['records']} records, head {earlier['head'][:16]}… "
                f"{'OK' if earlier['ok'] else 'FAILED'}"
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


@audit_app.command("rotate")
def rotate_cmd(
    log: LogArg = None,
    as_json: JsonOpt = False,
    key: Annotated[
        Path | None,
        typer.Option(
            "--key",
            help="The log's HMAC key file (default: LOG.key beside a keyed log, as the service keeps it).",
        ),
    ] = None,
) -> None:
    """Start a new log: the log is renamed to LOG.<UTC time> with its seal, and the new log's first record
    names its file, record count and last hash. Exit 2 when the log fails its check (it is not rotated).

    Safe while a server or the audit service writes the log: they share its lock, and their next web call
    continues in the new log."""
    from spu_common.audit_log import key_path, parse_seal, seal_path
    from tools_server.plugin import ToolError
    from tools_server.web.audit import AuditLog

    path = _existing_log(log)
    key_file = key if key is not None else key_path(path) if key_path(path).exists() else None
    try:
        key_bytes = bytes.fromhex(key_file.read_text(encoding="ascii").strip()) if key_file else None
    except (OSError, ValueError) as exc:
        raise fail(f"cannot read the key {key_file}: {exc}") from None
    if key_bytes is None:
        try:
            keyed = parse_seal(seal_path(path).read_bytes()).mac is not None
        except (OSError, ValueError):
            keyed = False
        if keyed:
            raise fail(f"{path} is keyed (the audit service's): give its key with --key FILE")
    try:
        done = AuditLog(path, key=key_bytes).rotate()
    except ToolError as exc:  # a damaged log is input that cannot be used: exit 2, like any unreadable file
        raise fail(f"{exc.message} (not rotated)") from None
    if as_json:
        echo_json({"rotated": done is not None, "log": str(path), **(done or {})})
    elif done is None:
        typer.echo(f"{path}: no records yet; nothing to rotate")
    else:
        typer.echo(
            f"{path}: {done['count']} records moved to {Path(done['archive']).name} "
            f"(head {done['head'][:16]}…); the new log begins with a rotation record naming it"
        )


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


@audit_app.command("serve")
def serve_cmd(
    log: Annotated[Path, typer.Option("--log", help="Audit log file (created if missing).")],
    policy: Annotated[
        Path | None, typer.Option("--policy", help="Policy file (JSON or YAML); none: record only.")
    ] = None,
    token: Annotated[str | None, typer.Option("--token", help="Shared token (or SPU_AUDIT_TOKEN).")] = None,
    host: Annotated[
        str | None, typer.Option("--host", help="Address to listen on (default 127.0.0.1).")
    ] = None,
    port: Annotated[
        int | None,
        typer.Option(
            "--port", min=0, max=65535, help="Default 8765; 0 picks a free port; the URL is printed as JSON."
        ),
    ] = None,
    socket_path: Annotated[
        Path | None,
        typer.Option(
            "--socket",
            help="Listen on this Unix socket instead of --host/--port (mode 660: owner and group connect).",
        ),
    ] = None,
    workdir: Annotated[
        Path | None, typer.Option("--workdir", help="Fetch cache directory (default: the log's).")
    ] = None,
    key: Annotated[
        Path | None,
        typer.Option(
            "--key", help="HMAC key file of the log (default: LOG.key beside it, created if missing)."
        ),
    ] = None,
) -> None:
    """Run the audit service: performs, records and screens web calls for MCP servers that forward to it."""
    from tools_server.plugin import TOKEN_ADVICE, is_loopback, token_problem
    from tools_server.web.service import AUDIT_TOKEN_ENV, CannotListen, serve

    token = token or os.environ.get(AUDIT_TOKEN_ENV)
    if not token:
        raise fail("a token is required: --token T or SPU_AUDIT_TOKEN")
    if socket_path is not None and (host is not None or port is not None):
        raise fail("--socket listens on a Unix socket instead of --host/--port: give one or the other")
    host = host or "127.0.0.1"
    if socket_path is None and not is_loopback(host) and (problem := token_problem(token)) is not None:
        raise fail(
            f"refusing to bind {host}: a non-loopback address needs a token of at least 32 random "
            f"characters: {problem}. {TOKEN_ADVICE}"
        )
    if policy is not None:
        from tools_server.web.policy import Policy, PolicyError

        try:
            Policy.load(policy)
        except PolicyError as exc:
            raise fail(f"refusing to start: {exc}") from None
    try:
        serve(
            log_path=log,
            token=token,
            policy_path=policy,
            host=host,
            port=8765 if port is None else port,
            socket_path=socket_path,
            workdir=workdir,
            key_file=key,
        )
    except CannotListen as exc:
        raise fail(str(exc)) from None


policy_app = typer.Typer(help="Information policy files.", no_args_is_help=True)
audit_app.add_typer(policy_app, name="policy")


@policy_app.command("check")
def policy_check_cmd(
    file: Annotated[Path, typer.Argument(help="Policy file (JSON or YAML).")],
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
) -> None:
    """Check a policy file against the schema; exit 1 with ``file: key: problem`` when it is wrong.

    Prints the mode and how many identifiers of each kind the policy holds, never the identifiers."""

    from tools_server.web.policy import Policy, PolicyError

    if not file.is_file():
        raise fail(f"{file} {'is not a file' if file.exists() else 'does not exist'}")
    try:
        policy = Policy.load(file)
    except PolicyError as exc:
        if as_json:
            echo_json({"ok": False, "file": exc.source, "key": exc.key, "problem": exc.problem})
            raise typer.Exit(EXIT_INVALID) from None
        raise fail(str(exc), EXIT_INVALID) from None
    counts = {
        kind: len(getattr(policy, kind))
        for kind in ("dois", "pmids", "pmcids", "titles", "preprint_dois", "preprint_titles")
    }
    if as_json:
        echo_json({"ok": True, "file": str(file), "mode": policy.mode, "identifiers": counts})
    else:
        shown = ", ".join(f"{n} {kind}" for kind, n in counts.items() if n)
        typer.echo(f"{file}: OK ({policy.mode} mode; {shown})")


def register(app: typer.Typer) -> None:
    app.add_typer(audit_app, name="audit")


if __name__ == "__main__":  # `python -m tools_server.web.cli serve …` runs without the rest of the CLI
    audit_app()
