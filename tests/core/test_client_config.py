"""`spu config claude|codex`: what they print and write, derived from the registry; and the working method
rendered from prompts/ into the agent's system prompt, the Claude Code skill and the AGENTS.md section."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from prompts.method import SKILL_NAME, render_method
from scaffold.agent.templates import Templates
from tools_server.core import clients
from tools_server.core.registry import load_registry
from tools_server.core.server_tools import SERVER_TOOLS
from tools_server.core.waits import WAIT_S_MAX

REPO = Path(__file__).resolve().parents[2]


def spu(*args: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "spu", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=120
    )


@pytest.fixture
def env_with_spu_on_path(spu_env, monkeypatch):
    path = f"{Path(sys.executable).parent}{os.pathsep}{spu_env.get('PATH', '')}"
    monkeypatch.setenv("PATH", path)  # in-process renderings see the same PATH as the subprocesses
    return {**spu_env, "PATH": path}


def test_codex_block_approves_every_tool_of_the_registry(spu_env):
    block = tomllib.loads(clients.codex_toml())["mcp_servers"]["spu"]
    expected = {t.name for t in SERVER_TOOLS} | set(load_registry().tools)
    assert set(block["tools"]) == expected and "job_cancel" in expected
    assert all(v == {"approval_mode": "approve"} for v in block["tools"].values())
    # above the longest legitimate call: job_wait with the largest wait_s
    assert block["tool_timeout_sec"] > WAIT_S_MAX
    assert block["required"] is True and block["startup_timeout_sec"] >= 30


def test_codex_write_is_idempotent_and_keeps_the_rest(tmp_path, env_with_spu_on_path):
    home = tmp_path / "codex"
    home.mkdir()
    (home / "config.toml").write_text('model = "m"\n\n[mcp_servers.other]\ncommand = "x"\n')
    env = {**env_with_spu_on_path, "CODEX_HOME": str(home)}
    for _ in range(2):
        res = spu("config", "codex", "--write", cwd=tmp_path, env=env)
        assert res.returncode == 0, res.stderr
    data = tomllib.loads((home / "config.toml").read_text())
    assert data["model"] == "m" and data["mcp_servers"]["other"] == {"command": "x"}
    assert data["mcp_servers"]["spu"]["command"] == "spu"
    assert (home / "config.toml").read_text().count("[mcp_servers.spu]") == 1
    printed = spu("config", "codex", cwd=tmp_path, env=env).stdout
    assert printed == clients.codex_toml()


def test_claude_write_makes_a_portable_project_setup(tmp_path, env_with_spu_on_path):
    res = spu("config", "claude", "--write", cwd=tmp_path, env=env_with_spu_on_path)
    assert res.returncode == 0, res.stderr
    mcp = json.loads((tmp_path / ".mcp.json").read_text())
    entry = mcp["mcpServers"]["spu"]
    # found on PATH: no machine path in a file the project shares
    assert entry["command"] == "spu" and entry["args"] == ["serve"]
    assert str(tmp_path) not in json.dumps(entry["command"])
    settings = json.loads((tmp_path / ".claude" / "settings.json").read_text())
    assert settings["permissions"]["allow"] == ["mcp__spu__*"]
    assert settings["env"] == {
        "ENABLE_TOOL_SEARCH": "false",
        "MCP_CONNECTION_NONBLOCKING": "false",
        "MCP_CONNECT_TIMEOUT_MS": "60000",
    }
    assert settings["enabledMcpjsonServers"] == ["spu"]
    # a second run changes nothing; other settings survive
    settings["permissions"]["allow"].insert(0, "Bash(ls:*)")
    (tmp_path / ".claude" / "settings.json").write_text(json.dumps(settings))
    spu("config", "claude", "--write", cwd=tmp_path, env=env_with_spu_on_path)
    again = json.loads((tmp_path / ".claude" / "settings.json").read_text())
    assert again["permissions"]["allow"] == ["Bash(ls:*)", "mcp__spu__*"]
    # what the command prints is what it writes, plus the documented headless command
    printed = spu("config", "claude", cwd=tmp_path, env=env_with_spu_on_path).stdout
    assert json.dumps(clients.claude_settings(), indent=2) in printed
    assert json.dumps(mcp, indent=2) in printed
    assert 'claude -p "' in printed and "--output-format json" in printed


def test_claude_without_spu_on_path_says_the_entry_is_not_portable(tmp_path, spu_env):
    env = {**spu_env, "PATH": "/usr/bin:/bin"}
    res = spu("config", "claude", cwd=tmp_path, env=env)
    assert res.returncode == 0 and "spu is not on PATH" in res.stderr


def test_method_is_one_source_for_agent_skill_and_agents_md(tmp_path, env_with_spu_on_path):
    assert spu("config", "claude", "--skill", cwd=tmp_path, env=env_with_spu_on_path).returncode == 0
    res = spu("config", "codex", "--agents-md", cwd=tmp_path, env=env_with_spu_on_path)
    assert res.returncode == 0, res.stderr
    skill_dir = tmp_path / ".claude" / "skills" / SKILL_NAME
    skill = (skill_dir / "SKILL.md").read_text()
    agents = (tmp_path / "AGENTS.md").read_text()
    system = Templates().render("system.md.jinja")
    # each reader gets the same method template, rendered for its client
    assert render_method("agent").strip() in system
    assert render_method("claude").strip() in skill
    assert render_method("codex").strip() in agents
    # the information policy's core and the working method's first four steps are word for word the same
    for client in ("claude", "codex"):
        text = render_method(client)
        for marker in ("# Information policy (binding)\n- Every task", "2. Before computing anything"):
            start = text.index(marker)
            assert text[start : start + 300] in system
    front = skill.split("---")[1]
    assert f"name: {SKILL_NAME}" in front and "description: " in front
    assert {p.name for p in skill_dir.iterdir()} == {"SKILL.md", "long-jobs.md", "tools.md", "submission.md"}
    tools_md = (skill_dir / "tools.md").read_text()
    assert "`job_cancel`" in tools_md and "`ranking_check`" in tools_md and "## chem" in tools_md
    assert "between 0 and 600" in (skill_dir / "long-jobs.md").read_text()


def test_agents_md_section_is_replaced_not_duplicated(tmp_path, env_with_spu_on_path):
    (tmp_path / "AGENTS.md").write_text("# My project\n\nOwn notes.\n")
    for _ in range(2):
        assert spu("config", "codex", "--agents-md", cwd=tmp_path, env=env_with_spu_on_path).returncode == 0
    text = (tmp_path / "AGENTS.md").read_text()
    assert text.startswith("# My project\n\nOwn notes.\n")
    assert text.count(clients.AGENTS_MD_START) == 1 and text.count(clients.AGENTS_MD_END) == 1
    assert (
        clients.upsert_marked_section(text, "new", clients.AGENTS_MD_START, clients.AGENTS_MD_END).count(
            "Own notes."
        )
        == 1
    )


def test_skill_install_is_idempotent(tmp_path, env_with_spu_on_path):
    for _ in range(2):
        spu("config", "claude", "--skill", cwd=tmp_path, env=env_with_spu_on_path)
    assert len(list((tmp_path / ".claude" / "skills").iterdir())) == 1


def test_docs_show_what_the_commands_print(env_with_spu_on_path, monkeypatch):
    for name in clients.SERVER_ENV_VARS:
        monkeypatch.delenv(name, raising=False)
    claude_doc = (REPO / "docs" / "claude-code.md").read_text()
    codex_doc = (REPO / "docs" / "codex.md").read_text()
    readme = (REPO / "README.md").read_text()
    line = clients.claude_headless_command()
    assert line in claude_doc and line in readme
    for key, value in clients.claude_settings()["env"].items():
        assert f'"{key}": "{value}"' in claude_doc and f"{key}={value} " in line
    assert f'"permissions": {{"allow": ["{clients.CLAUDE_TOOL_RULE}"]}}' in claude_doc
    block = clients.codex_toml(tools=["system_info"])
    documented = codex_doc.split("```toml\n", 1)[1].split("```", 1)[0]
    for row in block.splitlines():
        if not row.startswith("#"):
            assert row in documented, row
