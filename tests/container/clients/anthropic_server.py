"""A scripted Anthropic Messages server (streaming) that runs inside the agent's container, on loopback, for
a Harbor trial with Claude Code (tests/container/test_clients.py). Standard library only.

The script: when the spu MCP server's tools are offered and no tool has run yet, a ``tool_use`` of the spu
tool ``system_info``; after its result, a ``tool_use`` of Claude Code's ``Write`` with a valid
``/app/output/rankings.json`` (each group in the order of ``targets.csv``); after that, a final text. Side
requests (titles, summaries) get plain text. Every request is logged to ``model-server.jsonl`` in the
temporary folder.

    python3 anthropic_server.py PORT
"""

from __future__ import annotations

import csv
import json
import sys
import tempfile
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

TASK = Path("/app/task")
LOG = Path(tempfile.gettempdir()) / "model-server.jsonl"
SPU_TOOL = "system_info"


def submission() -> str:
    contract = json.loads((TASK / "contract.json").read_text(encoding="utf-8"))
    groups: dict[str, list[str]] = {}
    with (TASK / "targets.csv").open(encoding="utf-8") as fh:
        for row in csv.DictReader(fh):
            groups.setdefault(row["group_id"], []).append(row["experiment_id"])
    return json.dumps(
        {
            "task_id": contract["task_id"],
            "task_version": contract["task_version"],
            "rankings": [{"group_id": g, "order": order} for g, order in groups.items()],
        },
        indent=1,
    )


def reply(body: dict) -> tuple[list[dict], str]:
    tools = [t.get("name", "") for t in body.get("tools") or []]
    spu_tool = next((t for t in tools if t.startswith("mcp__spu__") and t.endswith(SPU_TOOL)), None)
    results = [
        block
        for m in body.get("messages") or []
        if isinstance(m.get("content"), list)
        for block in m["content"]
        if isinstance(block, dict) and block.get("type") == "tool_result"
    ]
    if spu_tool is None:
        return [{"type": "text", "text": "ok"}], "end_turn"
    if not results:
        return [{"type": "tool_use", "id": "toolu_spu_1", "name": spu_tool, "input": {}}], "tool_use"
    if len(results) == 1:
        write = {"file_path": "/app/output/rankings.json", "content": submission()}
        return [{"type": "tool_use", "id": "toolu_write_1", "name": "Write", "input": write}], "tool_use"
    return [{"type": "text", "text": "Wrote /app/output/rankings.json."}], "end_turn"


class Handler(BaseHTTPRequestHandler):
    def log_message(self, *args) -> None:
        pass

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers.get("content-length") or 0)) or b"{}")
        if "count_tokens" in self.path:
            self._json({"input_tokens": 100})
            return
        content, stop = reply(body)
        with LOG.open("a", encoding="utf-8") as fh:
            fh.write(json.dumps({"path": self.path, "body": body, "reply": content}) + "\n")
        message = {
            "id": "msg_scripted",
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
        start = {
            **message,
            "content": [],
            "stop_reason": None,
            "usage": {"input_tokens": 100, "output_tokens": 1},
        }
        events = [("message_start", {"type": "message_start", "message": start})]
        for i, block in enumerate(message["content"]):
            if block["type"] == "text":
                first = {"type": "text", "text": ""}
                delta = {"type": "text_delta", "text": block["text"]}
            else:
                first = {**block, "input": {}}
                delta = {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
            events += [
                ("content_block_start", {"type": "content_block_start", "index": i, "content_block": first}),
                ("content_block_delta", {"type": "content_block_delta", "index": i, "delta": delta}),
                ("content_block_stop", {"type": "content_block_stop", "index": i}),
            ]
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


if __name__ == "__main__":
    ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Handler).serve_forever()
