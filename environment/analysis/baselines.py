"""``spu baselines``: what trivial strategies score on a task, before anyone publishes it.

Three kinds (docs/analysis.md):

* chance: the chance threshold (95th percentile of random valid submissions, exact where every order can be
  counted), power and the attainable maximum, from :mod:`environment.chance`;
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
``{column}`` takes the value itself, so a numeric column stays a number. ``{task_dir}`` is the task
directory's absolute path, so a proxy can name a file the agent is given (``"{task_dir}/protein.pdb"``); the
server may read files under it. ``{column|largest_fragment}`` takes the largest fragment of a SMILES value
(a salt's parent: ``CCN.Cl`` becomes ``CCN``), as a chemist strips a counter-ion before a calculation.
``value`` is a dotted path into the tool's structured result (list indices as numbers). ``direction``
``ascending`` predicts that the measured value rises with the proxy, ``descending`` that it falls.
``groups`` (optional) limits the proxy to some groups; the others score 0, what a random order scores on
average.

A proxy may combine several tool calls per experiment: instead of ``tool``/``arguments``/``value`` it
gives ``terms`` (each with ``tool``, ``arguments``, ``value`` and optionally ``unit``) and ``combine``:
``difference`` (first term minus second), ``ratio`` (first over second) or ``sum`` (all terms). A term's
unit is its declared ``unit``, else the unit its value's name ends with (``energy_hartree`` is in
``hartree``, ``gap_ev`` in ``ev``); a declared unit that contradicts the name is an error, and a difference
or sum needs every term in one known unit. The xTB solvation energy, for example, is the energy in water
minus the gas-phase energy::

    {"name": "xTB solvation energy", "combine": "difference", "direction": "descending",
     "terms": [
       {"tool": "xtb_run", "arguments": {"molecules": ["{smiles}"], "solvent": "water"},
        "value": "items.0.energy_hartree"},
       {"tool": "xtb_run", "arguments": {"molecules": ["{smiles}"]}, "value": "items.0.energy_hartree"}]}

Scores are the exact expected score over random tie-breaks of the proxy
(:func:`spu_common.rank_agreement.expected_spearman`), so equal proxy values earn no credit from the order
the task happens to present them in. Each proxy also reports its reverse (``reversed_score``, the
negated score) and whether the reverse is above chance: a proxy declared the wrong way round shows as such.

Besides chance (exact where the null can be enumerated, :mod:`environment.chance`), power, the monotone
prior and declared proxies, every run screens trivial descriptors (:mod:`environment.prior_screen`):
``screen`` lists them, ``prior_verdict`` is the family-wise verdict with ``prior_p_value`` and its interval,
and ``prior_solvable`` is true only when that verdict is prior-solvable. Each measured proxy is judged by
the same standard (:func:`judge_proxies`): ``tool_solvable`` when it is above chance, above the best panel
entry, and its family-wise ``p_value`` (the panel with the proxies as more entries) is below 0.05. A card
beside the answers
(:mod:`environment.taskbuild.card`) lends its selection record and the design's prior rate.
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
from environment.chance import chance_threshold, is_above
from environment.prior_screen import descriptor_columns, screen, tool_evidence
from spu_common.jsonfiles import load_json_strict
from spu_common.rank_agreement import expected_spearman
from spu_common.task import Answers, Task

SCHEMA = "spu.baselines/1"
DECLARATION_FILE = "baselines.json"
_PLACEHOLDER = re.compile(r"\{([A-Za-z0-9_.\- ]+)(?:\|([a-z_]+))?\}")
#: The placeholder for the task directory (a targets.csv column of that name would take precedence).
TASK_DIR = "task_dir"
#: Seconds one proxy call may take, waiting on a background job included.
CALL_TIMEOUT_S = 600.0
COMBINE = ("difference", "ratio", "sum")
#: Units a result field's name may end with (``energy_hartree``), longest first so ``kcal_mol`` wins.
UNIT_SUFFIXES = (
    "kcal_mol",
    "kj_mol",
    "g_mol",
    "hartree",
    "angstrom",
    "debye",
    "ev",
    "nm",
    "pm",
    "a2",
    "ns",
    "ps",
)


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
        if not isinstance(proxy.get("name"), str) or not proxy["name"]:
            raise AnalysisError("baselines_invalid", f"{where} needs a non-empty string 'name'")
        if proxy.get("direction") not in DIRECTIONS:
            raise AnalysisError(
                "baselines_invalid", f"{where}: direction must be 'ascending' or 'descending'"
            )
        if "terms" in proxy:
            terms = proxy["terms"]
            if proxy.get("combine") not in COMBINE:
                raise AnalysisError(
                    "baselines_invalid", f"{where}: combine must be one of {', '.join(COMBINE)}"
                )
            if not isinstance(terms, list) or len(terms) < 2:
                raise AnalysisError("baselines_invalid", f"{where}: 'terms' must list two or more tool calls")
            if proxy["combine"] != "sum" and len(terms) != 2:
                raise AnalysisError(
                    "baselines_invalid", f"{where}: a {proxy['combine']} takes exactly two terms"
                )
            terms = [_check_term(t, f"{where}.terms[{j}]", columns, task) for j, t in enumerate(terms)]
            units = [t["unit"] for t in terms]
            if proxy["combine"] in ("difference", "sum") and (None in units or len(set(units)) > 1):
                raise AnalysisError(
                    "baselines_invalid",
                    f"{where}: a {proxy['combine']} needs its terms in one unit, got "
                    + ", ".join("unknown" if u is None else u for u in units),
                    "Give each term a 'unit', or read fields whose names end in their unit.",
                )
            unit = (
                units[0]
                if proxy["combine"] != "ratio"
                else (f"{units[0]}/{units[1]}" if None not in units else None)
            )
        else:
            if "combine" in proxy:
                raise AnalysisError("baselines_invalid", f"{where}: 'combine' needs a 'terms' list")
            terms = [_check_term(proxy, where, columns, task)]
            unit = terms[0]["unit"]
        groups = proxy.get("groups") or task.group_ids
        bad = [g for g in groups if g not in task.group_ids]
        if bad:
            raise AnalysisError("baselines_invalid", f"{where}: unknown groups {', '.join(map(str, bad))}")
        proxies.append({**proxy, "terms": terms, "unit": unit, "groups": list(groups)})
    return proxies


def unit_of_field(path: str) -> str | None:
    """The unit a result field's name ends with (``items.0.energy_hartree`` -> ``hartree``), or None."""
    last = path.rsplit(".", 1)[-1].lower()
    return next((u for u in UNIT_SUFFIXES if last.endswith("_" + u)), None)


def _check_term(term: Any, where: str, columns: set[str], task: Task) -> dict[str, Any]:
    """One tool call of a proxy, checked: tool, template, value path and unit."""
    if not isinstance(term, dict):
        raise AnalysisError("baselines_invalid", f"{where} is not an object")
    for key in ("tool", "value"):
        if not isinstance(term.get(key), str) or not term[key]:
            raise AnalysisError("baselines_invalid", f"{where} needs a non-empty string {key!r}")
    if not isinstance(term.get("arguments"), dict):
        raise AnalysisError("baselines_invalid", f"{where} needs an 'arguments' object (the template)")
    found = _PLACEHOLDER.findall(json.dumps(term["arguments"]))
    bad_filters = sorted({f for _, f in found if f and f not in FILTERS})
    if bad_filters:
        raise AnalysisError(
            "baselines_invalid",
            f"{where}: unknown template filter {', '.join(bad_filters)}",
            f"Filters: {', '.join(FILTERS)}.",
        )
    unknown = sorted({name for name, _ in found} - columns - {TASK_DIR})
    if unknown:
        raise AnalysisError(
            "baselines_invalid",
            f"{where}: the template names {', '.join(unknown)}, not columns of targets.csv",
            f"Columns: {', '.join(task.target_columns)} (and {{{TASK_DIR}}}, the task directory).",
        )
    declared, named = term.get("unit"), unit_of_field(term["value"])
    if declared is not None and not isinstance(declared, str):
        raise AnalysisError("baselines_invalid", f"{where}: 'unit' must be a string")
    if declared is not None and named is not None and declared.lower() != named:
        raise AnalysisError(
            "baselines_invalid",
            f"{where}: unit {declared!r} contradicts the field {term['value']!r} (in {named})",
        )
    unit = declared.lower() if declared else named
    return {"tool": term["tool"], "arguments": term["arguments"], "value": term["value"], "unit": unit}


def largest_fragment(smiles: Any) -> Any:
    """The SMILES of a molecule's largest fragment (a salt's parent: ``'CCN.Cl'`` -> ``'CCN'``), by RDKit's
    ``LargestFragmentChooser``; a value that is not a multi-fragment SMILES is returned unchanged."""
    if not isinstance(smiles, str) or "." not in smiles:
        return smiles
    from rdkit import Chem
    from rdkit.Chem.MolStandardize import rdMolStandardize

    mol = Chem.MolFromSmiles(smiles)
    if mol is None:
        return smiles  # the tool reports the bad SMILES
    return Chem.MolToSmiles(rdMolStandardize.LargestFragmentChooser().choose(mol))


#: Filters a placeholder may apply to its value: ``{smiles|largest_fragment}``.
FILTERS = {"largest_fragment": largest_fragment}


def _placeholder_value(match: re.Match[str], row: dict[str, Any]) -> Any:
    value = row.get(match.group(1))
    return FILTERS[match.group(2)](value) if match.group(2) else value


def fill_template(template: Any, row: dict[str, Any]) -> Any:
    """The template with ``{column}`` placeholders replaced by the row's values (module docstring)."""
    if isinstance(template, dict):
        return {k: fill_template(v, row) for k, v in template.items()}
    if isinstance(template, list):
        return [fill_template(v, row) for v in template]
    if isinstance(template, str):
        whole = _PLACEHOLDER.fullmatch(template)
        if whole:
            return _placeholder_value(whole, row)
        return _PLACEHOLDER.sub(
            lambda m: "" if (v := _placeholder_value(m, row)) is None else str(v), template
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
    command: list[str], workdir: Path, calls: list[tuple[str, dict[str, Any]]], input_roots: list[str]
) -> list[tuple[dict[str, Any] | None, str | None]]:
    from mcp.client.client import Client
    from mcp.client.stdio import StdioServerParameters

    env = dict(os.environ)
    env["SPU_WORKDIR"] = str(workdir)
    roots = [r for r in env.get("SPU_INPUT_ROOTS", "").split(os.pathsep) if r.strip()] + input_roots
    if roots:
        env["SPU_INPUT_ROOTS"] = os.pathsep.join(roots)
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


def combine(how: str | None, values: list[float]) -> float:
    """One experiment's proxy from its terms' values (module docstring); raises ZeroDivisionError."""
    if how is None:
        return values[0]
    if how == "difference":
        return values[0] - values[1]
    if how == "ratio":
        return values[0] / values[1]
    return sum(values)


def run_proxies(
    task: Task,
    answers: Answers,
    proxies: list[dict[str, Any]],
    *,
    command: list[str] | None = None,
    workdir: Path | None = None,
    threshold: float | None = None,
) -> list[dict[str, Any]]:
    """Score every declared proxy: its calls per experiment of its groups, through one ``spu serve``.

    With ``threshold`` (the chance threshold), each entry says whether it, or its reverse, is above it.
    """
    if not proxies:
        return []
    calls: list[tuple[str, dict[str, Any]]] = []
    plan: list[tuple[int, int, str, str]] = []  # proxy index, term index, group, experiment
    task_dir = str(Path(task.root).resolve())
    for p_index, proxy in enumerate(proxies):
        for gid in proxy["groups"]:
            for row in task.rows_of(gid):
                filled_row = {TASK_DIR: task_dir, **row}
                for t_index, term in enumerate(proxy["terms"]):
                    calls.append((term["tool"], fill_template(term["arguments"], filled_row)))
                    plan.append((p_index, t_index, gid, row["experiment_id"]))
    outcomes = _run_calls(calls, command or server_command(), workdir, input_roots=[task_dir])
    term_values, errors, cache_hits = _term_values(proxies, plan, outcomes)
    out = []
    for p_index, proxy in enumerate(proxies):
        entry = _score_proxy(task, answers, proxy, term_values[p_index], errors[p_index])
        entry["calls"] = sum(1 for p, *_ in plan if p == p_index)
        entry["cache_hits"] = cache_hits[p_index]
        score = entry["score"]
        if threshold is not None:
            entry["above_chance"] = None if score is None else is_above(score, threshold)
            entry["reversed_above_chance"] = None if score is None else is_above(-score, threshold)
        out.append(entry)
    return out


def _run_calls(
    calls: list[tuple[str, dict[str, Any]]],
    command: list[str],
    workdir: Path | None,
    input_roots: list[str] | None = None,
) -> list[tuple[dict[str, Any], str | None]]:
    """Every call through one ``spu serve``: (structured result, error text) each, in order.

    ``input_roots`` (the task directory) are added to the server's ``SPU_INPUT_ROOTS``, so tools may read
    the task's files.
    """
    owned = workdir is None
    work = Path(tempfile.mkdtemp(prefix="spu-baselines-")) if owned else Path(workdir)
    work.mkdir(parents=True, exist_ok=True)
    try:
        return asyncio.run(_call_all(command, work, calls, input_roots or []))
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


def _term_values(
    proxies: list[dict[str, Any]], plan: list[tuple[int, int, str, str]], outcomes: list[Any]
) -> tuple[list[dict[tuple[str, str], dict[int, float]]], list[list[str]], list[int]]:
    """Per proxy: each experiment's term values, the errors met, and how many calls were cache hits."""
    term_values: list[dict[tuple[str, str], dict[int, float]]] = [{} for _ in proxies]
    errors: list[list[str]] = [[] for _ in proxies]
    cache_hits = [0 for _ in proxies]
    for (p_index, t_index, gid, eid), (structured, error) in zip(plan, outcomes, strict=True):
        term = proxies[p_index]["terms"][t_index]
        where = f"{gid}/{eid}" + (f" term {t_index}" if len(proxies[p_index]["terms"]) > 1 else "")
        if error is not None:
            errors[p_index].append(f"{where}: {error[:300]}")
            continue
        try:
            value = pick(structured, term["value"])
        except KeyError as exc:
            errors[p_index].append(f"{where}: no {term['value']!r} in the result (missing {exc.args[0]!r})")
            continue
        if isinstance(value, bool) or not isinstance(value, int | float):
            errors[p_index].append(f"{where}: {term['value']!r} is {value!r}, not a number")
            continue
        term_values[p_index].setdefault((gid, eid), {})[t_index] = float(value)
        if (structured.get("provenance") or {}).get("cache") == "hit":
            cache_hits[p_index] += 1
    return term_values, errors, cache_hits


def _score_proxy(
    task: Task,
    answers: Answers,
    proxy: dict[str, Any],
    term_values: dict[tuple[str, str], dict[int, float]],
    errors: list[str],
) -> dict[str, Any]:
    """One proxy's entry: its combined values per group and its expected score over tie-breaks."""
    values: dict[str, dict[str, float]] = {}
    for (gid, eid), got in term_values.items():
        if len(got) != len(proxy["terms"]):
            continue
        try:
            values.setdefault(gid, {})[eid] = combine(
                proxy.get("combine"), [got[t] for t in range(len(proxy["terms"]))]
            )
        except ZeroDivisionError:
            errors.append(f"{gid}/{eid}: the ratio's second term is 0")
    groups = []
    total = 0.0
    sign = 1.0 if proxy["direction"] == "ascending" else -1.0
    for group in task.groups:
        gid = group.group_id
        if gid not in proxy["groups"]:
            groups.append({"group_id": gid, "rho": 0.0, "used": False})
            continue
        got = values.get(gid, {})
        if len(got) != len(group.experiment_ids):
            groups.append({"group_id": gid, "rho": None, "used": True})
            continue
        measured = answers.group(gid).values
        ids = group.experiment_ids
        rho = expected_spearman([sign * got[e] for e in ids], [measured[e] for e in ids])
        total += group.weight * rho
        groups.append({"group_id": gid, "rho": rho, "used": True, "values": got})
    score = total if not errors else None
    return {
        "name": proxy["name"],
        "tool": "+".join(dict.fromkeys(t["tool"] for t in proxy["terms"])),
        "value": proxy.get("value") or f"{proxy['combine']} of {len(proxy['terms'])} terms",
        "combine": proxy.get("combine"),
        "unit": proxy["unit"],
        "direction": proxy["direction"],
        "score": score,
        "reversed_score": None if score is None else -score,
        "errors": errors,
        "groups": groups,
    }


def judge_proxies(
    task: Task,
    answers: Answers,
    proxies: list[dict[str, Any]],
    threshold: float,
    *,
    columns: dict[str, dict[str, float | None]],
    seed: int,
) -> None:
    """Add to each measured proxy entry the panel's standard (:func:`environment.prior_screen.tool_evidence`):
    ``tool_solvable``, ``p_value``, ``p_interval``, ``p_draws``, ``beats_panel`` and ``best_panel_score``;
    a proxy that failed gets ``tool_solvable`` false and no p-value."""
    measured = {p["name"]: _oriented_values(task, p) for p in proxies if p["score"] is not None}
    evidence = tool_evidence(task, answers, measured, threshold, seed=seed, columns=columns)
    for proxy in proxies:
        found = evidence.get(proxy["name"])
        proxy["tool_solvable"] = bool(found and found["tool_solvable"])
        proxy["p_value"] = found["p_value"] if found else None
        proxy["p_interval"] = found["p_interval"] if found else None
        proxy["p_draws"] = found["p_draws"] if found else 0
        proxy["beats_panel"] = found["beats_panel"] if found else None
        proxy["best_panel_score"] = found["best_panel_score"] if found else None


def _oriented_values(task: Task, proxy: dict[str, Any]) -> dict[str, float | None]:
    """A proxy's values per experiment, negated when declared descending (so ascending is its declared
    direction); None in the groups it leaves out."""
    sign = 1.0 if proxy["direction"] == "ascending" else -1.0
    values: dict[str, float | None] = {e: None for g in task.groups for e in g.experiment_ids}
    for group in proxy["groups"]:
        for eid, value in (group.get("values") or {}).items():
            values[eid] = sign * value
    return values


def baselines(
    task: Task,
    answers: Answers,
    *,
    declaration: Path | None = None,
    run_declared: bool = True,
    command: list[str] | None = None,
    draws: int = 4000,
    seed: int = 0,
    card: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Every baseline of one task (module docstring); ``card`` is the task's card when there is one."""
    chance = chance_threshold(task, answers, draws=draws, seed=seed)
    threshold = chance["chance_threshold"]
    monotone = [
        field_baseline(task, answers, field, direction)
        for field in varying_fields(task)
        for direction in DIRECTIONS
    ]
    for entry in monotone:
        entry["above_chance"] = is_above(entry["score"], threshold)
    proxies: list[dict[str, Any]] = []
    declared = None
    if declaration is not None and declaration.is_file():
        declared = load_declaration(declaration, task)
        if run_declared:
            proxies = run_proxies(task, answers, declared, command=command, threshold=threshold)
    columns, notes = descriptor_columns(task)
    screened = screen(task, answers, threshold, seed=seed, columns=columns, notes=notes)
    judge_proxies(task, answers, proxies, threshold, columns=columns, seed=seed)
    keys = (
        "chance_threshold",
        "chance_method",
        "exact_threshold",
        "sampled_threshold",
        "attainable_max",
        "presented_order_score",
        "presented_order_above_chance",
        "reversed_presented_order_above_chance",
        "sampled_threshold_interval",
        "power",
        "power_single_run",
        "runs_for_80pct_power",
        "effect_for_80pct_power",
        "power_runs",
        "power_effect",
        "power_threshold",
        "power_method",
    )
    return {
        "task_id": task.task_id,
        "task_version": task.task_version,
        **{k: chance[k] for k in keys},
        "draws": draws,
        "seed": seed,
        "monotone": monotone,
        "declaration": str(declaration) if declared is not None else None,
        "proxies": proxies,
        "prior_solvable": screened["prior_solvable"],
        "prior_verdict": screened["prior_verdict"],
        "prior_p_value": screened["prior_p_value"],
        "prior_p_interval": screened["prior_p_interval"],
        "screen": screened,
        "selection": (card or {}).get("selection"),
        "design_screen": (card or {}).get("design_screen"),
        "presented_order_allowed": bool((card or {}).get("presented_order", {}).get("allowed")),
    }


def _verdict_text(screened: dict[str, Any]) -> str:
    p_value, interval = screened["prior_p_value"], screened["prior_p_interval"]
    label = {"prior-solvable": "PRIOR-SOLVABLE", "undecided": "UNDECIDED"}.get(
        screened["prior_verdict"], "not prior-solvable"
    )
    if p_value is None:
        return label
    return (
        f"{label} (family-wise p = {p_value:.4f} [{interval[0]:.4f}, {interval[1]:.4f}] over "
        f"{screened['prior_draws']} shuffles, {screened['distinct_entries']} distinct entries)"
    )


def format_baselines(result: dict[str, Any], top: int = 5) -> list[str]:
    """The text ``spu baselines`` prints for one task's :func:`baselines` result."""
    threshold = result["chance_threshold"]
    presented = result["presented_order_score"]
    flag = ""
    if result["presented_order_above_chance"]:
        flag = "  ABOVE CHANCE"
    elif result["reversed_presented_order_above_chance"]:
        flag = f" (reversed {-presented:+.4f}, ABOVE CHANCE)"
    if flag and result["presented_order_allowed"]:
        flag += ", allowed by --allow-presented-order"
    method = result["chance_method"]
    if method == "sampled":  # a sample: say so, with its sampling interval
        low, high = result["sampled_threshold_interval"]
        method = f"sampled from {result['draws']} random submissions, 95% interval [{low:.4f}, {high:.4f}]"
    needed = result["runs_for_80pct_power"]
    lines = [
        f"{result['task_id']}: chance threshold {threshold:.4f} ({method}); attainable max "
        f"{result['attainable_max']:.4f}; presented order {presented:+.4f}{flag}",
        f"  power {result['power']:.2f}: mean of {result['power_runs']} runs of a method with expected score "
        f"{result['power_effect']:+.2f} above chance; one run {result['power_single_run']:.2f}; 80% power "
        + (f"with {needed} runs" if needed is not None else "beyond 50 runs")
        + f"; over {result['power_runs']} runs, from an expected score of "
        f"{result['effect_for_80pct_power']:+.3f}",
    ]
    screened = result["screen"]
    best = screened["best"]
    if best is None:
        lines.append("  screen: nothing to screen (no numeric, molecule, composition or sequence column)")
    else:
        above = "above" if best["above_chance"] else "not above"
        lines.append(
            f"  screen: {_verdict_text(screened)}: best {best['name']} {best['direction']} "
            f"{best['expected_score']:+.4f} (expected over tie-breaks; {above} the single-ranking threshold)"
        )
        for entry in screened["entries"][1:top]:
            lines.append(f"    {entry['name']} {entry['direction']}: {entry['expected_score']:+.4f}")
    for note in screened["notes"]:
        lines.append(f"    note: {note}")
    selection = result["selection"]
    if selection is not None:
        lines.append(
            f"  selection: {selection['kept']} kept of {selection['tried']} tried: {selection['rule']}"
        )
    designed = result["design_screen"]
    if designed is not None and designed["prior_rate"] is not None:
        lines.append(
            f"  design: {designed['prior_solvable']} of {designed['draws'] - designed['failed_draws']} "
            f"draws prior-solvable ({designed['prior_rate']:.0%}; shuffled values "
            f"{designed['shuffled_prior_rate']:.0%})"
        )
    if not result["monotone"]:
        lines.append("  monotone prior: no numeric setup field varies within a group")
    for entry in result["monotone"]:
        mark = "  ABOVE CHANCE" if entry["above_chance"] else ""
        lines.append(
            f"  monotone {entry['field']} {entry['direction']}: {entry['score']:+.4f} "
            f"(ties broken by presented order {entry['strict_score']:+.4f}){mark}"
        )
    if result["declaration"] is None:
        lines.append("  proxies: none declared (baselines.json beside the answers)")
    for entry in result["proxies"]:
        score = "failed" if entry["score"] is None else f"{entry['score']:+.4f}"
        mark = "  ABOVE CHANCE" if entry.get("above_chance") else ""
        if entry.get("reversed_above_chance"):
            mark = f"  reversed: {entry['reversed_score']:+.4f}, above chance"
        if entry.get("p_value") is not None:
            low, high = entry["p_interval"]
            verdict = "TOOL-SOLVABLE" if entry["tool_solvable"] else "not tool-solvable"
            mark += (
                f"; {verdict} (family-wise p = {entry['p_value']:.4f} [{low:.4f}, {high:.4f}] with the "
                f"panel; best panel entry {entry['best_panel_score']:+.4f})"
            )
        lines.append(
            f"  proxy {entry['name']} ({entry['tool']} {entry['value']}, {entry['direction']}): {score}"
            f"  [{entry['calls']} calls, {entry['cache_hits']} cached]{mark}"
        )
        for error in entry["errors"][:5]:
            lines.append(f"    error: {error}")
    return lines
