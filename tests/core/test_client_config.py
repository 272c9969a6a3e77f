"""`spu config claude|codex`: what they print and write, derived from the registry; and the working method
rendered from prompts/ into the agent's system prompt, the Claude Code skill and the AGENTS.md section."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from prompts.method import SKILL_NAME, render_method
from scaffold.agent.templates import Templates
from tools_server.commands import clients
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


def test_claude_write_names_spu_by_a_path_that_needs_no_path(tmp_path, env_with_spu_on_path):
    res = spu("config", "claude", "--write", cwd=tmp_path, env=env_with_spu_on_path)
    assert res.returncode == 0, res.stderr
    mcp = json.loads((tmp_path / ".mcp.json").read_text())
    entry = mcp["mcpServers"]["spu"]
    # Claude Code starts a server it cannot find without a word: the entry never relies on PATH
    assert Path(entry["command"]).is_absolute() and Path(entry["command"]).name == "spu"
    assert entry["args"] == ["serve"]
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


def test_claude_setup_starts_with_spu_off_path_and_check_lists_the_tools(tmp_path, spu_env):
    """Written with spu on PATH, then run (as Claude Code would) with a PATH that lacks it."""
    on_path = {**spu_env, "PATH": f"{Path(sys.executable).parent}{os.pathsep}/usr/bin:/bin"}
    assert spu("config", "claude", "--write", cwd=tmp_path, env=on_path).returncode == 0
    off_path = {**spu_env, "PATH": "/usr/bin:/bin"}
    res = spu("config", "claude", "--check", cwd=tmp_path, env=off_path)
    assert res.returncode == 0, res.stderr
    expected = {t.name for t in SERVER_TOOLS} | set(load_registry().tools)
    assert f"lists {len(expected)} tools" in res.stdout and "job_wait" in res.stdout


def _check_with(tmp_path: Path, env: dict[str, str], entry: dict) -> subprocess.CompletedProcess:
    (tmp_path / ".mcp.json").write_text(json.dumps({"mcpServers": {"spu": entry}}))
    return spu("config", "claude", "--check", cwd=tmp_path, env=env)


def test_claude_check_names_why_the_server_did_not_start(tmp_path, spu_env):
    """Each cause by name: spu off PATH, the interpreter of a venv's spu gone, a module the server cannot
    import, a server that exits (--check used to blame the spu script for a missing interpreter)."""
    env = {**spu_env, "PATH": "/usr/bin:/bin"}
    res = _check_with(tmp_path, env, {"command": "spu", "args": ["serve"]})
    assert res.returncode == 1 and "Traceback" not in res.stderr
    assert "`spu serve` did not start: 'spu' is not on PATH" in res.stderr
    assert "spu config claude --write" in res.stderr and res.stderr.startswith("error: ")
    # a venv whose interpreter was deleted: its bin/spu is still there
    venv_bin = tmp_path / "old-venv" / "bin"
    venv_bin.mkdir(parents=True)
    script = venv_bin / "spu"
    script.write_text(f"#!{tmp_path / 'old-venv' / 'bin' / 'python3.11'}\nimport spu\n")
    script.chmod(0o755)
    res = _check_with(tmp_path, env, {"command": str(script), "args": ["serve"]})
    assert res.returncode == 1
    assert f"runs the interpreter {tmp_path / 'old-venv' / 'bin' / 'python3.11'}, which does not exist" in (
        res.stderr
    )
    # the interpreter is there but the server cannot import a module it needs
    res = _check_with(tmp_path, env, {"command": sys.executable, "args": ["-c", "import spu_missing_dep"]})
    assert res.returncode == 1
    assert "ModuleNotFoundError: No module named 'spu_missing_dep'" in res.stderr
    assert "lacks a package" in res.stderr
    res = _check_with(tmp_path, env, {"command": "/bin/sh", "args": ["-c", "echo broken >&2; exit 3"]})
    assert res.returncode == 1 and "did not start" in res.stderr and "it wrote: broken" in res.stderr
    (tmp_path / ".mcp.json").write_text("{}")
    res = spu("config", "claude", "--check", cwd=tmp_path, env=env)
    assert res.returncode == 1 and "has no 'spu' server" in res.stderr


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
    # `claude mcp list` shows the command .mcp.json names: an absolute path (it used to read `spu serve`)
    flat = " ".join(claude_doc.split())
    listed = re.search(r"`claude mcp list` shows `spu: (\S+) serve - ", flat)
    assert listed and listed.group(1) == re.search(r'"command": "(\S+)", "args"', flat).group(1)
    assert Path(listed.group(1)).is_absolute() and "`spu: spu serve" not in flat
    block = clients.codex_toml(tools=["system_info"])
    documented = codex_doc.split("```toml\n", 1)[1].split("```", 1)[0]
    for row in block.splitlines():
        if not row.startswith("#"):
            assert row in documented, row


def _documented_provider_command() -> list[str]:
    """The `spu config codex --write --model-provider ...` line of docs/codex.md, as argv."""
    import shlex

    doc = (REPO / "docs" / "codex.md").read_text()
    section = doc.split("## A local or self-hosted model", 1)[1]
    command = section.split("```bash\n", 1)[1].split("```", 1)[0].replace("\\\n", " ")
    argv = shlex.split(command)
    assert argv[:4] == ["spu", "config", "codex", "--write"] and "--model-provider" in argv
    return argv[1:]


def test_codex_provider_written_as_documented_stays_top_level(tmp_path, env_with_spu_on_path):
    home = tmp_path / "codex"
    home.mkdir()
    (home / "config.toml").write_text('approval_policy = "never"\n\n[mcp_servers.other]\ncommand = "x"\n')
    env = {**env_with_spu_on_path, "CODEX_HOME": str(home)}
    for _ in range(2):  # idempotent
        res = spu(*_documented_provider_command(), cwd=tmp_path, env=env)
        assert res.returncode == 0, res.stderr
    text = (home / "config.toml").read_text()
    data = tomllib.loads(text)
    assert data["model"] == "my-model" and data["model_provider"] == "local"
    assert data["approval_policy"] == "never" and data["mcp_servers"]["other"] == {"command": "x"}
    assert data["model_providers"]["local"] == {
        "name": "local",
        "base_url": "http://127.0.0.1:8080/v1",
        "wire_api": "responses",
        "env_key": "LOCAL_API_KEY",
    }
    assert set(data["mcp_servers"]["spu"]["tools"]) >= {"system_info", "job_wait"}
    assert text.count("model_provider =") == 1 and text.count("[model_providers.local]") == 1
    # the documented result: top-level keys, the provider table, spu's tables last
    documented = (REPO / "docs" / "codex.md").read_text().split("## A local or self-hosted model", 1)[1]
    shown = documented.split("```toml\n", 1)[1].split("```", 1)[0]
    head = text.split("\n[", 1)[0]  # before the first table
    assert all(row in head for row in shown.splitlines()[:2]), head  # model, model_provider
    assert text.index("[model_providers.local]") < text.index("[mcp_servers.spu]")
    for row in shown.splitlines():
        if row and not row.startswith("#"):
            assert row in text, row
    # a whole table appended at the end stays a table of its own
    (home / "config.toml").write_text(
        text + '\n[model_providers.other]\nname = "other"\nbase_url = "http://h/v1"\n'
    )
    data = tomllib.loads((home / "config.toml").read_text())
    assert data["model_providers"]["other"]["name"] == "other" and data["model_provider"] == "local"


def test_codex_keys_appended_after_spu_tables_move_back_to_the_top_level(tmp_path, env_with_spu_on_path):
    """The order that used to break Codex: --write first, then the provider keys at the end of the file."""
    home = tmp_path / "codex"
    home.mkdir()
    env = {**env_with_spu_on_path, "CODEX_HOME": str(home)}
    assert spu("config", "codex", "--write", cwd=tmp_path, env=env).returncode == 0
    config = home / "config.toml"
    config.write_text(
        config.read_text()
        + 'model = "my-model"\nmodel_provider = "local"\n\n[model_providers.local]\nname = "local"\n'
        + 'base_url = "http://127.0.0.1:8080/v1"\n'
    )
    broken = tomllib.loads(config.read_text())
    assert "model" not in broken  # TOML put it inside spu's last tool table
    assert config.read_text().rstrip().splitlines()[-1] != clients.CODEX_BLOCK_END.splitlines()[-1]
    res = spu("config", "codex", "--write", cwd=tmp_path, env=env)
    assert res.returncode == 0, res.stderr
    assert "moved model, model_provider to the top level" in res.stdout
    data = tomllib.loads(config.read_text())
    assert data["model"] == "my-model" and data["model_provider"] == "local"
    assert data["model_providers"]["local"]["base_url"] == "http://127.0.0.1:8080/v1"
    assert all(v == {"approval_mode": "approve"} for v in data["mcp_servers"]["spu"]["tools"].values())
    # spu's table is replaced where it stands: the user's table stays after it, the block's end note once
    text = config.read_text()
    assert text.index("[mcp_servers.spu]") < text.index("[model_providers.local]")
    assert text.count(clients.CODEX_BLOCK_END) == 1


def test_codex_provider_options_need_a_provider_name(tmp_path, env_with_spu_on_path):
    res = spu(
        "config", "codex", "--base-url", "http://127.0.0.1:1/v1", cwd=tmp_path, env=env_with_spu_on_path
    )
    assert res.returncode == 2 and "--model-provider" in res.stderr


def test_codex_writer_keeps_dotted_keys_and_replaces_a_provider_written_by_hand():
    tools = ["system_info"]
    text = clients.write_codex_config('approval_policy = "never"\n', tools=tools).text
    text += 'model = "m"\nmodel_providers.local.base_url = "http://x/v1"\n'  # appended after spu's tables
    written = clients.write_codex_config(text, tools=tools)
    text, moved = written.text, written.moved
    assert moved == ["model", "model_providers.local.base_url"]
    data = tomllib.loads(text)
    assert data["model"] == "m" and data["model_providers"]["local"]["base_url"] == "http://x/v1"
    provider = clients.CodexProvider("local", "http://127.0.0.1:9/v1", "m2")
    data = tomllib.loads(clients.write_codex_config(text, tools=tools, provider=provider).text)
    assert data["model"] == "m2" and data["model_provider"] == "local" and data["approval_policy"] == "never"
    assert data["model_providers"]["local"] == {
        "name": "local",
        "base_url": "http://127.0.0.1:9/v1",
        "wire_api": "responses",
    }
    assert set(data["mcp_servers"]["spu"]["tools"]) == {"system_info"}


def test_claude_write_keeps_the_users_env_and_keys_and_records_task_roots(tmp_path, env_with_spu_on_path):
    """Rerunning --write used to replace the whole spu entry, dropping an env the user had added."""
    project, tasks, more = tmp_path / "project", tmp_path / "tasks", tmp_path / "more-tasks"
    for folder in (project, tasks, more):
        folder.mkdir()
    env = {k: v for k, v in env_with_spu_on_path.items() if k not in clients.SERVER_ENV_VARS}
    res = spu("config", "claude", "--write", "--task-root", "../tasks", cwd=project, env=env)
    assert res.returncode == 0, res.stderr
    mcp = json.loads((project / ".mcp.json").read_text())
    assert mcp["mcpServers"]["spu"]["env"] == {"SPU_INPUT_ROOTS": str(tasks)}
    mcp["mcpServers"]["spu"]["env"]["BRAVE_API_KEY"] = "user-key"
    mcp["mcpServers"]["spu"]["timeout"] = 30000
    mcp["mcpServers"]["other"] = {"command": "x"}
    (project / ".mcp.json").write_text(json.dumps(mcp))
    res = spu("config", "claude", "--write", "--task-root", str(more), cwd=project, env=env)
    assert res.returncode == 0, res.stderr
    entry = json.loads((project / ".mcp.json").read_text())["mcpServers"]
    assert entry["other"] == {"command": "x"}
    assert entry["spu"]["env"] == {
        "SPU_INPUT_ROOTS": os.pathsep.join([str(tasks), str(more)]),
        "BRAVE_API_KEY": "user-key",
    }
    assert entry["spu"]["timeout"] == 30000 and entry["spu"]["args"] == ["serve"]
    assert f"the tools may read files under {tasks}" in res.stdout


def test_codex_write_keeps_the_users_server_keys_and_env_and_records_task_roots(
    tmp_path, env_with_spu_on_path
):
    home, tasks = tmp_path / "codex", tmp_path / "tasks"
    home.mkdir()
    tasks.mkdir()
    env = {k: v for k, v in env_with_spu_on_path.items() if k not in clients.SERVER_ENV_VARS}
    env["CODEX_HOME"] = str(home)
    assert spu("config", "codex", "--write", "--task-root", str(tasks), cwd=tmp_path, env=env).returncode == 0
    config = home / "config.toml"
    text = config.read_text().replace(
        "[mcp_servers.spu.env]\n", '[mcp_servers.spu.env]\nBRAVE_API_KEY = "user-key"\n'
    )
    text = text.replace("tool_timeout_sec = 660\n", 'tool_timeout_sec = 660\nenv_vars = ["NCBI_API_KEY"]\n')
    config.write_text(text)
    res = spu("config", "codex", "--write", cwd=tmp_path, env=env)
    assert res.returncode == 0, res.stderr
    server = tomllib.loads(config.read_text())["mcp_servers"]["spu"]
    assert server["env"] == {"SPU_INPUT_ROOTS": str(tasks), "BRAVE_API_KEY": "user-key"}
    assert server["env_vars"] == ["NCBI_API_KEY"] and server["command"] == "spu"
    assert "moved" not in res.stdout and "env_vars" not in tomllib.loads(config.read_text())


def test_codex_write_refuses_to_replace_a_top_level_key_silently(tmp_path, env_with_spu_on_path):
    """A `model = ...` appended after spu's tables used to replace the file's own `model` without a word."""
    home = tmp_path / "codex"
    home.mkdir()
    env = {**env_with_spu_on_path, "CODEX_HOME": str(home)}
    config = home / "config.toml"
    config.write_text('model = "gpt-own"\n')
    assert spu("config", "codex", "--write", cwd=tmp_path, env=env).returncode == 0
    config.write_text(config.read_text() + 'model = "gpt-appended"\n')
    before = config.read_text()
    res = spu("config", "codex", "--write", cwd=tmp_path, env=env)
    assert res.returncode == 2 and res.stderr.startswith("error: ") and res.stderr.count("\n") == 1
    assert 'model is set twice: `model = "gpt-own"`' in res.stderr and 'model = "gpt-appended"' in res.stderr
    assert config.read_text() == before  # nothing written
    # the same value twice is no conflict: the top-level one stays, once
    config.write_text(before.replace("gpt-appended", "gpt-own"))
    res = spu("config", "codex", "--write", cwd=tmp_path, env=env)
    assert res.returncode == 0, res.stderr
    assert (
        config.read_text().count("model = ") == 1 and tomllib.loads(config.read_text())["model"] == "gpt-own"
    )
    # the provider options replace it on request, and say so
    res = spu("config", "codex", "--write", "--model-provider", "p", "--model", "m2", cwd=tmp_path, env=env)
    assert res.returncode == 0 and 'replaced model = "gpt-own" -> model = "m2"' in res.stdout


def test_codex_check_starts_the_server_as_codex_would(tmp_path, env_with_spu_on_path):
    home = tmp_path / "codex"
    env = {**env_with_spu_on_path, "CODEX_HOME": str(home)}
    res = spu("config", "codex", "--check", cwd=tmp_path, env=env)
    assert (
        res.returncode == 2  # a missing input, not a negative verdict
        and "no Codex config at" in res.stderr
        and "spu config codex --write" in res.stderr
    )
    assert spu("config", "codex", "--write", cwd=tmp_path, env=env).returncode == 0
    res = spu("config", "codex", "--check", cwd=tmp_path, env=env)
    assert res.returncode == 0, res.stderr
    expected = {t.name for t in SERVER_TOOLS} | set(load_registry().tools)
    assert f"`spu serve` started and lists {len(expected)} tools" in res.stdout
    # the block names `spu`; a shell whose PATH lacks it is what Codex would start it with
    res = spu("config", "codex", "--check", cwd=tmp_path, env={**env, "PATH": "/usr/bin:/bin"})
    assert (
        res.returncode == 1
        and "'spu' is not on PATH" in res.stderr
        and "Codex would run without" in res.stderr
    )


def test_codex_server_env_is_what_codex_passes(monkeypatch):
    """Codex gives a stdio server a few of its own variables, those of env_vars, and the entry's env
    (tests/integration/test_npm_clients.py checks the list against Codex itself)."""
    monkeypatch.setenv("SPU_INPUT_ROOTS", "/from/the/shell")
    monkeypatch.setenv("NCBI_API_KEY", "k")
    entry = {"command": "spu", "env": {"SPU_WORKDIR": "/w"}, "env_vars": ["NCBI_API_KEY"]}
    env = clients.codex_server_env(entry)
    assert "SPU_INPUT_ROOTS" not in env and env["NCBI_API_KEY"] == "k" and env["SPU_WORKDIR"] == "/w"
    assert env["PATH"] == os.environ["PATH"]
    assert clients.claude_server_env(entry)["SPU_INPUT_ROOTS"] == "/from/the/shell"
