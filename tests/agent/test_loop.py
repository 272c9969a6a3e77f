"""The agent loop end to end against a scripted OpenAI-compatible server on loopback (built-in tools only)."""

from __future__ import annotations

import json

import pytest

from scaffold.agent.models import PROVIDERS, adapter_class
from scaffold.agent.models.base import HttpModel
from scaffold.agent.runner import exit_code, run_agent
from scaffold.agent.trajectory import read_records
from spu_common.submission import fallback_submission, validate_submission
from spu_common.task import load_task

G1 = ["e0ea", "d679", "a167", "f502", "e1ce", "dee6", "bf53", "d942"]
G2 = ["afcc", "f066", "cc20", "e3c3", "e902", "f8a7", "d02e", "f8d2"]
RANKINGS = [{"group_id": "g1", "order": G1}, {"group_id": "g2", "order": G2}]


def submit(final: bool = False, rankings=None, report: str | None = None) -> dict:
    args = {"rankings": rankings or RANKINGS, "final": final}
    if report:
        args["report"] = report
    return {"tool_calls": [{"name": "submit_rankings", "arguments": args}]}


def run(server, demo_task, out, config, provider="openai"):
    return run_agent(load_task(demo_task), out, f"{provider}:scripted-1", config, base_url=server.url)


def assert_complete_files(out, task, expected_submission):
    """The guarantee of every run: a valid rankings.json and the other files, whatever ended it."""
    report = validate_submission(out / "rankings.json", task, recover=False)
    assert report.valid, report.messages()
    assert json.loads((out / "rankings.json").read_text()) == expected_submission
    assert (out / "report.md").read_text().count("## Run record") == 1
    assert json.loads((out / "sources.json").read_text())["schema"] == "spu.sources/1"
    atif = json.loads((out / "trajectory.json").read_text())
    assert atif["schema_version"].startswith("ATIF-v1.")
    records = read_records(out / "trajectory.jsonl")
    assert records[0]["type"] == "run_start" and records[-1]["type"] == "run_end"
    return json.loads((out / "run.json").read_text()), records


@pytest.mark.parametrize("provider", [p for p in PROVIDERS if issubclass(adapter_class(p), HttpModel)])
def test_a_run_computes_submits_and_leaves_its_files(
    provider, model_server, demo_task, agent_config, tmp_path
):
    script = [
        {
            "text": "Estimate first.",
            "tool_calls": [{"name": "python", "arguments": {"code": "print(6 * 7)"}}],
        },
        submit(rankings=[{"group_id": "g1", "order": G1}]),  # g2 missing: refused, nothing written
        submit(report="# My report\nHammett estimate."),
        {"text": "I am done."},
    ]
    server = model_server(script)
    out = tmp_path / "run"
    outcome = run(server, demo_task, out, agent_config(), provider)
    task = load_task(demo_task)
    expected = {"task_id": task.task_id, "task_version": "1", "rankings": RANKINGS}
    result, records = assert_complete_files(out, task, expected)
    assert outcome.exit_status == "submitted" and exit_code(outcome) == 0
    assert result["submission"] == "drafts/draft-001.json" and result["drafts"] == 1 and result["steps"] == 4
    assert json.loads((out / "drafts" / "draft-001.json").read_text()) == expected
    assert (out / "report.md").read_text().startswith("# My report\nHammett estimate.")
    tool_results = [r for r in records if r["type"] == "tool_result"]
    assert tool_results[0]["content"].splitlines()[1:3] == ["exit code 0", "42"]
    assert tool_results[1]["is_error"] and "group g2: the group is absent" in tool_results[1]["content"]
    assert (out / "scripts" / "script-001.py").read_text() == "print(6 * 7)"
    turns = [r for r in records if r["type"] == "model_turn"]
    assert all(t["usage"]["input_tokens"] + t["usage"]["cache_read_tokens"] > 0 for t in turns)
    # the second request carries the first tool result back to the model
    assert "42" in server.requests[1]["raw"].decode()


def test_a_model_that_only_emits_garbage_still_leaves_a_valid_file(
    model_server, demo_task, agent_config, tmp_path
):
    garbage = [
        {
            "tool_calls": [
                {"name": "submit_rankings", "arguments": '{"rankings": [{"group_id": "g1", "order": ['}
            ]
        },
        {"tool_calls": [{"name": "rank_everything", "arguments": {}}]},
        {"text": "As an AI I cannot rank experiments."},
        {"tool_calls": [{"name": "bash", "arguments": "[1, 2]"}]},
    ]
    server = model_server(garbage, default={"text": "???"})
    out = tmp_path / "run"
    outcome = run(server, demo_task, out, agent_config("limits.max_nudges=2"))
    task = load_task(demo_task)
    result, records = assert_complete_files(out, task, fallback_submission(task))
    assert outcome.exit_status == "model_gave_up" and exit_code(outcome) == 1
    assert result["submission"] == "fallback" and result["drafts"] == 0
    errors = [r["content"] for r in records if r["type"] == "tool_result"]
    assert "not valid JSON" in errors[0]
    assert "There is no tool named 'rank_everything'" in errors[1]
    assert "must be a JSON object" in errors[2]
    assert "no valid ranking" in result["reason"]


def test_format_errors_in_a_row_end_the_run(model_server, demo_task, agent_config, tmp_path):
    bad = {"tool_calls": [{"name": "bash", "arguments": "{not json"}]}
    server = model_server([bad] * 10)
    outcome = run(server, demo_task, tmp_path / "run", agent_config("limits.max_format_errors=3"))
    assert outcome.exit_status == "model_gave_up"
    assert outcome.result["steps"] == 3


def test_a_non_json_200_reply_is_retried_then_the_run_ends_with_files(
    model_server, demo_task, agent_config, tmp_path
):
    server = model_server([{"status": 200, "body": "<html>proxy error</html>"}] * 5)
    out = tmp_path / "run"
    outcome = run(server, demo_task, out, agent_config("model.retry.max_attempts=3"))
    task = load_task(demo_task)
    assert_complete_files(out, task, fallback_submission(task))
    assert outcome.exit_status == "model_error" and len(server.requests) == 3


def test_auth_failure_is_not_retried_and_keeps_the_fallback(model_server, demo_task, agent_config, tmp_path):
    server = model_server([{"status": 401, "body": {"error": {"message": "Incorrect API key provided"}}}])
    outcome = run(server, demo_task, tmp_path / "run", agent_config())
    assert outcome.exit_status == "model_error" and "authentication failed" in outcome.reason
    assert len(server.requests) == 1


def big_output(i: int) -> dict:
    return {"tool_calls": [{"name": "python", "arguments": {"code": f"print('{i}' * 6000)"}}]}


def test_context_overflow_elides_old_tool_outputs_and_the_run_goes_on(
    model_server, demo_task, agent_config, tmp_path
):
    # The server refuses requests over 30,000 bytes, as a provider refuses a prompt over its window; the
    # agent's own estimate (window 1M tokens) never triggers, so only the refusal can make it elide.
    script = [big_output(i) for i in range(5)] + [submit(final=True)]
    server = model_server(script, context_limit_chars=30_000)
    out = tmp_path / "run"
    outcome = run(
        server,
        demo_task,
        out,
        agent_config("model.context_window_tokens=1000000", "context.keep_recent_turns=1"),
    )
    assert outcome.exit_status == "submitted"
    records = read_records(out / "trajectory.jsonl")
    overflows = [r for r in records if r["type"] == "event" and r["event"] == "context_overflow"]
    assert overflows and all(r["outputs_elided"] >= 1 for r in overflows)
    assert any(r["overflow"] for r in server.requests)
    last = server.requests[-1]["json"]["messages"]
    assert len(server.requests[-1]["raw"]) <= 30_000
    assert last[0]["role"] == "system" and last[1]["content"].startswith("# Task demo-aromatic-acidity")
    contents = [m["content"] for m in last if m["role"] == "tool"]
    assert contents[0].startswith("[elided to fit the context window")
    assert "4" * 6000 in contents[-1]  # the newest output is kept


def test_the_context_is_trimmed_before_a_request_would_overflow(
    model_server, demo_task, agent_config, tmp_path
):
    script = [big_output(i) for i in range(5)] + [submit(final=True)]
    server = model_server(script, context_limit_chars=30_000)
    out = tmp_path / "run"
    outcome = run(
        server,
        demo_task,
        out,
        agent_config("model.context_window_tokens=8000", "context.keep_recent_turns=1"),
    )
    assert outcome.exit_status == "submitted"
    assert not any(r["overflow"] for r in server.requests)  # trimmed in time, never refused
    records = read_records(out / "trajectory.jsonl")
    assert any(r["type"] == "event" and r["event"] == "context_elided" for r in records)


def test_step_limit_and_the_draft_reminder(model_server, demo_task, agent_config, tmp_path):
    script = [{"tool_calls": [{"name": "bash", "arguments": {"command": "true"}}]}] * 10
    server = model_server(script)
    out = tmp_path / "run"
    outcome = run(
        server,
        demo_task,
        out,
        agent_config(
            "limits.step_limit=4",
            "limits.draft_reminder_fraction=0.5",
            "limits.wrapup_reminder_fraction=0.75",
        ),
    )
    assert outcome.exit_status == "limit_reached" and "steps limit" in outcome.reason
    assert len(server.requests) == 4 and exit_code(outcome) == 0
    texts = [[m["content"] for m in r["json"]["messages"] if m["role"] == "user"] for r in server.requests]
    assert not any("Submit a complete draft now" in t for t in texts[1])
    assert sum("Submit a complete draft now" in t for t in texts[2]) == 1  # after 2 of 4 steps
    assert sum("Stop starting new" in t for t in texts[3]) == 1  # after 3 of 4 steps


def test_cost_limit_uses_the_price_table(model_server, demo_task, agent_config, tmp_path):
    script = [{"tool_calls": [{"name": "bash", "arguments": {"command": "true"}}]}] * 10
    server = model_server(script)
    config = agent_config(
        "prices.scripted-1={input: 1000, output: 1000, cache_read: 100}", "limits.cost_limit_usd=5"
    )
    outcome = run(server, demo_task, tmp_path / "run", config)
    assert outcome.exit_status == "limit_reached" and "cost limit" in outcome.reason
    first = outcome.result["cost_usd"]
    assert first >= 5.0
    # cost of the first call, priced by hand from the usage the server reported
    records = read_records(tmp_path / "run" / "trajectory.jsonl")
    usage = next(r for r in records if r["type"] == "model_turn")["usage"]
    expected = (
        usage["input_tokens"] * 1000 + usage["output_tokens"] * 1000 + usage["cache_read_tokens"] * 100
    ) / 1e6
    assert next(r for r in records if r["type"] == "model_turn")["cost_usd"] == pytest.approx(expected)


def test_an_agent_crash_still_leaves_valid_files(
    model_server, demo_task, agent_config, tmp_path, monkeypatch
):
    from scaffold.agent.models.openai_chat import OpenAIChatModel

    def broken(self, data):
        raise RuntimeError("bug in the adapter")

    monkeypatch.setattr(OpenAIChatModel, "parse_response", broken)
    server = model_server([{"text": "hi"}])
    out = tmp_path / "run"
    outcome = run(server, demo_task, out, agent_config())
    task = load_task(demo_task)
    assert_complete_files(out, task, fallback_submission(task))
    assert (
        outcome.exit_status == "crashed"
        and "bug in the adapter" in outcome.reason
        and exit_code(outcome) == 1
    )


def test_the_atif_export_validates_with_harbor(
    model_server, demo_task, agent_config, tmp_path, harbor_python
):
    import subprocess

    server = model_server(
        [
            {
                "reasoning": "acids",
                "text": "go",
                "tool_calls": [
                    {"name": "bash", "arguments": {"command": "echo hi"}},
                    {"name": "bash", "arguments": "{bad"},
                ],
            },
            submit(final=True, report="r"),
        ]
    )
    out = tmp_path / "run"
    run(server, demo_task, out, agent_config(), "anthropic")
    check = (
        "import json,sys\n"
        "from harbor.models.trajectories.trajectory import Trajectory\n"
        "t = Trajectory.model_validate(json.load(open(sys.argv[1])))\n"
        "print(len(t.steps), sum(len(s.tool_calls or []) for s in t.steps), "
        "t.final_metrics.total_prompt_tokens)\n"
    )
    done = subprocess.run(
        [str(harbor_python), "-c", check, str(out / "trajectory.json")],
        capture_output=True,
        check=False,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    n_steps, n_calls, prompt_tokens = map(int, done.stdout.split())
    assert n_steps == 4 and n_calls == 3  # system, task, two agent turns; 2 + 1 tool calls
    assert prompt_tokens == sum(len(r["raw"]) // 4 for r in server.requests)


def test_a_tool_call_cut_at_the_output_limit_is_explained(model_server, demo_task, agent_config, tmp_path):
    cut = {
        "status": 200,
        "body": {
            "choices": [
                {
                    "index": 0,
                    "finish_reason": "length",
                    "message": {
                        "role": "assistant",
                        "content": None,
                        "tool_calls": [
                            {
                                "id": "call_x",
                                "type": "function",
                                "function": {
                                    "name": "python",
                                    "arguments": '{"code": "print(1)\\nfor i in range(',
                                },
                            }
                        ],
                    },
                }
            ],
            "usage": {},
        },
    }
    server = model_server([cut, submit(final=True)])
    out = tmp_path / "run"
    assert run(server, demo_task, out, agent_config()).exit_status == "submitted"
    first = next(r for r in read_records(out / "trajectory.jsonl") if r["type"] == "tool_result")
    assert first["is_error"] and "cut off at the output-token limit" in first["content"]
