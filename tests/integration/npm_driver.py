"""Drives the real npm MCP clients against `spu serve`; run by test_npm_clients.py inside a network namespace
(`unshare -n`) that has only a loopback interface, so nothing the clients do can leave the machine.

    python npm_driver.py SCENARIO WORK_DIR      prints one JSON object

Scenarios: ``mcp-list`` (claude mcp list), ``codex-mcp-list`` (codex mcp list), ``inspector`` (MCP Inspector
CLI tools/list and tools/call),
``claude-headless`` (claude -p against a scripted Anthropic Messages model that answers with a tool_use of
mcp__spu__system_info, then with text once it has seen the tool_result), ``codex-exec`` (codex exec against
a scripted Responses model that calls system_info, a job tool, job_wait and job_cancel). The models are
tests/scripted_model_server.py on loopback, with the scripts below.
"""

from __future__ import annotations

import functools
import json
import os
import shlex
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests"))  # run as a script: the tests' shared stand-in model server

from scripted_model_server import ScriptedModelServer, offered_tools, tool_call, tool_results  # noqa: E402

from tools_server.commands.clients import claude_headless_command  # noqa: E402

BIN = Path(os.environ.get("SPU_NPM_PREFIX") or REPO / ".npm-clients") / "node_modules" / ".bin"
FINAL_TEXT = "The spu server reports its hardware."
TOOL = "mcp__spu__system_info"
CODEX_FINAL_TEXT = "The spu tools answered."

#: Every variable that could send a client elsewhere or make it phone home is set or removed here.
QUIET_ENV = {
    "DISABLE_TELEMETRY": "1",
    "DISABLE_AUTOUPDATER": "1",
    "DISABLE_ERROR_REPORTING": "1",
    "DISABLE_BUG_COMMAND": "1",
    "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
    "CLAUDE_CODE_DISABLE_FEEDBACK_SURVEY": "1",
    "DO_NOT_TRACK": "1",
    "NO_UPDATE_NOTIFIER": "1",
    "NPM_CONFIG_UPDATE_NOTIFIER": "false",
    "CI": "1",
}
#: set by `spu config claude --write` in the project's settings, never by the test (docs/claude-code.md)
CLAUDE_SETTINGS_ENV = ("ENABLE_TOOL_SEARCH", "MCP_CONNECTION_NONBLOCKING", "MCP_CONNECT_TIMEOUT_MS")
PROXY_VARS = (
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "ALL_PROXY",
    "http_proxy",
    "https_proxy",
    "all_proxy",
    "NO_PROXY",
    "no_proxy",
)


def client_env(work: Path, **extra: str) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in PROXY_VARS and k not in CLAUDE_SETTINGS_ENV and not k.startswith("ANTHROPIC_")
    }
    home = work / "home"
    home.mkdir(parents=True, exist_ok=True)
    env |= QUIET_ENV | {
        "HOME": str(home),
        "CLAUDE_CONFIG_DIR": str(home / ".claude"),
        "SPU_WORKDIR": str(work / "spu-work"),
        "SPU_CACHE_DIR": str(work / "spu-cache"),
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}",
    }
    return env | extra


def spu_config(client: str, project: Path, env: dict[str, str], *options: str) -> None:
    """`spu config CLIENT OPTIONS` in ``project``, as a user runs it; it must succeed."""
    subprocess.run(
        [sys.executable, "-m", "spu", "config", client, *options],
        cwd=project,
        env=env,
        check=True,
        capture_output=True,
        timeout=60,
    )


def setup_claude_project(work: Path, env: dict[str, str]) -> Path:
    """A project set up exactly as docs/claude-code.md says: `spu config claude --write` and `--skill`."""
    project = work / "project"
    project.mkdir(parents=True, exist_ok=True)
    for flag in ("--write", "--skill"):
        spu_config("claude", project, env, flag)
    return project


SKILL = "spu-method"


def skill_tool(tools: list[dict]) -> tuple[str, str] | None:
    """Claude Code's skill-loading tool and the name of its argument, from the request's tools."""
    for t in tools:
        if t.get("name") == "Skill":
            schema = t.get("input_schema") or {}
            required = schema.get("required") or list(schema.get("properties") or {})
            return t["name"], required[0]
    return None


def claude_headless(request: dict, wire: str) -> dict:
    """Claude Code's script: a tool_use of system_info first, then (once its result is back) the skill, then
    text; side requests (titles, summaries) get text."""
    results = tool_results(request, wire)
    skill = skill_tool(request.get("tools") or [])
    if len(results) == 1 and skill:
        return {"tool_calls": [{"id": "toolu_skill_1", "name": skill[0], "arguments": {skill[1]: SKILL}}]}
    if results:
        return {"text": FINAL_TEXT}
    if TOOL in offered_tools(request, wire):
        return {"tool_calls": [{"id": "toolu_spu_1", "name": TOOL, "arguments": {}}]}
    return {"text": "ok"}


def claude_steps(steps: list[tuple[str, dict]]) -> Callable[[dict, str], dict]:
    """Calls the spu tools of ``steps`` (name, input) one after the other, then ends with text."""

    def reply(request: dict, wire: str) -> dict:
        if f"mcp__spu__{steps[0][0]}" not in offered_tools(request, wire):
            return {"text": "ok"}
        done = len(tool_results(request, wire))
        if done < len(steps):
            name, args = steps[done]
            return {
                "tool_calls": [{"id": f"toolu_step_{done}", "name": f"mcp__spu__{name}", "arguments": args}]
            }
        return {"text": FINAL_TEXT}

    return reply


def codex_steps(next_call: Callable[[list[dict]], tuple[str, dict] | None]) -> Callable[[dict, str], dict]:
    """Codex's script: once the spu tools are offered, the spu tool ``next_call`` names from the outputs sent
    back so far (name, arguments), until it says None; then a final message."""

    def reply(request: dict, wire: str) -> dict:
        offered = offered_tools(request, wire)
        call = (
            next_call(tool_results(request, wire))
            if any(n.endswith("/system_info") for n in offered)
            else None
        )
        if call is None:
            return {"text": CODEX_FINAL_TEXT}
        step, args = call
        return {
            "tool_calls": [tool_call(next(t for t in offered if t.endswith("/" + step) and "spu" in t), args)]
        }

    return reply


JOB_STEPS = ("system_info", "chem_parse", "job_wait", "job_cancel")


def job_steps(outputs: list[dict]) -> tuple[str, dict] | None:
    """system_info, chem_parse with wait_s=0 (a job), job_wait and job_cancel on that job's id."""
    if len(outputs) >= len(JOB_STEPS):
        return None
    step = JOB_STEPS[len(outputs)]
    args: dict = {}
    if step == "chem_parse":
        args = {"molecules": ["CCO"], "wait_s": 0}
    elif step in ("job_wait", "job_cancel"):
        args = {"job_id": job_id_in(outputs[1].get("output")) or "missing"}
        if step == "job_wait":
            args["wait_s"] = 120
    return step, args


def job_id_in(output: object) -> str | None:
    """The first ``job_id`` anywhere in a function_call_output (JSON text nested in JSON included)."""
    if isinstance(output, str):  # Codex sends "Wall time: ...\nOutput:\n{json}"
        start = output.find("{")
        try:
            return job_id_in(json.loads(output[start:])) if start >= 0 else None
        except ValueError:
            return None
    if isinstance(output, dict):
        if isinstance(output.get("job_id"), str):
            return output["job_id"]
        output = list(output.values())
    if isinstance(output, list):
        for value in output:
            if found := job_id_in(value):
                return found
    return None


def start_server(reply: Callable[[dict, str], dict]) -> ScriptedModelServer:
    return ScriptedModelServer(default=reply).__enter__()


def spu_tools_offered(server: ScriptedModelServer) -> list[str]:
    return sorted({t for r in server.requests for t in offered_tools(r["json"], r["wire"]) if "spu" in t})


def scripted_provider(server: ScriptedModelServer) -> str:
    """The lines of Codex's config.toml that make the scripted server its model provider (Responses)."""
    return (
        'model = "scripted-model"\nmodel_provider = "scripted"\n\n'
        f'[model_providers.scripted]\nname = "scripted"\nbase_url = "{server.url}/v1"\n'
        'wire_api = "responses"\n'
        'env_key = "SCRIPTED_API_KEY"\nrequest_max_retries = 0\nstream_max_retries = 0\n\n'
    )


def headless_claude(prompt: str) -> tuple[list[str], dict[str, str]]:
    """The documented headless command (`spu config claude` prints it) with ``prompt``, this checkout's
    `claude` and the test's model; and the variables it sets before the command."""
    words = shlex.split(claude_headless_command(prompt))
    assignments = [w for w in words if "=" in w and w.split("=", 1)[0].isupper()]
    assert words[len(assignments)] == "claude", words
    command = [str(BIN / "claude"), *words[len(assignments) + 1 :], "--model", "claude-sonnet-4-5"]
    return command, dict(a.split("=", 1) for a in assignments)


def run(cmd: list[str], env: dict[str, str], cwd: Path, timeout: float = 180) -> dict:
    proc = subprocess.run(cmd, env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout, check=False)
    return {"returncode": proc.returncode, "stdout": proc.stdout, "stderr": proc.stderr[-4000:]}


def scenario_mcp_list(work: Path) -> dict:
    env = client_env(work, ANTHROPIC_API_KEY="sk-test-not-used", ANTHROPIC_BASE_URL="http://127.0.0.1:9")
    project = setup_claude_project(work, env)
    return run([str(BIN / "claude"), "mcp", "list"], env, project)


def scenario_codex_mcp_list(work: Path) -> dict:
    """`codex mcp list` reads the block `spu config codex --write` appended to its config.toml."""
    env = client_env(work, CODEX_HOME=str(work / "codex-home"))
    spu_config("codex", work, env, "--write")
    return run([str(BIN / "codex"), "mcp", "list"], env, work, timeout=60)


def scenario_inspector(work: Path) -> dict:
    env = client_env(work)
    server = [str(Path(sys.executable).parent / "spu"), "serve"]
    if not Path(server[0]).exists():
        server = [sys.executable, "-m", "spu", "serve"]
    inspector = [str(BIN / "mcp-inspector"), "--cli", *server]
    listed = run([*inspector, "--method", "tools/list"], env, work)
    called = run(
        [
            *inspector,
            "--method",
            "tools/call",
            "--tool-name",
            "chem_descriptors",
            "--tool-arg",
            'molecules=["CCO"]',
        ],
        env,
        work,
    )
    return {"list": listed, "call": called}


def scenario_claude_headless(work: Path) -> dict:
    server = start_server(claude_headless)
    env = client_env(work, ANTHROPIC_API_KEY="sk-test-scripted", ANTHROPIC_BASE_URL=server.url)
    project = setup_claude_project(work, env)
    command, settings = headless_claude("Call the system_info tool of the spu server.")
    result = run(command, env | settings, project, timeout=240)
    server.close()
    main = [r["json"] for r in server.requests if TOOL in offered_tools(r["json"], r["wire"])]
    return {
        **result,
        "request_texts": [json.dumps(b.get("system", "")) + json.dumps(b.get("messages", [])) for b in main],
        "tools_offered": spu_tools_offered(server),
        "tool_results": [b for r in server.requests for b in tool_results(r["json"], r["wire"])],
    }


def scenario_codex_exec(work: Path) -> dict:
    """`codex exec` with the block `spu config codex --write` wrote (and the AGENTS.md section of
    `spu config codex --agents-md`), against the scripted Responses server; nothing else configured but the
    model provider."""
    server = start_server(codex_steps(job_steps))
    codex_home = work / "codex-home"
    env = client_env(work, CODEX_HOME=str(codex_home), SCRIPTED_API_KEY="sk-test-scripted")
    project = work / "project"
    project.mkdir(parents=True, exist_ok=True)
    for flag in ("--write", "--agents-md"):
        spu_config("codex", project, env, flag)
    config = codex_home / "config.toml"
    config.write_text(scripted_provider(server) + config.read_text())
    result = run(
        [
            str(BIN / "codex"),
            "exec",
            "--skip-git-repo-check",
            "--json",
            "Rank nothing; call the spu tools system_info, chem_parse, job_wait and job_cancel.",
        ],
        env,
        project,
        timeout=240,
    )
    server.close()
    outputs = {}
    for request in server.requests:
        items = request["json"].get("input") or []
        calls = {
            i.get("call_id"): f"{i.get('namespace', '')}/{i.get('name')}"
            for i in items
            if i.get("type") == "function_call"
        }
        for i in items:
            if i.get("type") == "function_call_output":
                out = i.get("output")
                outputs[calls.get(i.get("call_id"), i.get("call_id"))] = (
                    out if isinstance(out, str) else json.dumps(out)
                )
    first = server.requests[0]["json"] if server.requests else {}
    return {
        **result,
        "first_tools": offered_tools(first, "responses"),
        "first_request_text": json.dumps(first.get("instructions", "")) + json.dumps(first.get("input", [])),
        "outputs": outputs,
    }


def scenario_claude_broken_venv(work: Path) -> dict:
    """The documented setup, then the venv's interpreter gone (.mcp.json names a `spu` script whose `#!`
    interpreter no longer exists): what `claude -p` does, and what `spu config claude --check` says."""
    server = start_server(claude_headless)
    env = client_env(work, ANTHROPIC_API_KEY="sk-test-scripted", ANTHROPIC_BASE_URL=server.url)
    project = setup_claude_project(work, env)
    gone = work / "moved-venv" / "bin" / "python3"
    script = work / "moved-venv" / "bin" / "spu"
    script.parent.mkdir(parents=True)
    script.write_text(f"#!{gone}\nfrom spu.cli import main\nmain()\n")
    script.chmod(0o755)
    mcp = json.loads((project / ".mcp.json").read_text())
    mcp["mcpServers"]["spu"]["command"] = str(script)
    (project / ".mcp.json").write_text(json.dumps(mcp))
    command, settings = headless_claude("Call the system_info tool of the spu server.")
    result = run(command, env | settings, project)
    server.close()
    check = run([sys.executable, "-m", "spu", "config", "claude", "--check"], env, project, timeout=120)
    return {
        **result,
        "spu_tools_offered": spu_tools_offered(server),
        "check": check,
        "interpreter": str(gone),
    }


ENV_DUMP_SERVER = """import json, os, sys
with open(sys.argv[1], "w") as out:
    json.dump(sorted(os.environ), out)
from mcp.server.mcpserver import MCPServer
MCPServer("envdump").run("stdio")
"""


def place_task(work: Path, where: str) -> tuple[Path, Path]:
    """A copy of a demo task outside the project folder, and a draft for it inside the project: ``beside``
    the project (work/task) or in a folder standing for a container's /app (work/app/task)."""
    from environment.demo_tasks import demo_task_dir
    from spu_common.submission import fallback_submission
    from spu_common.task import load_task

    project = work / "project"
    project.mkdir(parents=True, exist_ok=True)
    task = work / "task" if where == "beside" else work / "app" / "task"
    shutil.copytree(demo_task_dir("aromatic-acidity"), task)
    draft = project / "rankings.json"
    draft.write_text(json.dumps(fallback_submission(load_task(task))))
    return task, draft


def task_steps(task: Path, draft: Path) -> list[tuple[str, dict]]:
    """ranking_check on the task and its draft, then a call with an invalid argument (its error result)."""
    return [
        ("ranking_check", {"task_dir": str(task), "draft_path": str(draft)}),
        ("chem_parse", {"molecules": 5}),
    ]


def scenario_claude_task(work: Path, where: str, registered: bool) -> dict:
    """`spu config claude --write --task-root TASK` (or without it), then `claude -p` against a scripted model
    that calls ranking_check on a task outside the project and chem_parse with an invalid argument."""
    task, draft = place_task(work, where)
    server = start_server(claude_steps(task_steps(task, draft)))
    env = client_env(work, ANTHROPIC_API_KEY="sk-test-scripted", ANTHROPIC_BASE_URL=server.url)
    project = draft.parent
    roots = ["--task-root", str(task)] if registered else []
    spu_config("claude", project, env, "--write", *roots)
    command, settings = headless_claude("Check the draft of the task.")
    result = run(command, env | settings, project, timeout=240)
    server.close()
    results = {b["tool_use_id"]: b for r in server.requests for b in tool_results(r["json"], r["wire"])}
    return {**result, "tool_results": [results.get(f"toolu_step_{i}") for i in range(2)]}


def scenario_codex_task(work: Path, where: str, registered: bool) -> dict:
    """`spu config codex --write --task-root TASK` (or without it), then `codex exec` against a scripted model
    that calls ranking_check on a task outside the project and chem_parse with an invalid argument. A
    second server of the same config records the names of the variables Codex gives a server."""
    task, draft = place_task(work, where)
    calls = task_steps(task, draft)
    server = start_server(
        codex_steps(lambda outputs: calls[len(outputs)] if len(outputs) < len(calls) else None)
    )
    codex_home = work / "codex-home"
    env = client_env(
        work, CODEX_HOME=str(codex_home), SCRIPTED_API_KEY="sk-test-scripted", SPU_PROBE_NOT_PASSED="1"
    )
    project = draft.parent
    roots = ["--task-root", str(task)] if registered else []
    spu_config("codex", project, env, "--write", *roots)
    dump, names = work / "envdump.py", work / "env-names.json"
    dump.write_text(ENV_DUMP_SERVER)
    envdump = (
        f"[mcp_servers.envdump]\ncommand = {json.dumps(sys.executable)}\n"
        f"args = {json.dumps([str(dump), str(names)])}\n\n"
    )
    config = codex_home / "config.toml"
    config.write_text(scripted_provider(server) + envdump + config.read_text())
    result = run(
        [str(BIN / "codex"), "exec", "--skip-git-repo-check", "--json", "Check the draft of the task."],
        env,
        project,
        timeout=240,
    )
    server.close()
    outputs: list = []
    for request in server.requests:  # the last request that sends outputs back holds them all
        outputs = [i.get("output") for i in tool_results(request["json"], request["wire"])] or outputs
    return {
        **result,
        "outputs": [o if isinstance(o, str) else json.dumps(o) for o in outputs],
        "env_names": json.loads(names.read_text()) if names.exists() else None,
        "parent_env_names": sorted(env),
    }


if __name__ == "__main__":
    name, work_dir = sys.argv[1], Path(sys.argv[2])
    scenarios = {
        "mcp-list": scenario_mcp_list,
        "inspector": scenario_inspector,
        "claude-headless": scenario_claude_headless,
        "codex-mcp-list": scenario_codex_mcp_list,
        "codex-exec": scenario_codex_exec,
        "claude-broken-venv": scenario_claude_broken_venv,
    }
    for where in ("beside", "app"):
        for registered in (True, False):
            suffix = f"{where}{'' if registered else '-unregistered'}"
            scenarios[f"claude-task-{suffix}"] = functools.partial(
                scenario_claude_task, where=where, registered=registered
            )
            scenarios[f"codex-task-{suffix}"] = functools.partial(
                scenario_codex_task, where=where, registered=registered
            )
    print(json.dumps(scenarios[name](work_dir)))
