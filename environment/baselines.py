"""``spu baselines``: what trivial strategies score on a task, before anyone publishes it.

Three kinds (docs/analysis.md):

* chance: the chance threshold (95th percentile of 4,000 random valid submissions) and the attainable
  maximum, from :mod:`environment.chance`;
* monotone prior: for every numeric setup field that varies within a group, the ranking that follows it,
  in both directions (:mod:`environment.analysis.monotone`);
* proxies a task author declares in ``baselines.json`` beside ``answers.json``: one tool of the spu server
  per experiment, a number read from its result, ranked in a declared direction. The tools run through the
  real server (``spu serve`` started over stdio and spoken to with the ``mcp`` client SDK, like any
  agent), so results come from, and land in, the server's cache.

``baselines.json``::

    {
      "schema": "spu.baselines/1",
      "task_id": "demo-aromatic-acidity",
      "proxies": [
        {
          "name": "Crippen logP",
          "tool": "chem_descriptors",
          "arguments": {"molecules": ["{smiles}"], "preset": "physchem"},
          "value": "items.0.descriptors.logp_crippen",
          "direction": "ascending",
          "groups": ["g1", "g2"]
        }
      ]
    }

``arguments`` is a template filled once per experiment: ``{column}`` inside a string is replaced by the
experiment's ``targets.csv`` value (``{experiment_id}`` and ``{group_id}`` too); a string that is exactly
``{column}`` takes the value itself, so a numeric column stays a number. ``value`` is a dotted path into
the tool's structured result (list indices as numbers). ``direction`` ``ascending`` predicts that the
measured value rises with the proxy, ``descending`` that it falls. ``groups`` (optional) limits the
proxy to some groups; the others score 0, what a random order scores on average.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

from environment.analysis.errors import AnalysisError
from environment.analysis.monotone import DIRECTIONS, field_baseline, varying_fields
from environment.chance import chance_threshold
from environment.rank_agreement import spearman_of_order
from environment.task import Answers, Task
from spu_common.jsonfiles import load_json_strict

SCHEMA = "spu.baselines/1"
DECLARATION_FILE = "baselines.json"
_PLACEHOLDER = re.compile(r"\{([A-Za-z0-9_.\- ]+)\}")
#: Seconds one proxy call may take, waiting on a background job included.
CALL_TIMEOUT_S = 600.0


def load_declaration(path: Path, task: Task) -> list[dict[str, Any]]:
    """The proxies of a ``baselines.json``, checked against the task; errors name the file and the proxy."""
    try:
        data = load_json_strict(path)
    except FileNotFoundError:
        raise AnalysisError("baselines_missing", f"{path} does not exist") from None
    except json.JSONDecodeError as exc:
        raise AnalysisError(
            "baselines_invalid", f"{path}:{exc.lineno}: not valid JSON ({exc.msg})", "Fix the JSON syntax."
        ) from None
    except (OSError, ValueError) as exc:  # a duplicated key, NaN, not UTF-8
        raise AnalysisError(
            "baselines_invalid", f"{path}: {exc}", "Each key once; plain JSON numbers."
        ) from None
    if not isinstance(data, dict) or not isinstance(data.get("proxies"), list):
        raise AnalysisError("baselines_invalid", f"{path}: expected an object with a 'proxies' list")
    if data.get("schema", SCHEMA) != SCHEMA:
        raise AnalysisError(
            "baselines_invalid", f"{path}: schema {data.get('schema')!r}, expected {SCHEMA!r}"
        )
    if data.get("task_id") not in (None, task.task_id):
        raise AnalysisError(
            "baselines_invalid",
            f"{path}: declared for task {data.get('task_id')!r}, not {task.task_id!r}",
            "Keep baselines.json beside the answers of the same task.",
        )
    columns = set(task.target_columns)
    proxies = []
    for i, proxy in enumerate(data["proxies"]):
        where = f"{path}: proxies[{i}]"
        if not isinstance(proxy, dict):
            raise AnalysisError("baselines_invalid", f"{where} is not an object")
        for key in ("name", "tool", "value"):
            if not isinstance(proxy.get(key), str) or not proxy[key]:
                raise AnalysisError("baselines_invalid", f"{where} needs a non-empty string {key!r}")
        if not isinstance(proxy.get("arguments"), dict):
            raise AnalysisError("baselines_invalid", f"{where} needs an 'arguments' object (the template)")
        if proxy.get("direction") not in DIRECTIONS:
            raise AnalysisError(
                "baselines_invalid", f"{where}: direction must be 'ascending' or 'descending'"
            )
        names = set(_PLACEHOLDER.findall(json.dumps(proxy["arguments"])))
        unknown = sorted(names - columns)
        if unknown:
            raise AnalysisError(
                "baselines_invalid",
                f"{where}: the template names {', '.join(unknown)}, not columns of targets.csv",
                f"Columns: {', '.join(task.target_columns)}.",
            )
        groups = proxy.get("groups") or task.group_ids
        bad = [g for g in groups if g not in task.group_ids]
        if bad:
            raise AnalysisError("baselines_invalid", f"{where}: unknown groups {', '.join(map(str, bad))}")
        proxies.append({**proxy, "groups": list(groups)})
    return proxies


def fill_template(template: Any, row: dict[str, Any]) -> Any:
    """The template with ``{column}`` placeholders replaced by the row's values (module docstring)."""
    if isinstance(template, dict):
        return {k: fill_template(v, row) for k, v in template.items()}
    if isinstance(template, list):
        return [fill_template(v, row) for v in template]
    if isinstance(template, str):
        whole = _PLACEHOLDER.fullmatch(template)
        if whole:
            return row.get(whole.group(1))
        return _PLACEHOLDER.sub(
            lambda m: "" if row.get(m.group(1)) is None else str(row[m.group(1)]), template
        )
    return template


def pick(data: Any, dotted: str) -> Any:
    """``pick({"a": [{"b": 2}]}, "a.0.b") == 2``; raises KeyError naming the missing step."""
    current = data
    for part in dotted.split("."):
        if isinstance(current, list) and part.lstrip("-").isdigit():
            index = int(part)
            if not -len(current) <= index < len(current):
                raise KeyError(part)
            current = current[index]
        elif isinstance(current, dict) and part in current:
            current = current[part]
        else:
            raise KeyError(part)
    return current


def server_command() -> list[str]:
    """``spu serve``: the ``spu`` script beside this Python, or on PATH."""
    beside = Path(sys.executable).with_name("spu")
    if beside.is_file():
        return [str(beside), "serve"]
    found = shutil.which("spu")
    if found:
        return [found, "serve"]
    raise AnalysisError(
        "server_unavailable",
        "cannot find the spu command to start the tool server",
        "Install spu-scaffold in this environment, or pass --server-command.",
    )


async def _call_all(
    command: list[str], workdir: Path, calls: list[tuple[str, dict[str, Any]]]
) -> list[tuple[dict[str, Any] | None, str | None]]:
    from mcp.client.client import Client
    from mcp.client.stdio import StdioServerParameters

    env = dict(os.environ)
    env["SPU_WORKDIR"] = str(workdir)
    params = StdioServerParameters(command=command[0], args=command[1:], env=env, cwd=str(workdir))
    results: list[tuple[dict[str, Any] | None, str | None]] = []
    async with Client(params, mode="legacy") as client:
        for tool, arguments in calls:
            result = await client.call_tool(tool, arguments, read_timeout_seconds=CALL_TIMEOUT_S)
            structured = result.structured_content
            # a long tool answers {status: running, job_id}: wait for it like an agent would
            waited = 0.0
            while (
                not result.is_error
                and isinstance(structured, dict)
                and structured.get("status") in ("running", "queued")
                and structured.get("job_id")
                and waited < CALL_TIMEOUT_S
            ):
                result = await client.call_tool(
                    "job_wait", {"job_id": structured["job_id"], "wait_s": 60}, read_timeout_seconds=120
                )
                structured = result.structured_content
                waited += 60
            if result.is_error:
                text = " ".join(getattr(b, "text", "") for b in result.content or [])
                results.append((None, text.strip() or "the tool reported an error"))
            elif not isinstance(structured, dict):
                results.append((None, "the tool returned no structured result"))
            else:
                results.append((structured, None))
    return results


def run_proxies(
    task: Task,
    answers: Answers,
    proxies: list[dict[str, Any]],
    *,
    command: list[str] | None = None,
    workdir: Path | None = None,
) -> list[dict[str, Any]]:
    """Score every declared proxy: one call per experiment of its groups through one ``spu serve``."""
    if not proxies:
        return []
    calls: list[tuple[str, dict[str, Any]]] = []
    plan: list[tuple[int, str, str]] = []  # proxy index, group, experiment
    for p_index, proxy in enumerate(proxies):
        for gid in proxy["groups"]:
            for row in task.rows_of(gid):
                calls.append((proxy["tool"], fill_template(proxy["arguments"], row)))
                plan.append((p_index, gid, row["experiment_id"]))
    command = command or server_command()
    owned = workdir is None
    work = Path(tempfile.mkdtemp(prefix="spu-baselines-")) if owned else Path(workdir)
    work.mkdir(parents=True, exist_ok=True)
    try:
        outcomes = asyncio.run(_call_all(command, work, calls))
    except AnalysisError:
        raise
    except Exception as exc:  # any failure to start or reach the server is one clear error
        detail = exc
        while isinstance(detail, BaseExceptionGroup) and detail.exceptions:
            detail = detail.exceptions[0]
        raise AnalysisError(
            "server_unavailable",
            f"the tool server ({' '.join(command)}) failed: {type(detail).__name__}: {detail}",
            "Run `spu doctor` to check the server, or pass --server-command.",
        ) from None
    finally:
        if owned:
            shutil.rmtree(work, ignore_errors=True)
    values: list[dict[str, dict[str, float]]] = [{} for _ in proxies]
    errors: list[list[str]] = [[] for _ in proxies]
    cache_hits = [0 for _ in proxies]
    for (p_index, gid, eid), (structured, error) in zip(plan, outcomes, strict=True):
        proxy = proxies[p_index]
        if error is not None:
            errors[p_index].append(f"{gid}/{eid}: {error[:300]}")
            continue
        try:
            value = pick(structured, proxy["value"])
        except KeyError as exc:
            errors[p_index].append(
                f"{gid}/{eid}: no {proxy['value']!r} in the result (missing {exc.args[0]!r})"
            )
            continue
        if isinstance(value, bool) or not isinstance(value, int | float):
            errors[p_index].append(f"{gid}/{eid}: {proxy['value']!r} is {value!r}, not a number")
            continue
        values[p_index].setdefault(gid, {})[eid] = float(value)
        if (structured.get("provenance") or {}).get("cache") == "hit":
            cache_hits[p_index] += 1
    out = []
    for p_index, proxy in enumerate(proxies):
        groups = []
        total = 0.0
        complete = not errors[p_index]
        for group in task.groups:
            gid = group.group_id
            if gid not in proxy["groups"]:
                groups.append({"group_id": gid, "rho": 0.0, "used": False})
                continue
            got = values[p_index].get(gid, {})
            if len(got) != len(group.experiment_ids):
                groups.append({"group_id": gid, "rho": None, "used": True})
                continue
            sign = 1.0 if proxy["direction"] == "ascending" else -1.0
            order = [
                e for _, _, e in sorted((sign * got[e], i, e) for i, e in enumerate(group.experiment_ids))
            ]
            rho = spearman_of_order(order, answers.group(gid).values)
            total += group.weight * rho
            groups.append({"group_id": gid, "rho": rho, "used": True, "values": got})
        out.append(
            {
                "name": proxy["name"],
                "tool": proxy["tool"],
                "value": proxy["value"],
                "direction": proxy["direction"],
                "score": total if complete else None,
                "calls": sum(1 for p, *_ in plan if p == p_index),
                "cache_hits": cache_hits[p_index],
                "errors": errors[p_index],
                "groups": groups,
            }
        )
    return out


def baselines(
    task: Task,
    answers: Answers,
    *,
    declaration: Path | None = None,
    run_declared: bool = True,
    command: list[str] | None = None,
    draws: int = 4000,
    seed: int = 0,
) -> dict[str, Any]:
    """Every baseline of one task (module docstring)."""
    chance = chance_threshold(task, answers, draws=draws, seed=seed)
    monotone = [
        field_baseline(task, answers, field, direction)
        for field in varying_fields(task)
        for direction in DIRECTIONS
    ]
    for entry in monotone:
        entry["above_chance"] = entry["score"] > chance["chance_threshold"]
    proxies: list[dict[str, Any]] = []
    declared = None
    if declaration is not None and declaration.is_file():
        declared = load_declaration(declaration, task)
        if run_declared:
            proxies = run_proxies(task, answers, declared, command=command)
            for entry in proxies:
                entry["above_chance"] = (
                    entry["score"] > chance["chance_threshold"] if entry["score"] is not None else None
                )
    return {
        "task_id": task.task_id,
        "task_version": task.task_version,
        "chance_threshold": chance["chance_threshold"],
        "attainable_max": chance["attainable_max"],
        "presented_order_score": chance["presented_order_score"],
        "draws": draws,
        "seed": seed,
        "monotone": monotone,
        "declaration": str(declaration) if declared is not None else None,
        "proxies": proxies,
    }
