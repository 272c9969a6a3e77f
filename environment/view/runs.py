"""Read one agent run directory into the plain data the viewer's page draws.

Everything a run directory can hold is optional, and every file may be cut short or malformed: each
reader notes what is wrong in ``problems`` (with where and what to do) and keeps what it could read, so
the page always says something. Long texts are cut here (``MAX_TEXT`` characters, head and tail) so a
10,000-step run stays a page a browser opens at once.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from environment import runs
from environment.runs import RunFolder, within
from environment.view.categories import category_of
from spu_common import confined

#: longest tool output, argument or message text kept per step (characters)
MAX_TEXT = 4000
#: longest report.md kept
MAX_REPORT = 200_000


def problem(level: str, where: str, message: str, hint: str = "") -> dict[str, str]:
    return {"level": level, "where": where, "message": message, "hint": hint}


def cut(text: Any, limit: int = MAX_TEXT) -> str:
    """``text`` as a string of at most about ``limit`` characters: head and tail with a note between."""
    if text is None:
        return ""
    if not isinstance(text, str):
        try:
            text = json.dumps(text, ensure_ascii=False, indent=1, default=str)
        except RecursionError:
            return "(a JSON value nested too deeply to show)"
    if len(text) <= limit:
        return text
    head = text[: limit * 3 // 4]
    tail = text[-(limit // 4) :]
    return f"{head}\n… [{len(text) - len(head) - len(tail):,} characters cut of {len(text):,}] …\n{tail}"


#: the problem of a file reached through a link: spu view follows none
LINK_PROBLEM = "is a link; spu view follows no link, so nothing out of the folder shown is read; not read"


def read_in(path: Path, root: Path, problems: list[dict[str, str]], where: str) -> bytes | None:
    """The bytes of the file ``path``, read once below ``root`` (:mod:`spu_common.confined`: no link in any
    part of it, no FIFO waited on, sized first); None for a file that is not there, and None with a problem
    noted for one that may not be read."""
    try:
        return confined.read_file(path, [root], max_bytes=runs.MAX_RUN_FILE_BYTES, allow_hard_links=True).data
    except confined.Refused as exc:
        if exc.reason == "missing":
            return None
        if exc.reason == "link":
            problems.append(
                problem(
                    "error", where, LINK_PROBLEM, "spu view shows only files inside the folder it is given"
                )
            )
        else:
            problems.append(problem("error", where, f"cannot be read: {exc.message}"))
        return None


def read_json_file(path: Path, problems: list[dict[str, str]], where: str, root: Path | None = None) -> Any:
    """A JSON file's content, or None with a problem noted (absent files are not a problem here).

    ``root``: the folder it is read below, no link followed (default: its own folder). NaN and Infinity,
    which Python's parser accepts but JSON does not, and nesting too deep to read are problems."""
    raw = read_in(path, root or path.parent, problems, where)
    if raw is None:
        return None
    value, found = runs.json_of(raw)
    if found is not None:
        problems.append(problem("error", where, found.message, found.hint))
    return value


def read_trajectory(path: Path, problems: list[dict[str, str]], root: Path) -> list[dict[str, Any]]:
    """The records of a run's trajectory (:func:`environment.runs.read_trajectory`, read below ``root``),
    its problems noted: malformed lines are listed together and skipped; a torn last line is a warning."""
    read = runs.read_trajectory(path, root)
    where = path.name
    bad = [
        p.line for p in read.problems if p.code == "trajectory_malformed" and p.line and p.level == "error"
    ]
    for found in read.problems:
        if found.code == "trajectory_truncated" and read.format == "jsonl":
            problems.append(
                problem(
                    "warning",
                    f"{where} line {found.line}",
                    "the last line is incomplete (a torn write): the run was cut off while writing it",
                    "the records before it are shown",
                )
            )
        elif found.code == "trajectory_empty":
            problems.append(problem("error", where, "is empty", "the run stopped before its first record"))
        elif found.level == "warning":
            problems.append(problem("warning", where, found.message, found.hint))
        elif not (found.code == "trajectory_malformed" and found.line and read.format == "jsonl"):
            problems.append(problem("error", where, found.message, found.hint))
    if bad and read.format == "jsonl":
        shown = ", ".join(map(str, bad[:10])) + (f" and {len(bad) - 10} more" if len(bad) > 10 else "")
        problems.append(
            problem(
                "error",
                f"{where} line{'s' if len(bad) > 1 else ''} {shown}",
                "not a trajectory record (not a JSON object with a `type`); skipped",
                "the file was edited or written by another program",
            )
        )
    return read.records


def _num(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return None
    return float(value)


def _tokens(usage: Any) -> int:
    if not isinstance(usage, dict):
        return 0
    return int(
        sum(
            _num(usage.get(k)) or 0
            for k in ("input_tokens", "cache_read_tokens", "cache_write_tokens", "output_tokens")
        )
    )


def _provenance(data: Any, content: Any) -> str:
    """The provenance block of a tool result (structured data first, else the JSON text the model read)."""
    found = data.get("provenance") if isinstance(data, dict) else None
    if found is None and isinstance(content, str) and '"provenance"' in content[:200_000]:
        try:
            parsed = json.loads(content)
        except (ValueError, RecursionError):
            parsed = None
        if isinstance(parsed, dict):
            found = parsed.get("provenance")
    return cut(found, 1500) if found else ""


def _error_code(content: Any) -> str:
    """The stable error code of an error result (``[code] message Hint: …``), or ''."""
    if isinstance(content, str) and content.startswith("["):
        end = content.find("]")
        if 1 < end < 40:
            return content[1:end]
    return ""


def timeline(records: list[dict[str, Any]], problems: list[dict[str, str]]) -> list[dict[str, Any]]:
    """One row per model turn, tool result, message and event, in the order they happened.

    Row keys are short (the page holds thousands): ``k`` kind (turn, retry, call, msg, event, end), ``s``
    step, ``t`` seconds since the start, ``n`` name, ``c`` category, ``d`` duration in seconds, ``tok``
    tokens, ``usd`` cost, ``e`` error code or flag (``retry``; ``malformed`` for a call whose arguments were
    not a JSON object, ``refused`` for a call to a tool the agent does not have), ``x`` short text, ``a``
    arguments, ``o`` output, ``p`` provenance, ``r`` the raw payload (a retried attempt's error and body, a
    malformed or refused call as the model sent it).
    """
    rows: list[dict[str, Any]] = []
    step = 0
    start = next((r for r in records if r["type"] == "run_start"), {})
    offered = {t.get("name") for t in start.get("tools") or [] if isinstance(t, dict)}
    calls_by_id: dict[str, dict[str, Any]] = {}
    for rec in records:
        kind = rec["type"]
        t = _num(rec.get("elapsed_s"))
        if kind == "model_turn":
            step = int(_num(rec.get("step")) or step + 1)
            msg = rec.get("message") if isinstance(rec.get("message"), dict) else {}
            calls = msg.get("tool_calls") if isinstance(msg.get("tool_calls"), list) else []
            names = [c.get("name") or "?" for c in calls if isinstance(c, dict)]
            calls_by_id.update({str(c.get("id")): c for c in calls if isinstance(c, dict)})
            rows.extend(_retry_rows(rec, step, t))
            rows.append(
                {
                    "k": "turn",
                    "s": step,
                    "t": t,
                    "n": "model",
                    "c": "model",
                    "d": _num(rec.get("latency_s")),
                    "tok": _tokens(rec.get("usage")),
                    "usd": _num(rec.get("cost_usd")) or 0.0,
                    "x": cut(msg.get("content") or "", 600),
                    "calls": names,
                    "a": cut(msg.get("reasoning") or "", 1500),
                }
            )
        elif kind == "tool_result":
            call = calls_by_id.get(str(rec.get("tool_call_id")), {})
            rows.append(_call_row(rec, int(_num(rec.get("step")) or step), t, call, offered))
        elif kind == "message":
            msg = rec.get("message") if isinstance(rec.get("message"), dict) else {}
            rows.append(
                {
                    "k": "msg",
                    "s": step,
                    "t": t,
                    "n": str(rec.get("kind") or msg.get("role") or "message"),
                    "c": "message",
                    "x": cut(msg.get("content") or "", 600),
                    "o": cut(msg.get("content") or ""),
                }
            )
        elif kind == "event":
            details = {k: v for k, v in rec.items() if k not in ("type", "time", "elapsed_s", "event")}
            rows.append(
                {
                    "k": "event",
                    "s": step,
                    "t": t,
                    "n": str(rec.get("event") or "event"),
                    "c": "event",
                    "o": cut(details),
                }
            )
        elif kind == "run_end":
            rows.append(
                {
                    "k": "end",
                    "s": step,
                    "t": t,
                    "n": str(rec.get("exit_status") or "ended"),
                    "c": "end",
                    "x": cut(rec.get("reason") or "", 600),
                }
            )
    return rows


def _call_row(
    rec: dict[str, Any], step: int, t: float | None, call: dict[str, Any], offered: set[Any]
) -> dict[str, Any]:
    """The timeline row of a ``tool_result`` (``call``: the model's call it answers, for the raw payload)."""
    name = str(rec.get("name") or "?")
    content = rec.get("content")
    is_error = bool(rec.get("is_error"))
    data = rec.get("data")
    withheld = isinstance(data, dict) and data.get("withheld") is True
    flag = _call_flag(call, name, offered) if is_error else ""
    return {
        "k": "call",
        "s": step,
        "t": t,
        "n": name,
        "c": category_of(name),
        "d": _num(rec.get("wall_s")),
        "e": flag or ((_error_code(content) or "error") if is_error else ("withheld" if withheld else "")),
        "x": " ".join(str(content or "")[:240].split())[:160],
        "a": cut(rec.get("arguments")),
        "o": cut(content),
        "p": _provenance(data, content),
        "r": cut(_raw_call(call)) if flag else "",
    }


def _retry_rows(turn: dict[str, Any], step: int, t: float | None) -> list[dict[str, Any]]:
    """A row per failed attempt before a model reply (``retries``); for trajectories that record only the
    number of ``attempts``, one row saying how many failed."""
    retries = [r for r in turn.get("retries") or [] if isinstance(r, dict)]
    rows = []
    for retry in retries:
        status = retry.get("status")
        rows.append(
            {
                "k": "retry",
                "s": step,
                "t": t,
                "n": f"retry after attempt {retry.get('attempt', '?')}"
                + (f" (HTTP {status})" if status else ""),
                "c": "event",
                "d": _num(retry.get("wait_s")),
                "e": "retry",
                "x": cut(retry.get("error") or "", 160),
                "r": cut(_raw_retry(retry)),
            }
        )
    attempts = _num(turn.get("attempts"))
    if not retries and attempts and attempts > 1:
        failed = int(attempts) - 1
        rows.append(
            {
                "k": "retry",
                "s": step,
                "t": t,
                "n": f"{failed} failed attempt{'s' if failed > 1 else ''} retried",
                "c": "event",
                "e": "retry",
                "x": f"the model call took {int(attempts)} attempts (their errors are not recorded)",
                "r": f"attempts: {int(attempts)}",
            }
        )
    return rows


def _call_flag(call: dict[str, Any], name: str, offered: set[Any]) -> str:
    """``malformed`` (arguments that were not a JSON object), ``refused`` (a tool the agent does not have)."""
    if call.get("error"):
        return "malformed"
    if offered and name not in offered:
        return "refused"
    return ""


def _raw_call(call: dict[str, Any]) -> str:
    """A tool call as the model sent it: its id, name, raw arguments text and the agent's objection."""
    raw = call.get("arguments_raw")
    if raw is None and call.get("arguments") is not None:
        raw = json.dumps(call["arguments"], ensure_ascii=False)
    lines = [f"{key}: {call[key]}" for key in ("id", "name") if call.get(key) is not None]
    lines.append(f"arguments (as sent): {raw if raw is not None else '(none)'}")
    if call.get("error"):
        lines.append(f"not run: {call['error']}")
    return "\n".join(lines)


def _raw_retry(retry: dict[str, Any]) -> str:
    """A failed attempt: status, error, the wait before the next one, and the response body."""
    lines = [f"attempt {retry.get('attempt', '?')}: HTTP {retry.get('status') or '(no response)'}"]
    lines += [f"error: {retry.get('error') or ''}", f"waited: {retry.get('wait_s')} s", "body:"]
    return "\n".join(lines) + "\n" + str(retry.get("body") or "")


def ending(records: list[dict[str, Any]], run_json: Any) -> dict[str, Any]:
    """How the run ended: ``run.json`` first, else the trajectory's ``run_end``, else 'did not finish'."""
    end = run_json if isinstance(run_json, dict) else None
    if end is None:
        end = next((r for r in reversed(records) if r.get("type") == "run_end"), None)
    if end is None:
        return {
            "exit_status": "unfinished",
            "reason": "no run.json and no run_end record: the run is still going or was killed",
        }
    usage = end.get("usage") if isinstance(end.get("usage"), dict) else {}
    return {
        "exit_status": str(end.get("exit_status") or "unknown"),
        "reason": cut(end.get("reason") or "", 2000),
        "submission": end.get("submission"),
        "drafts": end.get("drafts"),
        "steps": end.get("steps"),
        "elapsed_s": _num(end.get("elapsed_s")),
        "tokens": _tokens(usage),
        "cost_usd": _num(end.get("cost_usd")),
        "signal": end.get("signal"),
    }


def read_run(run: RunFolder | Path) -> dict[str, Any]:
    """Everything the run page shows, from one run folder (no grading here: see ``Grader``).

    Every file is read once below the folder shown (the runs directory the run was found in), through no
    link at all (:func:`read_in`)."""
    path = run.path if isinstance(run, RunFolder) else Path(run)
    folder = run if isinstance(run, RunFolder) else RunFolder(path, ())
    top = folder.top
    problems: list[dict[str, str]] = []
    if not runs.is_run_dir(path):
        problems.append(
            problem(
                "error",
                path.name or str(path),
                "holds none of the files an agent run leaves (trajectory.jsonl, rankings.json, run.json, "
                "drafts/)",
                "give `spu view` the directory passed to `spu agent run --out`",
            )
        )
    records: list[dict[str, Any]] = []
    traj = folder.trajectory()
    if traj is not None and traj.is_symlink():
        problems.append(problem("error", traj.relative_to(path).as_posix(), LINK_PROBLEM))
    elif traj is not None:
        records = read_trajectory(traj, problems, top)
        if traj.suffix == ".json":
            problems.append(
                problem(
                    "warning",
                    "trajectory.jsonl",
                    f"is missing: the timeline comes from the ATIF {traj.relative_to(path).as_posix()}",
                )
            )
    elif traj is None and runs.is_run_dir(path):
        problems.append(problem("warning", "trajectory.jsonl", "is missing: no timeline to show"))
    run_json = read_json_file(path / "run.json", problems, "run.json", top)
    start = next((r for r in records if r.get("type") == "run_start"), {})
    rows = timeline(records, problems)
    drafts = read_drafts(path, problems, top)
    rankings = read_json_file(path / "rankings.json", problems, "rankings.json", top)
    raw_report = read_in(path / "report.md", top, problems, "report.md")
    report = raw_report.decode("utf-8", errors="replace")[:MAX_REPORT] if raw_report is not None else ""
    end = ending(records, run_json)
    task_id = (
        start.get("task_id")
        or (run_json.get("task_id") if isinstance(run_json, dict) else None)
        or (rankings.get("task_id") if isinstance(rankings, dict) else None)
    )
    members = path / "members"
    return {
        "task_id": task_id,
        "task_dir": start.get("task_dir"),
        "model": start.get("model") or (run_json.get("model") if isinstance(run_json, dict) else None),
        "run_id": start.get("run_id"),
        "started": start.get("time"),
        "ending": end,
        "rows": rows,
        "drafts": drafts,
        "rankings": rankings if isinstance(rankings, dict) else None,
        "report_md": report,
        "sources": read_sources(path, records, problems, top),
        "problems": problems,
        "members": sorted(p.name for p in members.glob("member-*") if p.is_dir() and within(path, p))
        if members.is_dir() and within(path, members)
        else [],
    }


def _orders(data: Any) -> dict[str, list[str]]:
    """``{group_id: order}`` from a submission-shaped object; {} when it has no such shape."""
    out: dict[str, list[str]] = {}
    rankings = data.get("rankings") if isinstance(data, dict) else None
    for entry in rankings if isinstance(rankings, list) else []:
        if isinstance(entry, dict) and isinstance(entry.get("order"), list):
            out[str(entry.get("group_id"))] = [str(x) for x in entry["order"]]
    return out


def read_drafts(path: Path, problems: list[dict[str, str]], top: Path) -> list[dict[str, Any]]:
    drafts = []
    if (path / "drafts").is_symlink() or not within(path, path / "drafts"):
        return drafts
    for file in sorted((path / "drafts").glob("draft-*.json")):
        where = f"drafts/{file.name}"
        if file.is_symlink():
            problems.append(problem("error", where, LINK_PROBLEM))
            continue
        data = read_json_file(file, problems, where, top)
        orders = _orders(data)
        if data is not None and not orders:
            problems.append(problem("error", where, "holds no `rankings` with group orders"))
        drafts.append({"name": file.stem, "file": where, "orders": orders})
    return drafts


def _audit_refusals(path: Path, problems: list[dict[str, str]], top: Path) -> list[dict[str, Any]]:
    """Refused and failed web calls from the tool server's audit log (``spu-work/audit/audit.jsonl``)."""
    raw = read_in(path / "spu-work" / "audit" / "audit.jsonl", top, problems, "spu-work/audit/audit.jsonl")
    if raw is None:
        return []
    refused = []
    for rec in read_jsonl_plain(raw):
        if rec.get("kind") == "http" and rec.get("error") == "url_refused":
            refused.append(
                {
                    "outcome": "refused",
                    "tool": rec.get("tool"),
                    "url": rec.get("url"),
                    "detail": rec.get("reason") or "url_refused",
                    "seq": rec.get("seq"),
                }
            )
        elif rec.get("kind") == "call" and rec.get("error") in ("policy_blocked",):
            args = rec.get("args") if isinstance(rec.get("args"), dict) else {}
            refused.append(
                {
                    "outcome": "refused",
                    "tool": rec.get("tool"),
                    "url": args.get("url") or args.get("query"),
                    "detail": "policy_blocked: the information policy stopped web calls",
                    "seq": rec.get("seq"),
                }
            )
    return refused


def read_jsonl_plain(raw: bytes) -> list[dict[str, Any]]:
    """JSON objects of a JSON-lines file's bytes, skipping anything else (for the audit log's optional
    detail).

    Unlike the audit log's own reader (``spu_common.audit_log``), this never raises: a page must still be
    drawn for a run whose log was cut short; ``sources.json`` says whether the log verified."""
    out = []
    text = raw.decode("utf-8", errors="replace")
    for line in text.splitlines():
        try:
            rec = json.loads(line)
        except (ValueError, RecursionError):
            continue
        if isinstance(rec, dict):
            out.append(rec)
    return out


def _refused_in_trajectory(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Without the audit log, the trajectory's failed web calls say what was refused."""
    refused = []
    for rec in records:
        if rec.get("type") != "tool_result" or not rec.get("is_error"):
            continue
        if category_of(str(rec.get("name") or "")) not in ("literature", "database"):
            continue
        args = rec.get("arguments") if isinstance(rec.get("arguments"), dict) else {}
        code = _error_code(rec.get("content"))
        refused.append(
            {
                "outcome": "refused" if code in ("url_refused", "policy_blocked") else "failed",
                "tool": rec.get("name"),
                "url": args.get("url") or args.get("query") or args.get("id"),
                "detail": cut(rec.get("content"), 300),
                "seq": None,
            }
        )
    return refused


def read_sources(
    path: Path, records: list[dict[str, Any]], problems: list[dict[str, str]], top: Path
) -> dict[str, Any]:
    """Searches and sources with their outcome: fetched, withheld by the detector, refused, failed."""
    data = read_json_file(path / "sources.json", problems, "sources.json", top)
    data = data if isinstance(data, dict) else {}
    items: list[dict[str, Any]] = []
    kinds = {
        f.get("seq"): ", ".join(map(str, f.get("kinds") or []))
        for f in data.get("flags") or []
        if isinstance(f, dict)
    }
    for src in data.get("sources") or []:
        if not isinstance(src, dict):
            continue
        flagged = (
            f"identifier kinds found: {kinds[src.get('seq')]}"
            if src.get("flagged") and kinds.get(src.get("seq"))
            else None
        )
        items.append(
            {
                "outcome": "withheld" if src.get("flagged") else "fetched",
                "tool": src.get("tool"),
                "url": src.get("final_url") or src.get("url"),
                "detail": " · ".join(
                    str(x)
                    for x in (src.get("status"), src.get("content_type"), src.get("title"), flagged)
                    if x not in (None, "")
                ),
                "seq": src.get("seq"),
            }
        )
    for flag in data.get("flags") or []:
        if isinstance(flag, dict) and not any(i["seq"] == flag.get("seq") for i in items):
            items.append(
                {
                    "outcome": "withheld",
                    "tool": flag.get("tool"),
                    "url": "",
                    "detail": "identifier kinds found: " + ", ".join(map(str, flag.get("kinds") or [])),
                    "seq": flag.get("seq"),
                }
            )
    refused = _audit_refusals(path, problems, top) or _refused_in_trajectory(records)
    items.extend(refused)
    searches = [
        {
            "tool": s.get("tool"),
            "provider": s.get("provider"),
            "query": s.get("query"),
            "n_results": s.get("n_results"),
        }
        for s in data.get("searches") or []
        if isinstance(s, dict)
    ]
    audit = data.get("audit_log") if isinstance(data.get("audit_log"), dict) else None
    return {
        "present": (path / "sources.json").is_file(),
        "note": data.get("note"),
        "audit": audit,
        "searches": searches,
        "items": items,
    }
