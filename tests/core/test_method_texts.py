"""The working method as the models read it (the agent's system prompt, the Claude Code skill, the AGENTS.md
section) checked against the code: every tool, argument, result field, status, file name and error shape
the rendered texts name must exist in the live server's ``tools/list`` (the real server over stdio), in
the results it really returns, in the task format or in the reference agent's own tools."""

from __future__ import annotations

import json
import re
import shutil
from typing import Any

import pytest

from environment.demo_tasks import demo_task_dir
from prompts.method import SKILL_FILES, render_agents_md, render_skill
from scaffold.agent.templates import Templates
from scaffold.agent.tools.builtin import DEFINITIONS as AGENT_TOOLS
from spu_common.submission import fallback_submission
from spu_common.task import Group, Task, load_task
from tools_server.core.waits import WAIT_S_DEFAULT, WAIT_S_MAX

IDENTIFIER = re.compile(r"(?<![\w.$/-])[a-z][a-z0-9]*(?:_[a-z0-9]+)+\b")
QUOTED = re.compile(r"'[^'\n]*'")  # example values inside a tool's description (a UniProt query)
FILE_NAME = re.compile(r"(?<![\w/.-])[\w-]+\.(?:json|jsonl|csv|md|toml)\b")
CALL = re.compile(r"\b([a-z][a-z0-9_]+)\(([^()]*)\)")
SHAPE = re.compile(r"\{[^{}]*(?:\{[^{}]*\}[^{}]*)?\}")
VALUE = re.compile(r':\s*(?:"[^"]*"|[a-z_]+|\d+)(?:\s+or\s+(?:"[^"]*"|[a-z_]+))*')
PROVENANCE = re.compile(r"provenance\.([a-z_]+)(?::\s*(\"[^\"]*\"|null|true|false))?")


def keys_of(value: Any) -> set[str]:
    """Every key at any depth of a JSON value."""
    if isinstance(value, dict):
        return set(value) | {k for v in value.values() for k in keys_of(v)}
    if isinstance(value, list):
        return {k for v in value for k in keys_of(v)}
    return set()


def schema_properties(schema: Any) -> set[str]:
    """Every property name of a JSON schema, nested models and $defs included."""
    found: set[str] = set()
    if isinstance(schema, dict):
        found |= set(schema.get("properties") or {})
        for value in schema.values():
            found |= schema_properties(value)
    elif isinstance(schema, list):
        for value in schema:
            found |= schema_properties(value)
    return found


_LIVE: dict[str, Any] = {}


@pytest.fixture
def live(start_mcp_server, tmp_path_factory) -> dict[str, Any]:
    """The real server over stdio: its tools, and one of each result shape a client sees (gathered once
    for the module)."""
    import os

    if _LIVE:
        return _LIVE
    root = tmp_path_factory.mktemp("method")
    env = {
        **os.environ,
        "SPU_WORKDIR": str(root / "work"),
        "SPU_CACHE_DIR": str(root / "cache"),
        "SPU_WARM_WORKERS": "0",
        "SPU_INPUT_ROOTS": str(root),  # the task and the draft ranking_check reads
    }
    task_dir = root / "task"
    shutil.copytree(demo_task_dir("aromatic-acidity"), task_dir)
    draft = task_dir.parent / "rankings.json"
    draft.write_text(json.dumps(fallback_submission(load_task(task_dir))))
    server = start_mcp_server(env)
    try:
        tools = {t.name: t for t in server.list_tools()}
        pending = server.call_ok("chem_parse", {"molecules": ["CCO"], "wait_s": 0})
        fresh = server.call_ok("job_wait", {"job_id": pending["job_id"], "wait_s": 120})
        hit = server.call_ok("chem_parse", {"molecules": ["CCO"]})
        invalid = server.call("chem_parse", {"molecules": 5})
        checked = server.call_ok("ranking_check", {"task_dir": str(task_dir), "draft_path": str(draft)})
        listed = server.call_ok("jobs", {})
        # a DFT result's own fields (device_reason), on the smallest molecule there is
        dft = server.call("dft_run", {"molecule": "[H][H]", "basis": "sto-3g", "wait_s": 120})
    finally:
        server.close()
    assert invalid.is_error
    _LIVE.update(
        {
            "tools": tools,
            "status": pending,
            "fresh": fresh,
            "hit": hit,
            "error": invalid.structured_content,
            "error_text": " ".join(getattr(c, "text", "") for c in invalid.content),
            "checked": checked,
            "jobs": listed,
            "dft": dft.structured_content,
            "task_files": {p.name for p in task_dir.iterdir()},
        }
    )
    return _LIVE


@pytest.fixture
def texts(live) -> dict[str, str]:
    """What each reader gets, rendered with the live server's tools."""
    from tools_server.commands import clients

    by_domain = clients.tools_by_domain()
    assert {t["name"] for ts in by_domain.values() for t in ts} == set(live["tools"])
    skill = render_skill(by_domain, (WAIT_S_DEFAULT, WAIT_S_MAX))
    return {
        "system prompt": Templates().render("system.md.jinja"),
        **{f"skill {name}": text for name, text in skill.items()},
        "AGENTS.md": render_agents_md(by_domain, (WAIT_S_DEFAULT, WAIT_S_MAX)),
    }


def vocabulary(live: dict[str, Any]) -> set[str]:
    from tools_server.core.errors import ERROR_CODES
    from tools_server.core.registry import load_registry

    load_registry()  # every domain declares its error codes
    tools = live["tools"]
    results = ("status", "fresh", "hit", "error", "checked", "jobs", "dft")
    return (
        set(tools)
        | {p for t in tools.values() for p in schema_properties(t.input_schema)}
        | {k for name in results for k in keys_of(live[name])}
        | set(Task.model_fields)
        | set(Group.model_fields)
        | {"rankings", "order", "experiment_id"}  # the submission and targets.csv
        | set(ERROR_CODES)
        | set(AGENT_TOOLS)
        | {p for d in AGENT_TOOLS.values() for p in schema_properties(d.parameters)}
    )


def test_every_identifier_the_texts_name_exists(live, texts):
    known = vocabulary(live)
    for reader, text in texts.items():
        unknown = sorted(set(IDENTIFIER.findall(QUOTED.sub("", text))) - known)
        assert not unknown, f"{reader} names what no tool, argument, result or task field is: {unknown}"


def test_calls_name_real_tools_with_real_arguments(live, texts):
    tools = live["tools"]
    seen = 0
    for reader, text in texts.items():
        for name, args in CALL.findall(text):
            if name not in tools:
                continue
            seen += 1
            properties = schema_properties(tools[name].input_schema)
            for arg in filter(None, (a.split("=")[0].strip() for a in args.split(","))):
                assert arg in properties, f"{reader}: {name}({args}): {name} has no argument {arg}"
    assert seen >= 3  # job_wait(job_id, wait_s), job_cancel(job_id) ...


def test_shapes_are_the_shapes_the_server_returns(live, texts):
    status_keys = set(live["status"])
    error = live["error"]
    assert set(error) == {"error"} and "ok" not in keys_of(error)
    assert live["status"]["status"] == "queued"
    statuses = {"queued", "running"}
    shapes = 0
    for reader, text in texts.items():
        for shape in SHAPE.findall(text):
            values = set(re.findall(r"[a-z_]+", " ".join(VALUE.findall(shape)))) - {"or", "null"}
            names = set(re.findall(r"\"?([a-z_]+)\"?\s*(?=[:,}])", VALUE.sub(":", shape)))
            if "status" in names:
                shapes += 1
                assert names <= status_keys, f"{reader}: {shape} has keys a pending job lacks"
                assert values <= statuses, f"{reader}: {shape}: not a status a job answers"
            elif "error" in names:
                shapes += 1
                assert "ok" not in names, f"{reader}: {shape}: error results carry no ok"
                inner = SHAPE.findall(shape[1:-1])
                assert inner, f"{reader}: {shape}"
                assert set(re.findall(r"[a-z_]+", inner[0])) <= set(error["error"]), f"{reader}: {shape}"
    assert shapes >= 4
    for reader, text in texts.items():
        for words in re.findall(r"while it answers `([a-z]+)`(?: or `([a-z]+)`)?", " ".join(text.split())):
            assert set(filter(None, words)) <= statuses, reader


def test_provenance_fields_and_values_are_real(live, texts):
    hit, fresh = live["hit"]["provenance"], live["fresh"]["provenance"]
    assert hit["cache"] == "hit" and hit["job_id"] is None and hit["computed_at"]
    assert fresh["cache"] == "miss"
    mentioned = 0
    for reader, text in texts.items():
        for field, value in PROVENANCE.findall(text):
            mentioned += 1
            assert field in hit, f"{reader}: provenance.{field} does not exist"
            if value:
                assert json.loads(value) in (hit[field], fresh[field]), (
                    f"{reader}: provenance.{field}: {value}"
                )
    assert mentioned >= 3


def test_file_names_are_the_task_format_and_the_outputs(live, texts):
    outputs = {"rankings.json", "report.md"}
    skill_files = set(SKILL_FILES)
    for reader, text in texts.items():
        allowed = live["task_files"] | outputs | (skill_files if reader.startswith("skill") else set())
        named = set(FILE_NAME.findall(text))
        assert named <= allowed, f"{reader} names files that do not exist for it: {sorted(named - allowed)}"
    for reader in ("skill SKILL.md", "AGENTS.md"):
        assert "`contract.json`" in texts[reader]
    # Codex reads AGENTS.md only: the section is self-contained
    assert not set(FILE_NAME.findall(texts["AGENTS.md"])) & skill_files
    assert "# Long jobs" in texts["AGENTS.md"] and "# The submission" in texts["AGENTS.md"]


def test_ranking_check_fields_in_the_texts_are_its_result(live, texts):
    checked = live["checked"]
    text = texts["skill submission.md"]
    fields = re.search(r"answers (`valid`.*?)\.", text, flags=re.S).group(1)
    named = set(re.findall(r"`([a-z_]+)`", fields))
    assert named and named <= set(checked), sorted(named - set(checked))
    assert checked["valid"] is True


def test_mcp_clients_are_told_to_stop_without_the_tools(texts):
    """Each client is told the command that diagnoses it; AGENTS.md named `codex mcp list`, which starts no
    server and shows `enabled` even with spu off PATH."""
    flat = {reader: " ".join(text.split()) for reader, text in texts.items()}
    for reader in ("skill SKILL.md", "AGENTS.md"):
        assert "If no spu tool exists, stop at once" in flat[reader], reader
    assert "run `spu config claude --check` to see why" in flat["skill SKILL.md"]
    assert "run `spu config codex --check` to see why" in flat["AGENTS.md"]
    assert "codex mcp list" not in flat["AGENTS.md"]
    assert "no spu tool exists" not in flat["system prompt"]  # the reference agent has its own check


def test_error_shape_is_what_each_client_shows(live, texts):
    """Claude Code (and the reference agent) show the model an error result's text, Codex its
    structuredContent (tests/integration/test_npm_clients.py checks both clients): each reader is told
    its own form, and that form is the live server's."""
    flat = {reader: " ".join(text.split()) for reader, text in texts.items()}
    error = live["error"]["error"]
    shown = re.search(
        r"error result whose text reads `(\[code\] message Hint: hint)`", flat["skill long-jobs.md"]
    )
    assert shown, flat["skill long-jobs.md"]
    pattern = re.escape(shown.group(1)).replace("code", "(?P<code>[a-z_]+)")
    pattern = pattern.replace("message", "(?P<message>.+)").replace("hint", "(?P<hint>.+)")
    match = re.fullmatch(pattern, live["error_text"], flags=re.S)
    assert match, live["error_text"]
    assert match["code"] == error["code"] == "invalid_input" and match["hint"] == error["hint"]
    assert "`[invalid_input]` with the problems in the message" in flat["skill long-jobs.md"]
    assert "molecules" in match["message"]  # the problem is named in the text the client shows
    assert '{"error": {code, message, hint}}' in flat["AGENTS.md"]
    assert '{"error"' not in flat["skill long-jobs.md"] and "[code] message" not in flat["AGENTS.md"]


def _stated(pattern: str, text: str) -> float:
    found = re.search(pattern, " ".join(text.split()))
    assert found, pattern
    return float(found.group(1))


def _true_orders(task: Task, answers) -> dict[str, list[str]]:
    return {
        g.group_id: sorted(g.experiment_ids, key=lambda e: answers.group(g.group_id).values[e])
        for g in task.groups
    }


def test_scoring_statements_are_what_the_grader_gives(texts):
    """Every score the submission notes state, checked by grading examples with the real grader. The notes
    said a missing or malformed group "scores as a random order"; the grader gives it -1, weight kept."""
    import itertools

    import numpy as np
    from scipy.stats import rankdata, spearmanr

    from environment.demo_tasks import demo_answers_path
    from environment.grading import grade
    from spu_common.submission import submission_from_orders
    from spu_common.task import load_answers

    for reader in ("skill submission.md", "AGENTS.md"):
        assert "scores as a random order" not in texts[reader]
    text = texts["skill submission.md"]
    group_rho = _stated(r"scores rho = (-?[\d.]+) and keeps its weight", text)
    file_score = _stated(r"is rejected whole: the task scores (-?[\d.]+)\.", text)
    official = _stated(r"but the official score is (-?[\d.]+)\.", text)
    mib = _stated(r"larger than ([\d.]+) MiB", text)
    assert _stated(r"UTF-8 JSON of at most ([\d.]+) MiB", text) == mib
    task = load_task(demo_task_dir("aromatic-acidity"))
    answers = load_answers(demo_answers_path("aromatic-acidity"))
    orders = _true_orders(task, answers)
    best = grade(submission_from_orders(task, orders), task, answers)
    first, second = task.groups[0], task.groups[1]

    # a group left out: rho as stated, its weight kept, the others scored as before
    partial = submission_from_orders(task, orders)
    partial["rankings"] = [r for r in partial["rankings"] if r["group_id"] != first.group_id]
    result = grade(partial, task, answers)
    missing = result.groups[0]
    assert missing.rho == group_rho == -1 and missing.weight == first.weight and missing.error
    others = sum(g.weight * g.rho for g in best.groups[1:])
    assert result.score == pytest.approx(others + first.weight * group_rho)
    # an order that leaves out, repeats or adds an id, and a group listed twice: the same
    ids = orders[second.group_id]
    for bad in (ids[1:], [ids[0], *ids[1:-1], ids[0]], [*ids, "not-an-id"]):
        result = grade(submission_from_orders(task, {**orders, second.group_id: bad}), task, answers)
        assert result.groups[1].rho == group_rho and result.groups[1].weight == second.weight
    twice = submission_from_orders(task, orders)
    twice["rankings"].append(dict(twice["rankings"][1]))
    assert grade(twice, task, answers).groups[1].rho == group_rho
    # "no order scores less, not even the exact reverse"; "a random order scores 0 on average": every
    # permutation of a group, Spearman from scipy (average ranks), independently of the grader
    values = answers.group(second.group_id).values
    assert len(ids) <= 9  # every permutation below
    measured = rankdata([values[e] for e in ids]) - (len(ids) + 1) / 2  # average ranks, centred
    perms = np.array(list(itertools.permutations(range(len(ids)))), dtype=float) - (len(ids) - 1) / 2
    rhos = perms @ measured / np.sqrt((perms[0] @ perms[0]) * (measured @ measured))
    assert rhos.min() >= group_rho and rhos.mean() == pytest.approx(0.0, abs=1e-12)
    reverse = grade(submission_from_orders(task, {**orders, second.group_id: ids[::-1]}), task, answers)
    assert reverse.groups[1].rho == pytest.approx(rhos.min()) and reverse.groups[1].rho >= group_rho
    # tied measurements take their average rank: the grader's rho is scipy's
    tied = answers.model_copy(deep=True)
    group = tied.group(second.group_id)
    group.values[ids[1]] = group.values[ids[0]]
    scored = grade(submission_from_orders(task, orders), task, tied).groups[1].rho
    assert scored == pytest.approx(spearmanr(range(len(ids)), [group.values[e] for e in ids]).statistic)
    # all values tied: 0 for any valid order
    for e in ids:
        group.values[e] = 1.0
    for order in (ids, ids[::-1]):
        assert (
            grade(submission_from_orders(task, {**orders, second.group_id: order}), task, tied).groups[1].rho
            == 0.0
        )

    # a file that is not JSON, one over the size limit, one departure from the schema: rejected whole
    good = json.dumps(submission_from_orders(task, orders))
    assert grade(good[:-1].encode(), task, answers).score == file_score == official == -1
    padded = good[:-1] + ', "notes": "' + "x" * int(mib * 2**20) + '"}'
    assert grade(padded.encode(), task, answers).score == file_score
    renamed = json.loads(good)
    renamed["rankings"][0]["ranking"] = renamed["rankings"][0].pop("order")
    result = grade(renamed, task, answers)
    assert result.score == official and result.rejected
    assert result.recovered_score == pytest.approx(best.score)  # "reports a recovered score beside it"
