"""A scripted OpenAI Responses server (streaming, as Codex reads it) that runs inside the agent's container,
on loopback, for a Harbor trial with Codex (tests/container/test_clients.py). Standard library only; the
submission is the one anthropic_server.py writes (each group in the order of ``targets.csv``).

The script: a ``function_call`` of the spu MCP server's ``system_info`` as soon as Codex offers it (Codex
lists an MCP server's tools once the server has started: until then a shell command ``sleep 1``, at most
sixty times); after its output, Codex's shell tool writing ``/app/output/rankings.json``; after that, a final
message. A WebSocket request gets 404, so Codex speaks plain HTTPS at once.
Every request is logged to ``model-server.jsonl`` in the temporary folder.

    python3 responses_server.py PORT
"""

from __future__ import annotations

import json
import sys
import tempfile
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from anthropic_server import submission

LOG = Path(tempfile.gettempdir()) / "model-server.jsonl"
SPU_TOOL = "system_info"
FINAL_TEXT = "Wrote /app/output/rankings.json."
MAX_WAITS = 60


def tool_names(tools: list[dict]) -> list[str]:
    """Function names offered in a Responses request; a namespaced one as ``namespace/name``."""
    names = []
    for tool in tools:
        if tool.get("type") == "namespace":
            names += [f"{tool.get('name', '')}/{inner.get('name', '')}" for inner in tool.get("tools") or []]
        elif tool.get("name"):
            names.append(tool["name"])
    return names


def function_call(offered: str, n: int, args: dict) -> dict:
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


def shell_call(offered: list[str], n: int, command: str) -> dict:
    """Codex's own shell tool, in whichever of its forms this version offers."""
    if "exec_command" in offered:
        return function_call("exec_command", n, {"cmd": command})
    if "shell_command" in offered:
        return function_call("shell_command", n, {"command": command})
    return function_call("shell", n, {"command": ["bash", "-lc", command]})


def reply(body: dict, n: int) -> dict:
    offered = tool_names(body.get("tools") or [])
    called = [i.get("name") or "" for i in body.get("input") or [] if i.get("type") == "function_call"]
    spu = next((t for t in offered if t.endswith("/" + SPU_TOOL) and "spu" in t), None)
    spu_at = next((k for k, name in enumerate(called) if name == SPU_TOOL), None)
    if spu_at is None and spu is not None:
        return function_call(spu, n, {})
    if spu_at is None and len(called) < MAX_WAITS:
        return shell_call(offered, n, "sleep 1")
    if not called[(spu_at if spu_at is not None else MAX_WAITS - 1) + 1 :]:
        return shell_call(offered, n, f"cat > /app/output/rankings.json <<'JSON'\n{submission()}\nJSON")
    return {
        "type": "message",
        "id": f"msg_{n}",
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": FINAL_TEXT, "annotations": []}],
    }


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    count = 0

    def log_message(self, *args) -> None:
        pass

    def do_GET(self) -> None:
        if self.path.endswith("/responses"):  # a WebSocket upgrade
            self._send(404, "application/json", b'{"error": {"message": "no websocket"}}')
            return
        self._send(200, "application/json", json.dumps({"object": "list", "data": [], "models": []}).encode())

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers.get("content-length") or 0)) or b"{}")
        if not self.path.endswith("/responses"):
            self._send(404, "application/json", b'{"error": {"message": "not scripted"}}')
            return
        Handler.count += 1
        item = reply(body, Handler.count)
        with LOG.open("a", encoding="utf-8") as fh:
            fh.write(json.dumps({"path": self.path, "body": body, "reply": item}) + "\n")
        response = {"id": f"resp_{Handler.count}", "object": "response", "status": "completed"}
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

    def _send(self, status: int, ctype: str, raw: bytes) -> None:
        self.send_response(status)
        self.send_header("content-type", ctype)
        self.send_header("content-length", str(len(raw)))
        self.end_headers()
        self.wfile.write(raw)


if __name__ == "__main__":
    ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Handler).serve_forever()
