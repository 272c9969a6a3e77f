"""`spu config codex|claude --write` on the user's own files, with generated files (Hypothesis).

Codex configs are generated the way people write TOML: other servers, env tables, provider tables,
profiles, comments, and spu's table absent or in every valid spelling (a [table] header, a quoted key,
dotted keys at the top level or under [mcp_servers], inline tables, the whole mcp_servers inline, its env
table placed after other tables). After --write each file must parse, hold spu's table once with the
content it must have, and hold everything else as before (the parsed documents without spu's table are
equal, and every comment outside spu's table is still there). Files that do not parse or are not UTF-8 are
left byte-identical, with one `error:` line and exit status 2.

On 39e2847 the writer edited the file as text: a quoted or dotted spelling gave a file Codex refuses
("Cannot declare ... twice"), a broken file got the block appended, a non-UTF-8 one a traceback."""

from __future__ import annotations

import contextlib
import io
import json
import os
import tempfile
import tomllib
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from spu.cli import main
from tools_server.commands import clients

PROPERTY = settings(
    max_examples=60, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow]
)
SPELLINGS = (
    "table",  # [mcp_servers.spu]
    "quoted",  # [mcp_servers."spu"]
    "dotted_top",  # mcp_servers.spu.command = ... before the first table
    "dotted_under",  # [mcp_servers] then spu.command = ...
    "inline_under",  # [mcp_servers] then spu = {...}
    "inline_top",  # mcp_servers.spu = {...} before the first table
    "split_env",  # [mcp_servers.spu], other tables, then [mcp_servers.spu.env]
    "all_inline",  # mcp_servers = {spu = {...}, other = {...}}
)
#: tool names the generated spu tables approve: some are spu's tools, some are not (any more)
TOOL_POOL = ("system_info", "job_wait", "chem_descriptors", "old_tool", "gone_tool")


@pytest.fixture(autouse=True)
def _no_server_env(monkeypatch):
    """The registration records only what the generated file holds (no SPU_* variable of this shell)."""
    for name in clients.SERVER_ENV_VARS:
        monkeypatch.delenv(name, raising=False)


def v(value: Any) -> str:
    """A value as TOML text (strings via JSON's escapes, which TOML shares for these characters)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k} = {v(x)}" for k, x in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(v(x) for x in value) + "]"
    return json.dumps(value, ensure_ascii=False)


names = st.text("abcdefghijklmnopqrstuvwxyz_", min_size=1, max_size=8)
texts = st.text(st.characters(codec="utf-8", exclude_categories=("Cs", "Cc")), max_size=12)
scalars = st.one_of(texts, st.integers(-1000, 1000), st.booleans())
env_tables = st.dictionaries(st.from_regex(r"[A-Z][A-Z0-9_]{0,8}", fullmatch=True), texts, max_size=3)


@st.composite
def servers(draw) -> dict[str, Any]:
    server = {"command": draw(texts.filter(bool)), "args": draw(st.lists(texts, max_size=3))}
    if env := draw(env_tables):
        server["env"] = env
    return server


@st.composite
def codex_configs(draw) -> tuple[str, dict[str, Any] | None, list[str], list[str]]:
    """(the file's text, spu's table as written or None, comments outside spu's tables, inside them)."""
    counter = iter(range(10_000))
    outside: list[str] = []
    inside: list[str] = []

    def comment(where: list[str]) -> str:
        token = f"# note-{next(counter)} {draw(texts)}".rstrip()
        where.append(token)
        return token

    def maybe_comment(lines: list[str], where: list[str]) -> None:
        if draw(st.booleans()):
            lines.append(comment(where))

    top = draw(
        st.dictionaries(
            names.filter(lambda n: n not in ("mcp_servers", "model_providers")), scalars, max_size=4
        )
    )
    others = draw(st.dictionaries(names.filter(lambda n: n != "spu"), servers(), max_size=3))
    providers = draw(st.dictionaries(names, st.fixed_dictionaries({"base_url": texts}), max_size=2))
    spu: dict[str, Any] | None = None
    if draw(st.booleans()):
        spu = {"command": draw(texts.filter(bool)), "args": draw(st.lists(texts, max_size=2))}
        spu |= draw(st.dictionaries(st.sampled_from(["cwd", "enabled", "startup_timeout_sec"]), scalars))
        if env := draw(env_tables):
            spu["env"] = env
        if tools := draw(st.lists(st.sampled_from(TOOL_POOL), unique=True, max_size=3)):
            spu["tools"] = {t: {"approval_mode": draw(st.sampled_from(["approve", "prompt"]))} for t in tools}
    spelling = draw(st.sampled_from(SPELLINGS))
    if spelling == "split_env" and not (spu and spu.get("env")):
        spelling = "table"
    other_style = draw(st.sampled_from(["table", "inline_top", "dotted_top"]))
    if spelling == "all_inline":
        other_style = "all_inline"
    elif spelling in ("dotted_under", "inline_under"):
        other_style = "under"  # one [mcp_servers] header holds them (a dotted-key table takes no header)
    elif spelling in ("dotted_top", "inline_top") and other_style == "table":
        other_style = "dotted_top"  # mcp_servers defined by dotted keys: no [mcp_servers.x] header below

    lines: list[str] = []
    maybe_comment(lines, outside)
    for key, value in top.items():
        lines.append(f"{key} = {v(value)}" + (f"  {comment(outside)}" if draw(st.booleans()) else ""))
    tables: list[list[str]] = []
    late: list[list[str]] = []

    def dotted(prefix: str, value: dict[str, Any]) -> list[str]:
        rows = []
        for key, item in value.items():
            if isinstance(item, dict) and item and all(isinstance(x, dict) for x in item.values()):
                rows += dotted(f"{prefix}.{key}", item)
            elif isinstance(item, dict):
                rows += [f"{prefix}.{key}.{k} = {v(x)}" for k, x in item.items()]
            else:
                rows.append(f"{prefix}.{key} = {v(item)}")
        return rows

    def table(header: str, value: dict[str, Any], where: list[str]) -> list[list[str]]:
        plain = {k: x for k, x in value.items() if not isinstance(x, dict)}
        body = [f"[{header}]", *(f"{k} = {v(x)}" for k, x in plain.items())]
        maybe_comment(body, where)
        out = [body]
        for key, item in value.items():
            if isinstance(item, dict) and item and all(isinstance(x, dict) for x in item.values()):
                out += [sub for name, x in item.items() for sub in table(f"{header}.{key}.{name}", x, where)]
            elif isinstance(item, dict):
                out += table(f"{header}.{key}", item, where)
        return out

    if other_style == "all_inline":
        everything = {**others, **({"spu": spu} if spu else {})}
        lines.append(f"mcp_servers = {v(everything)}")
    under: list[str] = []
    for name, server in others.items():
        if other_style == "inline_top":
            lines.append(f"mcp_servers.{name} = {v(server)}")
        elif other_style == "dotted_top":
            lines += dotted(f"mcp_servers.{name}", server)
        elif other_style == "under":
            under.append(f"{name} = {v(server)}")
        elif other_style == "table":
            tables += table(f"mcp_servers.{name}", server, outside)
    if spu is not None and spelling != "all_inline":
        if spelling == "dotted_top":
            lines += dotted("mcp_servers.spu", spu)
        elif spelling == "inline_top":
            lines.append(f"mcp_servers.spu = {v(spu)}")
        elif spelling == "dotted_under":
            under += dotted("spu", spu)
        elif spelling == "inline_under":
            under.append(f"spu = {v(spu)}")
        else:
            header = 'mcp_servers."spu"' if spelling == "quoted" else "mcp_servers.spu"
            without_env = {k: x for k, x in spu.items() if spelling != "split_env" or k != "env"}
            tables += table(header, without_env, inside)
            if spelling == "split_env":
                late += table(f"{header}.env", spu["env"], inside)
    if under:
        block = ["[mcp_servers]", *under]
        maybe_comment(block, outside)
        tables.insert(draw(st.integers(0, len(tables))), block)
    for name, provider in providers.items():
        body = [f"[model_providers.{name}]", f"base_url = {v(provider['base_url'])}"]
        maybe_comment(body, outside)
        tables.insert(draw(st.integers(0, len(tables))), body)
    if draw(st.booleans()):
        tables.append(["[profiles.fast]", 'model = "small"', comment(outside)])
    text = "\n".join(lines + [row for block in tables + late for row in block]) + "\n"
    return text, spu, outside, inside


def spu_cli(*args: str) -> tuple[int, str, str]:
    """(exit status, stdout, stderr) of ``spu ARGS`` run in this process."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            main(list(args))
            status = 0
        except SystemExit as exc:
            status = exc.code if isinstance(exc.code, int) else 1
    return status, out.getvalue(), err.getvalue()


def expected_spu(written: dict[str, Any] | None) -> dict[str, Any]:
    """spu's table after --write, from what the user had written (computed apart from the writer)."""
    command, _ = clients.server_command()
    user = dict(written or {})
    ours = {
        "command": command[0],
        "args": command[1:],
        "required": True,
        "startup_timeout_sec": clients.CODEX_STARTUP_TIMEOUT_S,
        "tool_timeout_sec": clients.CODEX_TOOL_TIMEOUT_S,
    }
    tools = {name: {"approval_mode": "approve"} for name in clients.all_tool_names()}
    for name, table in (user.pop("tools", None) or {}).items():
        tools.setdefault(name, table)
    result = {**user, **ours, "tools": tools}
    if not result.get("env"):
        result.pop("env", None)
    return result


def without_spu(data: dict[str, Any]) -> dict[str, Any]:
    servers = {k: x for k, x in data.get("mcp_servers", {}).items() if k != "spu"}
    rest = {k: x for k, x in data.items() if k != "mcp_servers"}
    return rest | ({"mcp_servers": servers} if servers else {})


@PROPERTY
@given(codex_configs())
def test_generated_codex_configs_stay_valid_and_keep_everything_else(config):
    text, spu, outside, _ = config
    before = tomllib.loads(text)  # the generator writes valid TOML only
    assert (spu is None) == ("spu" not in before.get("mcp_servers", {}))
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "config.toml"
        path.write_text(text, encoding="utf-8")
        status, _, err = spu_cli("config", "codex", "--write", "--path", str(path))
        assert status == 0, err
        written = path.read_text(encoding="utf-8")
        backup = path.with_name("config.toml.bak")
        assert backup.read_text(encoding="utf-8") == text if text else not backup.exists()
    after = tomllib.loads(written)
    assert after["mcp_servers"]["spu"] == expected_spu(spu)
    assert without_spu(after) == without_spu(before)
    assert [c for c in outside if c not in written] == []
    assert written.count("approval_mode") >= len(clients.all_tool_names())
    # idempotent: a second --write changes nothing
    again = clients.write_codex_config(written).text
    assert tomllib.loads(again) == after


def _not_toml(text: str) -> bool:
    try:
        tomllib.loads(text)
    except tomllib.TOMLDecodeError:
        return True
    return False


BREAKAGES = st.sampled_from(
    [
        "[mcp_servers.spu]\ncommand = 1\n[mcp_servers.spu]\n",  # the same table twice
        'mcp_servers.spu.command = "x"\n',  # after a [table]: collides with a table defined above, or
        "key = \n",  # a key without a value
        'unterminated = "text\n',
        "[table\n",
        "= 3\n",
    ]
)


@PROPERTY
@given(codex_configs(), BREAKAGES, st.integers(0, 1000), st.sampled_from(["toml", "utf8"]))
def test_a_codex_config_that_does_not_parse_or_is_not_utf8_is_left_byte_identical(
    config, breakage, where, kind
):
    text = config[0]
    rows = text.splitlines(keepends=True)
    cut = where % (len(rows) + 1)
    if kind == "toml":
        broken = "".join(rows[:cut]) + breakage + "".join(rows[cut:])
        assume(_not_toml(broken))
        data = broken.encode("utf-8")
    else:  # a Latin-1 byte in an otherwise valid file (an editor saved it in another encoding)
        data = ("".join(rows[:cut]) + "# caf").encode("utf-8") + b"\xe9\n" + "".join(rows[cut:]).encode()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "config.toml"
        path.write_bytes(data)
        status, _, err = spu_cli("config", "codex", "--write", "--path", str(path))
        assert status == 2, (status, err)
        assert err.startswith("error: ") and err.count("\n") == 1 and "Traceback" not in err, err
        assert str(path) in err
        assert path.read_bytes() == data and sorted(os.listdir(tmp)) == ["config.toml"]


@pytest.mark.parametrize(
    ("name", "data", "says"),
    [
        (".mcp.json", b'{"mcpServers": {"other": {"command": "x"}},}', "is not valid JSON"),
        (".mcp.json", b'{"mcpServers": {}, "mcpServers": {}}', "appears twice"),
        (".mcp.json", b"[1, 2]", "does not hold a JSON object"),
        (".mcp.json", b'{"note": "caf\xe9"}', "is not UTF-8 text (byte 0xe9 at offset 13)"),
        (".claude/settings.json", b'{"env": {"A": "caf\xe9"}}', "is not UTF-8 text"),
    ],
)
def test_claude_files_that_cannot_be_read_are_left_byte_identical(tmp_path, name, data, says):
    (tmp_path / ".claude").mkdir()
    target = tmp_path / name
    target.write_bytes(data)
    status, _, err = spu_cli("config", "claude", "--write", "--project", str(tmp_path))
    assert status == 2 and err.count("\n") == 1 and says in err and "Traceback" not in err, err
    assert target.read_bytes() == data
    assert (
        not (tmp_path / ".mcp.json.bak").exists()
        and not (tmp_path / ".claude" / "settings.json.bak").exists()
    )
    if name != ".mcp.json":
        assert not (tmp_path / ".mcp.json").exists()  # neither file is written when one cannot be


def test_claude_write_keeps_a_backup_the_file_mode_and_a_linked_file(tmp_path):
    """The previous .mcp.json goes to .mcp.json.bak; a private file stays private; a link (a dotfiles
    repository) stays a link and its target is what changes."""
    real = tmp_path / "dotfiles" / "mcp.json"
    real.parent.mkdir()
    original = json.dumps({"mcpServers": {"other": {"command": "x"}}, "z-key": 1}, indent=4).encode()
    real.write_bytes(original)
    real.chmod(0o600)
    project = tmp_path / "project"
    project.mkdir()
    (project / ".mcp.json").symlink_to(real)
    status, out, err = spu_cli("config", "claude", "--write", "--project", str(project), "--json")
    assert status == 0, err
    report = json.loads(out)
    assert report["written"][0]["backup"] == str(real.with_name("mcp.json.bak"))
    assert (project / ".mcp.json").is_symlink()
    data = json.loads(real.read_text())
    assert list(data) == ["mcpServers", "z-key"] and data["mcpServers"]["other"] == {"command": "x"}
    assert real.stat().st_mode & 0o777 == 0o600
    assert real.with_name("mcp.json.bak").read_bytes() == original
    assert real.with_name("mcp.json.bak").stat().st_mode & 0o777 == 0o600
    # unchanged on a second run: no new write, the backup is the first one's
    status, out, _ = spu_cli("config", "claude", "--write", "--project", str(project), "--json")
    assert status == 0 and json.loads(out)["written"][0]["changed"] is False
    assert real.with_name("mcp.json.bak").read_bytes() == original


def test_agents_md_that_is_not_utf8_or_has_a_cut_section_is_left_as_it_was(tmp_path):
    agents = tmp_path / "AGENTS.md"
    for data, says in (
        (b"# Notes\n\ncaf\xe9\n", "is not UTF-8 text"),
        (f"# Notes\n{clients.AGENTS_MD_START}\nmine\n".encode(), "1 start, 0 end"),
        (f"{clients.AGENTS_MD_END}\nx\n{clients.AGENTS_MD_START}\n".encode(), "1 start, 1 end"),
    ):
        agents.write_bytes(data)
        status, _, err = spu_cli(
            "config", "codex", "--agents-md", "--agents-path", str(agents), "--path", str(tmp_path / "c.toml")
        )
        assert status == 2 and says in err and err.count("\n") == 1, err
        assert agents.read_bytes() == data
    agents.write_text("# Notes\n\nmine\n")
    status, _, err = spu_cli(
        "config", "codex", "--agents-md", "--agents-path", str(agents), "--path", str(tmp_path / "c.toml")
    )
    assert status == 0, err
    assert agents.read_text().startswith("# Notes\n\nmine\n") and agents.with_name("AGENTS.md.bak").is_file()


def test_config_commands_report_as_json(tmp_path):
    status, out, err = spu_cli("config", "codex", "--json", "--path", str(tmp_path / "config.toml"))
    assert status == 0, err
    printed = json.loads(out)
    assert printed["path"] == str(tmp_path / "config.toml")
    assert tomllib.loads(printed["toml"])["mcp_servers"]["spu"]["required"] is True
    status, out, err = spu_cli("config", "claude", "--json", "--project", str(tmp_path))
    assert status == 0, err
    assert json.loads(out)["mcp_json"]["mcpServers"]["spu"]["args"] == ["serve"]
    status, out, err = spu_cli(
        "config", "codex", "--write", "--json", "--path", str(tmp_path / "config.toml")
    )
    assert status == 0, err
    assert json.loads(out)["written"] == [
        {"path": str(tmp_path / "config.toml"), "changed": True, "backup": None}
    ]
