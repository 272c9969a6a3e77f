"""The real npm MCP clients against `spu serve` (marker `npm`; install them with
`bash scripts/install-npm-clients.sh`). Each scenario runs in a network namespace with only loopback
(`unshare -n`, needs root or user namespaces), so neither the clients nor the server can reach anything
else; the scripted model server lives on that loopback too. Commands: docs/claude-code.md."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from prompts.method import SKILL_DESCRIPTION, SKILL_NAME, render_method

REPO = Path(__file__).resolve().parents[2]
BIN = Path(os.environ.get("SPU_NPM_PREFIX") or REPO / ".npm-clients") / "node_modules" / ".bin"
DRIVER = Path(__file__).resolve().parent / "npm_driver.py"


def _isolated_loopback_available() -> bool:
    if shutil.which("unshare") is None or shutil.which("ip") is None:
        return False
    probe = subprocess.run(
        ["unshare", "-n", "ip", "link", "set", "lo", "up"], capture_output=True, timeout=30, check=False
    )
    return probe.returncode == 0


pytestmark = [
    pytest.mark.npm,
    pytest.mark.skipif(
        not (BIN / "claude").exists() or not (BIN / "mcp-inspector").exists(),
        reason="npm clients not installed: bash scripts/install-npm-clients.sh",
    ),
    pytest.mark.skipif(
        not _isolated_loopback_available(),
        reason="`unshare -n` is not permitted here: the clients cannot be cut off from the network",
    ),
]


def _scenario(name: str, tmp_path: Path, env: dict[str, str]) -> dict:
    # inside the namespace: bring loopback up, then run the driver with this interpreter
    script = f"ip link set lo up && exec {sys.executable} {DRIVER} {name} {tmp_path}"
    proc = subprocess.run(
        ["unshare", "-n", "bash", "-c", script],
        capture_output=True,
        text=True,
        env=env,
        cwd=REPO,
        timeout=400,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_claude_mcp_list_shows_the_absolute_spu_command(tmp_path, spu_env):
    result = _scenario("mcp-list", tmp_path, spu_env)
    assert result["returncode"] == 0, result["stderr"]
    line = next(ln for ln in result["stdout"].splitlines() if ln.startswith("spu:"))
    # the command .mcp.json names resolves without PATH (spu config claude --write writes spu's absolute
    # path); `claude mcp list` waits for an interactive approval of the project's servers (claude -p does
    # not: see the headless test), so both states are expected here
    command = line.removeprefix("spu: ").split(" - ")[0]
    assert Path(command.split()[0]).is_absolute() and command.endswith(" serve"), result["stdout"]
    assert "Connected" in line or "Pending approval" in line, result["stdout"]
    # docs/claude-code.md shows this line, with a placeholder for the absolute path
    doc = " ".join((REPO / "docs" / "claude-code.md").read_text().split())
    shown = re.search(r"`claude mcp list` shows `(spu: \S+ serve - [^`]+)`", doc).group(1)
    placeholder = shown.split()[1]
    shown_line = line.replace(command.split()[0], placeholder)
    assert shown_line.startswith((shown, shown.replace("⏸ Pending approval", "✔ Connected"))), shown_line


def test_inspector_cli_lists_and_calls_tools(tmp_path, spu_env):
    result = _scenario("inspector", tmp_path, spu_env)
    assert result["list"]["returncode"] == 0, result["list"]["stderr"]
    tools = {t["name"]: t for t in json.loads(result["list"]["stdout"])["tools"]}
    assert {"system_info", "chem_descriptors", "job_wait"} <= set(tools)
    assert tools["chem_descriptors"]["annotations"]["readOnlyHint"] is True
    assert result["call"]["returncode"] == 0, result["call"]["stderr"]
    called = json.loads(result["call"]["stdout"])
    item = called["structuredContent"]["items"][0]
    # ethanol: C2H6O, average molar mass 46.069 g/mol (IUPAC atomic weights)
    assert item["ok"] is True and item["descriptors"]["mol_weight_g_mol"] == pytest.approx(46.069, abs=1e-3)


@pytest.mark.parametrize("attempt", range(10))
def test_headless_claude_code_calls_spu_tool_and_loads_the_skill(attempt, tmp_path, spu_env):
    """The documented setup only: `spu config claude --write` and `--skill`, then the printed `claude -p`
    (ten runs, each must pass)."""
    result = _scenario("claude-headless", tmp_path, spu_env)
    assert result["returncode"] == 0, result["stderr"]
    # offered directly (not behind ToolSearch): ENABLE_TOOL_SEARCH=false comes from the settings file
    assert "mcp__spu__system_info" in result["tools_offered"] and len(result["tools_offered"]) >= 20
    # Claude Code ran our tool on the scripted tool_use and sent its result back to the model server
    by_id = {b["tool_use_id"]: b for b in result["tool_results"]}
    block = by_id["toolu_spu_1"]
    text = block["content"] if isinstance(block["content"], str) else json.dumps(block["content"])
    assert "cpu_cores" in text and not block.get("is_error")
    # the skill is offered (its name and description in the first request) ...
    description = SKILL_DESCRIPTION[:60]
    first = result["request_texts"][0]
    assert SKILL_NAME in first and description in first and "Information policy (binding)" not in first
    # ... and once the model invokes it, the method's text reaches the model
    assert "toolu_skill_1" in by_id and not by_id["toolu_skill_1"].get("is_error")
    method = render_method("claude")
    last = json.loads(json.dumps(result["request_texts"][-1]))
    for line in ("# Information policy (binding)", "2. Before computing anything, identify what physically"):
        assert line in method and json.dumps(line)[1:-1] in last
    final = json.loads(result["stdout"])
    assert final["result"] == "The spu server reports its hardware." and final["is_error"] is False


@pytest.mark.skipif(
    not (BIN / "codex").exists(), reason="codex not installed: bash scripts/install-npm-clients.sh"
)
def test_codex_reads_the_spu_config_block(tmp_path, spu_env):
    result = _scenario("codex-mcp-list", tmp_path, spu_env)
    assert result["returncode"] == 0, result["stderr"]
    row = next(ln for ln in result["stdout"].splitlines() if ln.startswith("spu "))
    assert "serve" in row and "enabled" in row, result["stdout"]


@pytest.mark.skipif(
    not (BIN / "codex").exists(), reason="codex not installed: bash scripts/install-npm-clients.sh"
)
def test_codex_exec_calls_every_kind_of_spu_tool_in_ten_runs(tmp_path, spu_env):
    """`codex exec` with `spu config codex --write` and `--agents-md` only (plus the scripted provider):
    system_info, a job (chem_parse with wait_s=0), job_wait and job_cancel, ten runs without a miss. The
    runs go five at a time (each in its own network namespace, folders and servers): a run spends most of
    its 8 s waiting, and the servers must have their tools on the first turn on a busy machine too."""
    from concurrent.futures import ThreadPoolExecutor

    expected = ["system_info", "chem_parse", "job_wait", "job_cancel"]
    method = json.dumps(render_method("codex").splitlines()[0])[1:-1]
    with ThreadPoolExecutor(5) as pool:
        results = list(pool.map(lambda k: _scenario("codex-exec", tmp_path / f"run-{k}", spu_env), range(10)))
    for attempt, result in enumerate(results):
        where = f"run {attempt + 1}: {result['stderr'][-1500:]}"
        assert result["returncode"] == 0, where
        # the first request already has the spu tools (the server is required to start first) ...
        assert {f"mcp__spu/{name}" for name in expected} <= set(result["first_tools"]), where
        # ... and the AGENTS.md section with the working method
        assert (
            method in result["first_request_text"] and SKILL_DESCRIPTION not in result["first_request_text"]
        )
        calls = [
            json.loads(line)["item"]
            for line in result["stdout"].splitlines()
            if line.startswith("{") and '"mcp_tool_call"' in line and '"item.completed"' in line
        ]
        assert [c["tool"] for c in calls] == expected, where
        assert all(c["status"] == "completed" and c["error"] is None for c in calls), calls
        job = json.loads(result["outputs"]["mcp__spu/job_wait"].split("Output:\n", 1)[-1])
        assert job["items"][0]["canonical_smiles"] == "CCO" and job["provenance"]["cache"] == "miss"
        cancel = json.loads(result["outputs"]["mcp__spu/job_cancel"].split("Output:\n", 1)[-1])
        assert cancel["job_id"] == job["provenance"]["job_id"] and cancel["cancelled"] is False
        messages = [
            json.loads(line)["item"].get("text")
            for line in result["stdout"].splitlines()
            if '"agent_message"' in line and '"item.completed"' in line
        ]
        assert messages[-1:] == ["The spu tools answered."], where


def test_claude_code_says_nothing_of_a_broken_venv_but_check_names_it(tmp_path, spu_env):
    """Claude Code starts without the spu tools and exits 0 when the interpreter of the configured spu is
    gone (docs/claude-code.md); `spu config claude --check` names that interpreter."""
    result = _scenario("claude-broken-venv", tmp_path, spu_env)
    assert result["returncode"] == 0 and result["spu_tools_offered"] == []
    assert json.loads(result["stdout"])["is_error"] is False
    check = result["check"]
    assert check["returncode"] == 1
    assert f"runs the interpreter {result['interpreter']}, which does not exist" in check["stderr"]


def _error_text(server_error: dict) -> str:
    """The text content of the server's error result for ``server_error`` (what Claude Code shows)."""
    from tools_server.core.errors import ToolError

    return str(ToolError.from_dict(server_error))


INVALID_MOLECULES = {
    "code": "invalid_input",
    "message": "Invalid arguments: molecules: Input should be a valid list",
    "hint": "Check the arguments against the tool's input schema and try again.",
    "details": {"problems": ["molecules: Input should be a valid list"]},
}


@pytest.mark.parametrize("where", ["beside", "app"])
def test_claude_code_checks_a_task_outside_the_project_recorded_with_task_root(where, tmp_path, spu_env):
    """A task next to the project folder, and one in a folder standing for a container's /app: with
    `spu config claude --write --task-root TASK`, ranking_check reads it. The invalid call shows the model
    the error text the skill describes (`[code] message Hint: hint`)."""
    result = _scenario(f"claude-task-{where}", tmp_path, spu_env)
    assert result["returncode"] == 0, result["stderr"]
    checked, invalid = result["tool_results"]
    assert not checked.get("is_error"), checked
    # Claude Code may append a <system-reminder> of its own after the result
    assert json.JSONDecoder().raw_decode(checked["content"])[0]["valid"] is True
    assert invalid["is_error"] is True
    assert invalid["content"].startswith(_error_text(INVALID_MOLECULES)), invalid["content"]


def test_claude_code_without_task_root_is_told_how_to_allow_the_task(tmp_path, spu_env):
    result = _scenario("claude-task-beside-unregistered", tmp_path, spu_env)
    refused = result["tool_results"][0]
    assert refused["is_error"] is True and "is outside the directories tools may read" in refused["content"]
    assert "--task-root DIR" in refused["content"]


@pytest.mark.skipif(
    not (BIN / "codex").exists(), reason="codex not installed: bash scripts/install-npm-clients.sh"
)
@pytest.mark.parametrize("where", ["beside", "app"])
def test_codex_checks_a_task_outside_the_project_recorded_with_task_root(where, tmp_path, spu_env):
    """As for Claude Code: Codex passes a server only a few of its own variables, so the folder goes into
    the config's [mcp_servers.spu.env]. Codex shows the model the error's structuredContent, as AGENTS.md
    says; and it passes exactly the variables `spu config codex --check` assumes (CODEX_PASSED_ENV)."""
    from tools_server.commands.clients import CODEX_PASSED_ENV

    result = _scenario(f"codex-task-{where}", tmp_path, spu_env)
    assert result["returncode"] == 0, result["stderr"]
    checked, invalid = (json.loads(o.split("Output:\n", 1)[-1]) for o in result["outputs"])
    assert checked["valid"] is True, checked
    assert invalid == {"error": INVALID_MOLECULES}
    parent = set(result["parent_env_names"])
    assert "SPU_PROBE_NOT_PASSED" in parent
    assert set(result["env_names"]) == parent & set(CODEX_PASSED_ENV)


@pytest.mark.skipif(
    not (BIN / "codex").exists(), reason="codex not installed: bash scripts/install-npm-clients.sh"
)
def test_codex_without_task_root_is_told_how_to_allow_the_task(tmp_path, spu_env):
    result = _scenario("codex-task-beside-unregistered", tmp_path, spu_env)
    refused = json.loads(result["outputs"][0].split("Output:\n", 1)[-1])["error"]
    assert refused["code"] == "invalid_input" and "--task-root DIR" in refused["hint"]
