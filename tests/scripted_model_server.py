"""A real HTTP server on loopback that speaks the three model wire formats with scripted replies: the one
stand-in for a model provider in the tests and benches (the reference agent's tests, the npm clients'
scenarios in tests/integration/npm_driver.py, the client trials of tests/container/test_clients.py, which run
it inside the agent's container, and bench/agent_loop.py). Standard library only, for that container.

The wire format is the request's path (a query string aside):

* OpenAI Chat Completions: ``POST .../chat/completions``;
* OpenAI Responses: ``POST .../responses``, as server-sent events when the request asks for a stream (as Codex
  reads them); a ``GET .../responses`` (Codex's WebSocket upgrade) gets 404, so Codex speaks plain HTTP;
* Anthropic Messages: ``POST .../messages``, as events when the request streams (as Claude Code reads them);
  ``POST .../count_tokens`` gets a count.

Any other ``POST`` gets 404; any other ``GET`` an empty model list. A script is a list of replies, each either

* a turn: ``{"text": str, "tool_calls": [{"name", "arguments": dict | raw str}], "reasoning": str}``,
  rendered in the wire format of the request; a tool call may name its ``id`` and (Responses) its
  ``namespace`` (:func:`tool_call` makes one from a name :func:`offered_tools` lists), or
* a raw HTTP reply: ``{"status": int, "headers": {...}, "body": dict | str}`` (errors, 429, 529 ...), or
* a callable ``(request_json, wire) -> reply``, ``wire`` one of ``chat``, ``responses``, ``anthropic``
  (:func:`offered_tools` and :func:`tool_results` read a request of any of them).

When the script runs out, ``default`` (a turn or a callable) is sent. Every model request is recorded (path,
wire, headers, raw bytes, parsed JSON, the reply), and with ``log_path`` appended to that file as a JSON line
(path, wire, json, reply). Usage is reported the way providers do: prompt tokens ~ bytes / 4, and cached
tokens ~ the bytes shared with the previous request's prefix / 4, which is how prefix caches behave.
``context_limit_chars`` makes the server refuse longer requests with each provider's overflow error.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Self
from urllib.parse import urlsplit

#: a scripted reply: a turn, a raw HTTP reply, or a callable of the request and its wire format
Reply = dict[str, Any] | Callable[[dict[str, Any], str], dict[str, Any]]

OVERFLOW_ERRORS = {
    "chat": (
        400,
        {
            "error": {
                "message": "This model's maximum context length is 8192 tokens. However, your "
                "messages resulted in 9000 tokens.",
                "type": "invalid_request_error",
                "code": "context_length_exceeded",
            }
        },
    ),
    "responses": (
        400,
        {
            "error": {
                "message": "Your input exceeds the context window of this model.",
                "type": "invalid_request_error",
                "code": "context_length_exceeded",
            }
        },
    ),
    "anthropic": (
        400,
        {
            "type": "error",
            "error": {
                "type": "invalid_request_error",
                "message": "prompt is too long: 210000 tokens > 200000 maximum",
            },
        },
    ),
}


def common_prefix(a: bytes, b: bytes) -> int:
    n = min(len(a), len(b))
    lo, hi = 0, n
    while lo < hi:  # binary search on slices: fast in C for long bodies
        mid = (lo + hi + 1) // 2
        if a[:mid] == b[:mid]:
            lo = mid
        else:
            hi = mid - 1
    return lo


class ScriptedModelServer:
    def __init__(
        self,
        script: list[Reply] | None = None,
        *,
        default: Reply | None = None,
        delay_s: float = 0.0,
        context_limit_chars: int | None = None,
        port: int = 0,
        log_path: Path | None = None,
    ) -> None:
        self.script = list(script or [])
        self.default = default or {"text": "Nothing more to do."}
        self.delay_s = delay_s
        self.context_limit_chars = context_limit_chars
        self.log_path = log_path
        self.requests: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self._counter = 0
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True  # else headers and body wait on delayed ACKs (40 ms a reply)

            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("content-length") or 0))
                self._send(*server.handle(self.path, dict(self.headers), raw))

            def do_GET(self) -> None:
                if urlsplit(self.path).path.endswith("/responses"):  # a WebSocket upgrade
                    self._send(404, {}, {"error": {"message": "no websocket here"}})
                else:
                    self._send(200, {}, {"object": "list", "data": [], "models": []})

            def do_HEAD(self) -> None:
                self.send_response(200)
                self.send_header("content-length", "0")
                self.end_headers()

            def _send(self, status: int, headers: dict[str, Any], body: Any) -> None:
                data = (
                    body
                    if isinstance(body, bytes)
                    else (body.encode() if isinstance(body, str) else json.dumps(body).encode())
                )
                self.send_response(status)
                headers = {"content-type": "application/json", **headers, "content-length": len(data)}
                for key, value in headers.items():
                    self.send_header(key, str(value))
                self.end_headers()
                self.wfile.write(data)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(
            target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def __enter__(self) -> Self:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    # -- replies ----------------------------------------------------------------------------------------

    def handle(self, path: str, headers: dict[str, str], raw: bytes) -> tuple[int, dict[str, Any], Any]:
        route = urlsplit(path).path
        if route.endswith("/count_tokens"):
            return 200, {}, {"input_tokens": len(raw) // 4}
        wire = next((w for end, w in WIRES.items() if route.endswith(end)), None)
        if wire is None:
            return 404, {}, {"error": {"message": f"not scripted: POST {route}"}}
        try:
            request = json.loads(raw)
        except ValueError:
            return 400, {}, {"error": {"message": "bad json"}}
        overflow = self.context_limit_chars is not None and len(raw) > self.context_limit_chars
        record = {
            "path": path,
            "wire": wire,
            "headers": headers,
            "raw": raw,
            "json": request,
            "time": time.monotonic(),
            "overflow": overflow,
        }
        with self._lock:
            previous = self.requests[-1]["raw"] if self.requests else b""
            self.requests.append(record)
            if overflow:  # refused before the model sees it: the script does not advance
                status, body = OVERFLOW_ERRORS[wire]
                return self._log(record, status, {}, body)
            reply = self.script.pop(0) if self.script else self.default
            self._counter += 1
            n = self._counter
        if self.delay_s:
            time.sleep(self.delay_s)
        if callable(reply):
            reply = reply(request, wire)
        if "status" in reply:
            return self._log(record, reply["status"], reply.get("headers", {}), reply.get("body", {}))
        prompt_tokens = len(raw) // 4
        cached_tokens = common_prefix(previous, raw) // 4 if previous else 0
        render = {"chat": render_chat, "responses": render_responses, "anthropic": render_anthropic}[wire]
        body = {"model": request.get("model") or "scripted", **render(reply, n, prompt_tokens, cached_tokens)}
        self._log(record, 200, {}, body)
        if request.get("stream") and wire in STREAMS:
            return (
                200,
                {"content-type": "text/event-stream", "cache-control": "no-cache"},
                STREAMS[wire](body),
            )
        return 200, {}, body

    def _log(
        self, record: dict[str, Any], status: int, headers: dict[str, Any], body: Any
    ) -> tuple[int, dict[str, Any], Any]:
        record["reply"] = body
        if self.log_path is not None:
            line = json.dumps({k: record[k] for k in ("path", "wire", "json", "reply")}) + "\n"
            with self._lock, self.log_path.open("a", encoding="utf-8") as fh:
                fh.write(line)
        return status, headers, body

    def serve_forever(self) -> None:
        """Serve in this thread until the process ends (the server run as a command)."""
        self.httpd.serve_forever()


#: the end of a request's path -> its wire format
WIRES = {"/chat/completions": "chat", "/responses": "responses", "/messages": "anthropic"}


def _args_text(arguments: Any) -> str:
    return arguments if isinstance(arguments, str) else json.dumps(arguments)


def render_chat(turn: dict[str, Any], n: int, prompt: int, cached: int) -> dict[str, Any]:
    calls = [
        {
            "id": c.get("id") or f"call_{n}_{i}",
            "type": "function",
            "function": {"name": c["name"], "arguments": _args_text(c.get("arguments", {}))},
        }
        for i, c in enumerate(turn.get("tool_calls") or [])
    ]
    message: dict[str, Any] = {"role": "assistant", "content": turn.get("text")}
    if calls:
        message["tool_calls"] = calls
    if turn.get("reasoning"):
        message["reasoning_content"] = turn["reasoning"]
    return {
        "id": f"chatcmpl-{n}",
        "object": "chat.completion",
        "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls" if calls else "stop"}],
        "usage": {
            "prompt_tokens": prompt,
            "completion_tokens": 20,
            "total_tokens": prompt + 20,
            "prompt_tokens_details": {"cached_tokens": cached},
        },
    }


def render_responses(turn: dict[str, Any], n: int, prompt: int, cached: int) -> dict[str, Any]:
    output: list[dict[str, Any]] = []
    if turn.get("reasoning"):
        output.append(
            {
                "type": "reasoning",
                "id": f"rs_{n}",
                "summary": [{"type": "summary_text", "text": turn["reasoning"]}],
                "encrypted_content": f"ENCRYPTED-{n}",
            }
        )
    if turn.get("text"):
        output.append(
            {
                "type": "message",
                "id": f"msg_{n}",
                "role": "assistant",
                "status": "completed",
                "content": [{"type": "output_text", "text": turn["text"], "annotations": []}],
            }
        )
    for i, c in enumerate(turn.get("tool_calls") or []):
        call = {
            "type": "function_call",
            "id": f"fc_{n}_{i}",
            "call_id": c.get("id") or f"call_{n}_{i}",
            "name": c["name"],
            "arguments": _args_text(c.get("arguments", {})),
            "status": "completed",
        }
        if c.get("namespace"):
            call["namespace"] = c["namespace"]
        output.append(call)
    return {
        "id": f"resp_{n}",
        "object": "response",
        "status": "completed",
        "output": output,
        "usage": {
            "input_tokens": prompt,
            "output_tokens": 20,
            "total_tokens": prompt + 20,
            "input_tokens_details": {"cached_tokens": cached},
            "output_tokens_details": {"reasoning_tokens": 10 if turn.get("reasoning") else 0},
        },
    }


def render_anthropic(turn: dict[str, Any], n: int, prompt: int, cached: int) -> dict[str, Any]:
    content: list[dict[str, Any]] = []
    if turn.get("reasoning"):
        content.append({"type": "thinking", "thinking": turn["reasoning"], "signature": f"SIG-{n}"})
    if turn.get("text"):
        content.append({"type": "text", "text": turn["text"]})
    for i, c in enumerate(turn.get("tool_calls") or []):
        args = c.get("arguments", {})
        content.append(
            {
                "type": "tool_use",
                "id": c.get("id") or f"toolu_{n}_{i}",
                "name": c["name"],
                "input": args if isinstance(args, dict) else {"raw": args},
            }
        )
    has_tools = any(b["type"] == "tool_use" for b in content)
    return {
        "id": f"msg_{n}",
        "type": "message",
        "role": "assistant",
        "content": content,
        "stop_reason": "tool_use" if has_tools else "end_turn",
        "usage": {
            "input_tokens": prompt - cached,
            "output_tokens": 20,
            "cache_read_input_tokens": cached,
            "cache_creation_input_tokens": 0,
        },
    }


# -- streams: a rendered reply as the events a streaming client reads ----------------------------------------


def _events(events: list[tuple[str, dict[str, Any]]]) -> bytes:
    return "".join(f"event: {name}\ndata: {json.dumps(data)}\n\n" for name, data in events).encode()


def stream_anthropic(message: dict[str, Any]) -> bytes:
    """An Anthropic message as Messages streaming events: the start, each content block, the stop."""
    start = {**message, "content": [], "stop_reason": None, "usage": {**message["usage"], "output_tokens": 1}}
    events = [("message_start", {"type": "message_start", "message": start})]
    for i, block in enumerate(message["content"]):
        if block["type"] == "text":
            first, deltas = {"type": "text", "text": ""}, [{"type": "text_delta", "text": block["text"]}]
        elif block["type"] == "thinking":
            first = {"type": "thinking", "thinking": ""}
            deltas = [
                {"type": "thinking_delta", "thinking": block["thinking"]},
                {"type": "signature_delta", "signature": block["signature"]},
            ]
        else:
            first = {**block, "input": {}}
            deltas = [{"type": "input_json_delta", "partial_json": json.dumps(block["input"])}]
        events.append(
            ("content_block_start", {"type": "content_block_start", "index": i, "content_block": first})
        )
        events += [
            ("content_block_delta", {"type": "content_block_delta", "index": i, "delta": d}) for d in deltas
        ]
        events.append(("content_block_stop", {"type": "content_block_stop", "index": i}))
    stop = {"stop_reason": message["stop_reason"], "stop_sequence": None}
    events += [
        ("message_delta", {"type": "message_delta", "delta": stop, "usage": {"output_tokens": 20}}),
        ("message_stop", {"type": "message_stop"}),
    ]
    return _events(events)


def stream_responses(response: dict[str, Any]) -> bytes:
    """A Responses reply as its streaming events: created, each output item added and done, completed."""
    events = [
        (
            "response.created",
            {"type": "response.created", "response": {**response, "status": "in_progress", "output": []}},
        )
    ]
    for i, item in enumerate(response["output"]):
        for event in ("response.output_item.added", "response.output_item.done"):
            events.append((event, {"type": event, "output_index": i, "item": item}))
    events.append(("response.completed", {"type": "response.completed", "response": response}))
    return _events(events)


STREAMS = {"anthropic": stream_anthropic, "responses": stream_responses}


# -- reading a request of any wire format --------------------------------------------------------------------


def offered_tools(request: dict[str, Any], wire: str) -> list[str]:
    """The names of the tools a request offers; a tool in a Responses namespace as ``namespace/name``."""
    names = []
    for tool in request.get("tools") or []:
        if wire == "chat":
            names.append((tool.get("function") or {}).get("name", ""))
        elif tool.get("type") == "namespace":
            names += [f"{tool.get('name', '')}/{inner.get('name', '')}" for inner in tool.get("tools") or []]
        elif tool.get("name"):
            names.append(tool["name"])
    return names


def tool_results(request: dict[str, Any], wire: str) -> list[dict[str, Any]]:
    """The tool results a request sends back, in order: Anthropic's ``tool_result`` blocks, Responses'
    ``function_call_output`` items, Chat's ``tool`` messages."""
    if wire == "responses":
        items = request.get("input")
        return (
            [i for i in items if i.get("type") == "function_call_output"] if isinstance(items, list) else []
        )
    if wire == "chat":
        return [m for m in request.get("messages") or [] if m.get("role") == "tool"]
    return [
        block
        for m in request.get("messages") or []
        if isinstance(m.get("content"), list)
        for block in m["content"]
        if isinstance(block, dict) and block.get("type") == "tool_result"
    ]


def tool_call(offered: str, arguments: dict[str, Any], call_id: str | None = None) -> dict[str, Any]:
    """A turn's tool call of a name :func:`offered_tools` listed (``namespace/name`` for Responses)."""
    namespace, _, name = offered.rpartition("/")
    call: dict[str, Any] = {"name": name, "arguments": arguments}
    if namespace:
        call["namespace"] = namespace
    if call_id:
        call["id"] = call_id
    return call
