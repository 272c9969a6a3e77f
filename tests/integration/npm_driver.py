"""Drives the real npm MCP clients against `spu serve`; run by test_npm_clients.py inside a network namespace
(`unshare -n`) that has only a loopback interface, so nothing the clients do can leave the machine.

    python npm_driver.py SCENARIO WORK_DIR      prints one JSON object

Scenarios: ``mcp-list`` (claude mcp list), ``codex-mcp-list`` (codex mcp list), ``inspector`` (MCP Inspector
CLI tools/list and tools/call),
``claude-headless`` (claude -p against a scripted Anthropic Messages server that answers with a tool_use of
mcp__spu__system_info, then with text once it has seen the tool_result).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import ClassVar

REPO = Path(__file__).resolve().parents[2]
BIN = Path(os.environ.get("SPU_NPM_PREFIX") or REPO / ".npm-clients") / "node_modules" / ".bin"
FINAL_TEXT = "The spu server reports its hardware."
TOOL = "mcp__spu__system_info"

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
    # MCP tools are offered to the model directly rather than behind Claude Code's ToolSearch
    "ENABLE_TOOL_SEARCH": "false",
    # claude -p waits for the MCP servers to connect before its first request
    "MCP_CONNECTION_NONBLOCKING": "false",
}
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
    env = {k: v for k, v in os.environ.items() if k not in PROXY_VARS and not k.startswith("ANTHROPIC_")}
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
    """A project with .mcp.json from `spu config claude --write`, approved in Claude Code's config."""
    project = work / "project"
    project.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        [sys.executable, "-m", "spu", "config", "claude", "--write"],
        cwd=project,
        env=env,
        check=True,
        capture_output=True,
        timeout=60,
    )
    config_dir = Path(env["CLAUDE_CONFIG_DIR"])
    config_dir.mkdir(parents=True, exist_ok=True)
    # what answering the trust and .mcp.json approval prompts interactively would record
    config = {
        "hasCompletedOnboarding": True,
        "projects": {
            str(project): {
                "hasTrustDialogAccepted": True,
                "enabledMcpjsonServers": ["spu"],
                "enableAllProjectMcpServers": True,
            }
        },
    }
    (config_dir / ".claude.json").write_text(json.dumps(config))
    return project


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
        tools = [t.get("name") for t in body.get("tools") or []]
        results = [
            block
            for m in body.get("messages") or []
            if isinstance(m.get("content"), list)
            for block in m["content"]
            if block.get("type") == "tool_result"
        ]
        if results:
            content = [{"type": "text", "text": FINAL_TEXT}]
            stop = "end_turn"
        elif TOOL in tools:
            content = [{"type": "tool_use", "id": "toolu_spu_1", "name": TOOL, "input": {}}]
            stop = "tool_use"
        else:  # side requests (titles, summaries): plain text
            content = [{"type": "text", "text": "ok"}]
            stop = "end_turn"
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
    result = run(
        [
            str(BIN / "claude"),
            "-p",
            "Call the system_info tool of the spu server and summarize it.",
            "--output-format",
            "json",
            "--allowedTools",
            TOOL,
            "--model",
            "claude-sonnet-4-5",
            "--max-turns",
            "4",
        ],
        env,
        project,
        timeout=240,
    )
    server.shutdown()
    tool_results = []
    for request in ScriptedAnthropic.requests:
        for message in (request.get("body") or {}).get("messages") or []:
            if isinstance(message.get("content"), list):
                tool_results += [b for b in message["content"] if b.get("type") == "tool_result"]
    return {
        **result,
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


if __name__ == "__main__":
    name, work_dir = sys.argv[1], Path(sys.argv[2])
    scenarios = {
        "mcp-list": scenario_mcp_list,
        "inspector": scenario_inspector,
        "claude-headless": scenario_claude_headless,
        "codex-mcp-list": scenario_codex_mcp_list,
    }
    print(json.dumps(scenarios[name](work_dir)))
