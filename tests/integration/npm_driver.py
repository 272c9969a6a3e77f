"""Drives the real npm MCP clients against `spu serve`; run by test_npm_clients.py inside a network namespace
(`unshare -n`) that has only a loopback interface, so nothing the clients do can leave the machine.

    python npm_driver.py SCENARIO WORK_DIR      prints one JSON object

Scenarios: ``mcp-list`` (claude mcp list), ``codex-mcp-list`` (codex mcp list), ``inspector`` (MCP Inspector
CLI tools/list and tools/call),
``claude-headless`` (claude -p against a scripted Anthropic Messages server that answers with a tool_use of
mcp__spu__system_info, then with text once it has seen the tool_result), ``codex-exec`` (codex exec against
a scripted Responses server that calls system_info, a job tool, job_wait and job_cancel).
"""

from __future__ import annotations

import functools
import json
import os
import shlex
import shutil
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import ClassVar

from tools_server.commands.clients import claude_headless_command

REPO = Path(__file__).resolve().parents[2]
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


def setup_claude_project(work: Path, env: dict[str, str]) -> Path:
    """A project set up exactly as docs/claude-code.md says: `spu config claude --write` and `--skill`."""
    project = work / "project"
    project.mkdir(parents=True, exist_ok=True)
    for flag in ("--write", "--skill"):
        subprocess.run(
            [sys.executable, "-m", "spu", "config", "claude", flag],
            cwd=project,
            env=env,
            check=True,
            capture_output=True,
            timeout=60,
        )
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


class ScriptedAnthropic(BaseHTTPRequestHandler):
    """A scripted Anthropic Messages API: a tool_use of system_info first, text after the tool_result."""

    requests: ClassVar[list[dict]] = []

    def log_message(self, *args) -> None:
        pass

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers.get("content-length") or 0)) or b"{}")
        self.requests.append({"path": self.path, "body": body})
        if "count_tokens" in self.path:
            self._json({"input_tokens": 100})
            return
        content, stop = self.reply(body)
        message = {
            "id": f"msg_{len(self.requests)}",
            "type": "message",
            "role": "assistant",
            "model": body.get("model", "scripted"),
            "content": content,
            "stop_reason": stop,
            "stop_sequence": None,
            "usage": {"input_tokens": 100, "output_tokens": 20},
        }
        if body.get("stream"):
            self._stream(message)
        else:
            self._json(message)

    def reply(self, body: dict) -> tuple[list[dict], str]:
        """The content blocks and stop reason of the answer to ``body``."""
        tools = [t.get("name") for t in body.get("tools") or []]
        results = tool_results_in(body)
        skill = skill_tool(body.get("tools") or [])
        if results and len(results) == 1 and skill:
            tool_use = {
                "type": "tool_use",
                "id": "toolu_skill_1",
                "name": skill[0],
                "input": {skill[1]: SKILL},
            }
            return [tool_use], "tool_use"
        if results:
            return [{"type": "text", "text": FINAL_TEXT}], "end_turn"
        if TOOL in tools:
            return [{"type": "tool_use", "id": "toolu_spu_1", "name": TOOL, "input": {}}], "tool_use"
        return [{"type": "text", "text": "ok"}], "end_turn"  # side requests (titles, summaries)

    def do_GET(self) -> None:
        self.requests.append({"path": self.path, "method": "GET"})
        self._json({"data": []})

    def do_HEAD(self) -> None:
        self.send_response(200)
        self.end_headers()

    def _json(self, data: dict) -> None:
        raw = json.dumps(data).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(raw)))
        self.end_headers()
        self.wfile.write(raw)

    def _stream(self, message: dict) -> None:
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("cache-control", "no-cache")
        self.end_headers()
        content = message["content"]
        start = {
            **message,
            "content": [],
            "stop_reason": None,
            "usage": {"input_tokens": 100, "output_tokens": 1},
        }
        events = [("message_start", {"type": "message_start", "message": start})]
        for i, block in enumerate(content):
            if block["type"] == "text":
                events += [
                    (
                        "content_block_start",
                        {
                            "type": "content_block_start",
                            "index": i,
                            "content_block": {"type": "text", "text": ""},
                        },
                    ),
                    (
                        "content_block_delta",
                        {
                            "type": "content_block_delta",
                            "index": i,
                            "delta": {"type": "text_delta", "text": block["text"]},
                        },
                    ),
                ]
            else:
                events += [
                    (
                        "content_block_start",
                        {"type": "content_block_start", "index": i, "content_block": {**block, "input": {}}},
                    ),
                    (
                        "content_block_delta",
                        {
                            "type": "content_block_delta",
                            "index": i,
                            "delta": {"type": "input_json_delta", "partial_json": json.dumps(block["input"])},
                        },
                    ),
                ]
            events.append(("content_block_stop", {"type": "content_block_stop", "index": i}))
        events += [
            (
                "message_delta",
                {
                    "type": "message_delta",
                    "delta": {"stop_reason": message["stop_reason"], "stop_sequence": None},
                    "usage": {"output_tokens": 20},
                },
            ),
            ("message_stop", {"type": "message_stop"}),
        ]
        for name, data in events:
            self.wfile.write(f"event: {name}\ndata: {json.dumps(data)}\n\n".encode())
        self.wfile.flush()


def tool_results_in(body: dict) -> list[dict]:
    return [
        block
        for m in body.get("messages") or []
        if isinstance(m.get("content"), list)
        for block in m["content"]
        if block.get("type") == "tool_result"
    ]


class StepsAnthropic(ScriptedAnthropic):
    """Calls the spu tools of ``STEPS`` (name, input) one after the other, then ends with text."""

    STEPS: ClassVar[list[tuple[str, dict]]] = []

    def reply(self, body: dict) -> tuple[list[dict], str]:
        tools = [t.get("name") for t in body.get("tools") or []]
        done = len(tool_results_in(body))
        if f"mcp__spu__{self.STEPS[0][0]}" not in tools:
            return [{"type": "text", "text": "ok"}], "end_turn"
        if done < len(self.STEPS):
            name, args = self.STEPS[done]
            return [
                {"type": "tool_use", "id": f"toolu_step_{done}", "name": f"mcp__spu__{name}", "input": args}
            ], "tool_use"
        return [{"type": "text", "text": FINAL_TEXT}], "end_turn"


class ScriptedResponses(BaseHTTPRequestHandler):
    """A scripted OpenAI Responses API (streaming SSE, as Codex reads it). Each request gets the next step
    of the script, chosen from what the conversation holds so far: system_info, chem_parse with wait_s=0
    (a job), job_wait and job_cancel on that job's id, then a final message."""

    protocol_version = "HTTP/1.1"
    requests: ClassVar[list[dict]] = []
    STEPS = ("system_info", "chem_parse", "job_wait", "job_cancel")

    def log_message(self, *args) -> None:
        pass

    def do_GET(self) -> None:
        self.requests.append({"path": self.path, "method": "GET"})
        self._send(200, "application/json", json.dumps({"object": "list", "data": [], "models": []}).encode())

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers.get("content-length") or 0)) or b"{}")
        self.requests.append({"path": self.path, "body": body})
        if not self.path.endswith("/responses"):
            self._send(404, "application/json", b'{"error": {"message": "not scripted"}}')
            return
        offered = tool_names(body.get("tools") or [])
        outputs = [i for i in body.get("input") or [] if i.get("type") == "function_call_output"]
        n = len(self.requests)
        call = self.next_call(offered, outputs)
        if call is None:
            item = {
                "type": "message",
                "id": f"msg_{n}",
                "role": "assistant",
                "status": "completed",
                "content": [{"type": "output_text", "text": CODEX_FINAL_TEXT, "annotations": []}],
            }
        else:
            step, args = call
            name = next(t for t in offered if t.endswith("/" + step) and "spu" in t)
            item = function_call(name, n, args)
        response = {"id": f"resp_{n}", "object": "response", "status": "completed", "model": "scripted"}
        usage = {
            "input_tokens": 100,
            "output_tokens": 20,
            "total_tokens": 120,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens_details": {"reasoning_tokens": 0},
        }
        events = [
            (
                "response.created",
                {"type": "response.created", "response": {**response, "status": "in_progress"}},
            ),
            (
                "response.output_item.added",
                {"type": "response.output_item.added", "output_index": 0, "item": item},
            ),
            (
                "response.output_item.done",
                {"type": "response.output_item.done", "output_index": 0, "item": item},
            ),
            (
                "response.completed",
                {"type": "response.completed", "response": {**response, "output": [item], "usage": usage}},
            ),
        ]
        raw = "".join(f"event: {e}\ndata: {json.dumps(d)}\n\n" for e, d in events).encode()
        self._send(200, "text/event-stream", raw)

    def next_call(self, offered: list[str], outputs: list[dict]) -> tuple[str, dict] | None:
        """The next spu tool to call and its arguments, or None to end with the final message."""
        if not any(name.endswith("/system_info") for name in offered) or len(outputs) >= len(self.STEPS):
            return None
        step = self.STEPS[len(outputs)]
        args: dict = {}
        if step == "chem_parse":
            args = {"molecules": ["CCO"], "wait_s": 0}
        elif step in ("job_wait", "job_cancel"):
            args = {"job_id": job_id_in(outputs[1].get("output")) or "missing"}
            if step == "job_wait":
                args["wait_s"] = 120
        return step, args

    def _send(self, status: int, ctype: str, raw: bytes) -> None:
        self.send_response(status)
        self.send_header("content-type", ctype)
        self.send_header("content-length", str(len(raw)))
        self.end_headers()
        self.wfile.write(raw)


class StepsResponses(ScriptedResponses):
    """Calls the spu tools of ``CALLS`` (name, arguments) one after the other, then the final message."""

    CALLS: ClassVar[list[tuple[str, dict]]] = []

    def next_call(self, offered: list[str], outputs: list[dict]) -> tuple[str, dict] | None:
        if not any(name.endswith("/system_info") for name in offered) or len(outputs) >= len(self.CALLS):
            return None
        return self.CALLS[len(outputs)]


def tool_names(tools: list[dict]) -> list[str]:
    """Function names offered in a Responses request; a namespaced one as ``namespace/name``."""
    names = []
    for t in tools:
        if t.get("type") == "namespace":
            names += [f"{t.get('name', '')}/{inner.get('name', '')}" for inner in t.get("tools") or []]
        elif t.get("name"):
            names.append(t["name"])
    return names


def function_call(offered: str, n: int, args: dict) -> dict:
    """A function_call item for an offered name (``namespace/name`` carries its namespace)."""
    namespace, _, name = offered.rpartition("/")
    item = {
        "type": "function_call",
        "id": f"fc_{n}",
        "call_id": f"call_{n}",
        "name": name,
        "arguments": json.dumps(args),
        "status": "completed",
    }
    if namespace:
        item["namespace"] = namespace
    return item


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


def start_server(handler: type[BaseHTTPRequestHandler]) -> ThreadingHTTPServer:
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


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
    subprocess.run(
        [sys.executable, "-m", "spu", "config", "codex", "--write"],
        cwd=work,
        env=env,
        check=True,
        capture_output=True,
        timeout=60,
    )
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
    ScriptedAnthropic.requests = []
    server = start_server(ScriptedAnthropic)
    url = f"http://127.0.0.1:{server.server_address[1]}"
    env = client_env(work, ANTHROPIC_API_KEY="sk-test-scripted", ANTHROPIC_BASE_URL=url)
    project = setup_claude_project(work, env)
    # the documented headless command (spu config claude prints it), with this test's prompt and model
    words = shlex.split(claude_headless_command("Call the system_info tool of the spu server."))
    assignments = [w for w in words if "=" in w and w.split("=", 1)[0].isupper()]
    command = words[len(assignments) :]
    assert command[0] == "claude", words
    command[0] = str(BIN / "claude")
    env = env | dict(a.split("=", 1) for a in assignments)
    result = run([*command, "--model", "claude-sonnet-4-5"], env, project, timeout=240)
    server.shutdown()
    tool_results = []
    for request in ScriptedAnthropic.requests:
        for message in (request.get("body") or {}).get("messages") or []:
            if isinstance(message.get("content"), list):
                tool_results += [b for b in message["content"] if b.get("type") == "tool_result"]
    bodies = [r.get("body") or {} for r in ScriptedAnthropic.requests]
    main = [b for b in bodies if TOOL in [t.get("name") for t in b.get("tools") or []]]
    return {
        **result,
        "request_texts": [json.dumps(b.get("system", "")) + json.dumps(b.get("messages", [])) for b in main],
        "skill_tool": skill_tool(main[0].get("tools") or []) if main else None,
        "skill_tool_description": next(
            (t.get("description", "") for t in (main[0].get("tools") or []) if t.get("name") == "Skill"), ""
        )
        if main
        else "",
        "requests": len(ScriptedAnthropic.requests),
        "paths": sorted({r["path"] for r in ScriptedAnthropic.requests}),
        "tools_offered": sorted(
            {
                t.get("name")
                for r in ScriptedAnthropic.requests
                for t in (r.get("body") or {}).get("tools") or []
                if "spu" in t.get("name", "")
            }
        ),
        "tool_results": tool_results,
    }


def scenario_codex_exec(work: Path) -> dict:
    """`codex exec` with the block `spu config codex --write` wrote (and the AGENTS.md section of
    `spu config codex --agents-md`), against the scripted Responses server; nothing else configured but the
    model provider."""
    ScriptedResponses.requests = []
    server = start_server(ScriptedResponses)
    url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    codex_home = work / "codex-home"
    env = client_env(work, CODEX_HOME=str(codex_home), SCRIPTED_API_KEY="sk-test-scripted")
    project = work / "project"
    project.mkdir(parents=True, exist_ok=True)
    for flag in ("--write", "--agents-md"):
        subprocess.run(
            [sys.executable, "-m", "spu", "config", "codex", flag],
            cwd=project,
            env=env,
            check=True,
            capture_output=True,
            timeout=60,
        )
    provider = (
        'model = "scripted-model"\nmodel_provider = "scripted"\n\n'
        "[model_providers.scripted]\n"
        'name = "scripted"\n'
        f'base_url = "{url}"\n'
        'wire_api = "responses"\n'
        'env_key = "SCRIPTED_API_KEY"\n'
        "request_max_retries = 0\nstream_max_retries = 0\n\n"
    )
    config = codex_home / "config.toml"
    config.write_text(provider + config.read_text())
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
    server.shutdown()
    posts = [r for r in ScriptedResponses.requests if r.get("body") is not None]
    outputs = {}
    for request in posts:
        items = request["body"].get("input") or []
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
    first = posts[0]["body"] if posts else {}
    return {
        **result,
        "paths": sorted({r["path"] for r in ScriptedResponses.requests}),
        "first_tools": tool_names(first.get("tools") or []),
        "first_request_text": json.dumps(first.get("instructions", "")) + json.dumps(first.get("input", [])),
        "outputs": outputs,
        "final_text": CODEX_FINAL_TEXT,
    }


def scenario_claude_broken_venv(work: Path) -> dict:
    """The documented setup, then the venv's interpreter gone (.mcp.json names a `spu` script whose `#!`
    interpreter no longer exists): what `claude -p` does, and what `spu config claude --check` says."""
    ScriptedAnthropic.requests = []
    server = start_server(ScriptedAnthropic)
    url = f"http://127.0.0.1:{server.server_address[1]}"
    env = client_env(work, ANTHROPIC_API_KEY="sk-test-scripted", ANTHROPIC_BASE_URL=url)
    project = setup_claude_project(work, env)
    gone = work / "moved-venv" / "bin" / "python3"
    script = work / "moved-venv" / "bin" / "spu"
    script.parent.mkdir(parents=True)
    script.write_text(f"#!{gone}\nfrom spu.cli import main\nmain()\n")
    script.chmod(0o755)
    mcp = json.loads((project / ".mcp.json").read_text())
    mcp["mcpServers"]["spu"]["command"] = str(script)
    (project / ".mcp.json").write_text(json.dumps(mcp))
    words = shlex.split(claude_headless_command("Call the system_info tool of the spu server."))
    assignments = [w for w in words if "=" in w and w.split("=", 1)[0].isupper()]
    command = [str(BIN / "claude"), *words[len(assignments) + 1 :]]
    result = run(
        [*command, "--model", "claude-sonnet-4-5"], env | dict(a.split("=", 1) for a in assignments), project
    )
    server.shutdown()
    check = run([sys.executable, "-m", "spu", "config", "claude", "--check"], env, project, timeout=120)
    offered = {
        t.get("name")
        for r in ScriptedAnthropic.requests
        for t in (r.get("body") or {}).get("tools") or []
        if "spu" in t.get("name", "")
    }
    return {**result, "spu_tools_offered": sorted(offered), "check": check, "interpreter": str(gone)}


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
    StepsAnthropic.requests = []
    StepsAnthropic.STEPS = task_steps(task, draft)
    server = start_server(StepsAnthropic)
    url = f"http://127.0.0.1:{server.server_address[1]}"
    env = client_env(work, ANTHROPIC_API_KEY="sk-test-scripted", ANTHROPIC_BASE_URL=url)
    project = draft.parent
    roots = ["--task-root", str(task)] if registered else []
    subprocess.run(
        [sys.executable, "-m", "spu", "config", "claude", "--write", *roots],
        cwd=project,
        env=env,
        check=True,
        capture_output=True,
        timeout=60,
    )
    words = shlex.split(claude_headless_command("Check the draft of the task."))
    assignments = [w for w in words if "=" in w and w.split("=", 1)[0].isupper()]
    command = [str(BIN / "claude"), *words[len(assignments) + 1 :]]
    env = env | dict(a.split("=", 1) for a in assignments)
    result = run([*command, "--model", "claude-sonnet-4-5"], env, project, timeout=240)
    server.shutdown()
    results = {}
    for request in StepsAnthropic.requests:
        for block in tool_results_in(request.get("body") or {}):
            results[block["tool_use_id"]] = block
    return {**result, "tool_results": [results.get(f"toolu_step_{i}") for i in range(2)]}


def scenario_codex_task(work: Path, where: str, registered: bool) -> dict:
    """`spu config codex --write --task-root TASK` (or without it), then `codex exec` against a scripted model
    that calls ranking_check on a task outside the project and chem_parse with an invalid argument. A
    second server of the same config records the names of the variables Codex gives a server."""
    task, draft = place_task(work, where)
    StepsResponses.requests = []
    StepsResponses.CALLS = task_steps(task, draft)
    server = start_server(StepsResponses)
    url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    codex_home = work / "codex-home"
    env = client_env(
        work, CODEX_HOME=str(codex_home), SCRIPTED_API_KEY="sk-test-scripted", SPU_PROBE_NOT_PASSED="1"
    )
    project = draft.parent
    roots = ["--task-root", str(task)] if registered else []
    subprocess.run(
        [sys.executable, "-m", "spu", "config", "codex", "--write", *roots],
        cwd=project,
        env=env,
        check=True,
        capture_output=True,
        timeout=60,
    )
    dump, names = work / "envdump.py", work / "env-names.json"
    dump.write_text(ENV_DUMP_SERVER)
    provider = (
        'model = "scripted-model"\nmodel_provider = "scripted"\n\n'
        f'[model_providers.scripted]\nname = "scripted"\nbase_url = "{url}"\nwire_api = "responses"\n'
        'env_key = "SCRIPTED_API_KEY"\nrequest_max_retries = 0\nstream_max_retries = 0\n\n'
        f"[mcp_servers.envdump]\ncommand = {json.dumps(sys.executable)}\n"
        f"args = {json.dumps([str(dump), str(names)])}\n\n"
    )
    config = codex_home / "config.toml"
    config.write_text(provider + config.read_text())
    result = run(
        [str(BIN / "codex"), "exec", "--skip-git-repo-check", "--json", "Check the draft of the task."],
        env,
        project,
        timeout=240,
    )
    server.shutdown()
    outputs = []
    for request in StepsResponses.requests:
        items = (request.get("body") or {}).get("input") or []
        outputs = [i.get("output") for i in items if i.get("type") == "function_call_output"] or outputs
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
