"""The records the agent writes to ``trajectory.jsonl`` are the ones ``docs/runs.md`` documents.

The agent runs against the scripted model server (the only stand-in: a paid API) through a 429 retry, a
malformed and a refused tool call and a model error; every record is checked against the documented
tables: a kind or event not documented, a documented field missing, or a field not documented fails.
The viewer's timeline of the same run shows the retry and both calls with their raw payload.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from environment.runs import read_records
from environment.view.collect import collect
from scaffold.agent.runner import run_agent
from spu_common.task import load_task

DOC = Path(__file__).resolve().parents[2] / "docs" / "runs.md"
COMMON = ("type", "time", "elapsed_s")
RANKINGS = [
    {"group_id": "g1", "order": ["e0ea", "d679", "a167", "f502", "e1ce", "dee6", "bf53", "d942"]},
    {"group_id": "g2", "order": ["afcc", "f066", "cc20", "e3c3", "e902", "f8a7", "d02e", "f8d2"]},
]


def documented_schema() -> tuple[dict[str, dict[str, bool]], dict[str, set[str]]]:
    """``({kind: {field: always}}, {event: {fields}})`` from the tables of docs/runs.md."""
    text = DOC.read_text(encoding="utf-8")
    section = text.split("## Trajectory records", 1)[1].split("\n## ", 1)[0]
    kinds: dict[str, dict[str, bool]] = {}
    events: dict[str, set[str]] = {}
    for block in re.split(r"\n### ", section)[1:]:
        kind = re.match(r"`([a-z_]+)`", block).group(1)
        kinds[kind] = {
            name: always == "yes"
            for name, always in re.findall(r"^\| `([^`]+)` \| [^|]+ \| (yes|no) \|", block, re.M)
        }
        for name, fields in re.findall(r"^\| `([a-z_]+)` \| ((?:`[a-z_]+`(?:, )?)+) \|$", block, re.M):
            events[name] = set(re.findall(r"`([a-z_]+)`", fields))
    return kinds, events


def values_at(record: dict[str, Any], dotted: str) -> list[tuple[Any, str]]:
    """``(parent, key)`` for every place the dotted field (``a.b``, ``a[].b``) may sit in ``record``."""
    parents: list[Any] = [record]
    *path, last = dotted.split(".")
    for part in path:
        key, many = part.removesuffix("[]"), part.endswith("[]")
        nxt: list[Any] = []
        for parent in parents:
            value = parent.get(key) if isinstance(parent, dict) else None
            if many and isinstance(value, list):
                nxt.extend(v for v in value if isinstance(v, dict))
            elif not many and isinstance(value, dict):
                nxt.append(value)
        parents = nxt
    return [(p, last) for p in parents]


def schema_errors(records: list[dict[str, Any]]) -> list[str]:
    kinds, events = documented_schema()
    errors = []
    for number, record in enumerate(records, start=1):
        kind = record.get("type")
        if kind not in kinds:
            errors.append(f"record {number}: kind {kind!r} is not documented")
            continue
        fields = kinds[kind]
        for name in COMMON:
            if name not in record:
                errors.append(f"record {number} ({kind}): no {name!r}")
        for name, always in fields.items():
            for parent, key in values_at(record, name):
                if always and key not in parent:
                    errors.append(f"record {number} ({kind}): documented field {name!r} missing")
        # every key present is documented: top level, and inside objects whose fields are documented
        prefixes = {""} | {n.rsplit(".", 1)[0] + "." for n in fields if "." in n}
        for prefix in prefixes:
            documented = {
                n[len(prefix) :] for n in fields if n.startswith(prefix) and "." not in n[len(prefix) :]
            }
            for parent, _ in values_at(record, prefix + "x") if prefix else [(record, "")]:
                extra = set(parent) - documented - (set(COMMON) if not prefix else set())
                if kind == "event" and not prefix:
                    extra -= events.get(record.get("event"), set())
                    if record.get("event") not in events:
                        errors.append(f"record {number}: event {record.get('event')!r} is not documented")
                errors += [f"record {number} ({kind}): field {prefix}{k!r} is not documented" for k in extra]
    return errors


@pytest.fixture
def recorded_runs(model_server, demo_task, agent_config, tmp_path) -> list[Path]:
    busy = {"status": 429, "body": {"error": {"message": "rate limited, slow down"}}}
    odd_calls = {
        "text": "Trying things.",
        "tool_calls": [
            {"name": "bash", "arguments": {"command": "echo 42"}},
            {"name": "bash", "arguments": '{"command": "ls"'},  # cut short: malformed
            {"name": "rank_everything", "arguments": {"all": True}},  # no such tool: refused
        ],
    }
    final = {"tool_calls": [{"name": "submit_rankings", "arguments": {"rankings": RANKINGS, "final": True}}]}
    server = model_server([busy, odd_calls, final])
    first = tmp_path / "retry-and-odd-calls"
    outcome = run_agent(load_task(demo_task), first, "openai:scripted-1", agent_config(), base_url=server.url)
    assert outcome.exit_status == "submitted"
    failing = model_server([{"status": 401, "body": {"error": {"message": "Incorrect API key provided"}}}])
    second = tmp_path / "model-error"
    outcome = run_agent(
        load_task(demo_task), second, "openai:scripted-1", agent_config(), base_url=failing.url
    )
    assert outcome.exit_status == "model_error"
    return [first, second]


def test_every_record_the_agent_writes_is_documented(recorded_runs):
    records = [r for run in recorded_runs for r in read_records(run / "trajectory.jsonl")]
    assert schema_errors(records) == []
    kinds = {r["type"] for r in records}
    assert kinds == {"run_start", "message", "model_turn", "tool_result", "event", "run_end"}
    retried = next(r for r in records if r["type"] == "model_turn" and r.get("retries"))
    assert retried["attempts"] == 2 and retried["retries"][0]["status"] == 429
    assert "slow down" in retried["retries"][0]["body"]
    malformed = [
        c for r in records if r["type"] == "model_turn" for c in r["message"]["tool_calls"] if c.get("error")
    ]
    assert [c["arguments_raw"] for c in malformed] == ['{"command": "ls"']
    assert {r["event"] for r in records if r["type"] == "event"} == {"model_error"}


def test_the_check_fails_on_a_missing_field_an_unknown_field_and_an_unknown_kind(recorded_runs):
    records = read_records(recorded_runs[0] / "trajectory.jsonl")
    turn = next(r for r in records if r["type"] == "model_turn")
    assert schema_errors(
        [{**turn, "usage": {k: v for k, v in turn["usage"].items() if k != "output_tokens"}}]
    ) == ["record 1 (model_turn): documented field 'usage.output_tokens' missing"]
    assert schema_errors([{**turn, "mood": "happy"}]) == [
        "record 1 (model_turn): field 'mood' is not documented"
    ]
    assert schema_errors([{**turn, "type": "thought"}]) == ["record 1: kind 'thought' is not documented"]
    event = {"type": "event", "time": "t", "elapsed_s": 0, "event": "sneezed"}
    assert schema_errors([event]) == ["record 1: event 'sneezed' is not documented"]


def test_the_viewer_shows_the_retry_and_the_odd_calls_with_their_raw_payload(recorded_runs):
    rows = collect(recorded_runs[0], grade=False)["runs"][0]["rows"]
    retry = next(r for r in rows if r["k"] == "retry")
    assert retry["e"] == "retry" and "HTTP 429" in retry["n"] and "slow down" in retry["r"]
    turn_index = next(i for i, r in enumerate(rows) if r["k"] == "turn")
    assert rows.index(retry) == turn_index - 1  # just before the reply it delayed
    calls = {r["e"]: r for r in rows if r["k"] == "call"}
    assert set(calls) == {"", "malformed", "refused"}
    assert '{"command": "ls"' in calls["malformed"]["r"] and "not valid JSON" in calls["malformed"]["r"]
    assert "rank_everything" in calls["refused"]["r"] and '"all": true' in calls["refused"]["r"]
    assert calls[""]["r"] == ""
