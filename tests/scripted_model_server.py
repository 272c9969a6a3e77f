"""A real HTTP server on loopback that speaks the three model wire formats with scripted replies.

It stands in for OpenAI Chat Completions (``POST /chat/completions``), OpenAI Responses (``POST
/responses``) and Anthropic Messages (``POST /v1/messages``). A script is a list of replies, each either

* a turn: ``{"text": str, "tool_calls": [{"name", "arguments": dict | raw str}], "reasoning": str}``,
  rendered in the wire format of the request's path, or
* a raw HTTP reply: ``{"status": int, "headers": {...}, "body": dict | str}`` (errors, 429, 529 ...), or
* a callable ``(request_json) -> reply``.

When the script runs out, ``default`` (a turn) is sent. Every request is recorded (path, headers, raw
bytes, parsed JSON). Usage is reported the way providers do: prompt tokens ~ bytes / 4, and cached tokens
~ the bytes shared with the previous request's prefix / 4, which is how prefix caches behave.
``context_limit_chars`` makes the server refuse longer requests with each provider's overflow error.
Used by tests/agent and by bench/agent_loop.py.
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self

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
        script: list[Any] | None = None,
        *,
        default: dict[str, Any] | None = None,
        delay_s: float = 0.0,
        context_limit_chars: int | None = None,
    ) -> None:
        self.script = list(script or [])
        self.default = default or {"text": "Nothing more to do."}
        self.delay_s = delay_s
        self.context_limit_chars = context_limit_chars
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
                status, headers, body = server.handle(self.path, dict(self.headers), raw)
                data = (
                    body
                    if isinstance(body, bytes)
                    else (body.encode() if isinstance(body, str) else json.dumps(body).encode())
                )
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                for key, value in headers.items():
                    self.send_header(key, str(value))
                self.end_headers()
                self.wfile.write(data)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
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
        wire = (
            "anthropic"
            if path.endswith("/messages")
            else "responses"
            if path.endswith("/responses")
            else "chat"
        )
        try:
            request = json.loads(raw)
        except ValueError:
            return 400, {}, {"error": {"message": "bad json"}}
        overflow = self.context_limit_chars is not None and len(raw) > self.context_limit_chars
        with self._lock:
            previous = self.requests[-1]["raw"] if self.requests else b""
            self.requests.append(
                {
                    "path": path,
                    "wire": wire,
                    "headers": headers,
                    "raw": raw,
                    "json": request,
                    "time": time.monotonic(),
                    "overflow": overflow,
                }
            )
            if overflow:  # refused before the model sees it: the script does not advance
                status, body = OVERFLOW_ERRORS[wire]
                return status, {}, body
            reply = self.script.pop(0) if self.script else self.default
            self._counter += 1
            n = self._counter
        if self.delay_s:
            time.sleep(self.delay_s)
        if callable(reply):
            reply = reply(request)
        if "status" in reply:
            return reply["status"], reply.get("headers", {}), reply.get("body", {})
        prompt_tokens = len(raw) // 4
        cached_tokens = common_prefix(previous, raw) // 4 if previous else 0
        render = {"chat": render_chat, "responses": render_responses, "anthropic": render_anthropic}[wire]
        return 200, {}, render(reply, n, prompt_tokens, cached_tokens)


def _args_text(arguments: Any) -> str:
    return arguments if isinstance(arguments, str) else json.dumps(arguments)


def render_chat(turn: dict[str, Any], n: int, prompt: int, cached: int) -> dict[str, Any]:
    calls = [
        {
            "id": f"call_{n}_{i}",
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
        "model": "scripted",
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
        output.append(
            {
                "type": "function_call",
                "id": f"fc_{n}_{i}",
                "call_id": f"call_{n}_{i}",
                "name": c["name"],
                "arguments": _args_text(c.get("arguments", {})),
                "status": "completed",
            }
        )
    return {
        "id": f"resp_{n}",
        "object": "response",
        "status": "completed",
        "model": "scripted",
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
                "id": f"toolu_{n}_{i}",
                "name": c["name"],
                "input": args if isinstance(args, dict) else {"raw": args},
            }
        )
    has_tools = any(b["type"] == "tool_use" for b in content)
    return {
        "id": f"msg_{n}",
        "type": "message",
        "role": "assistant",
        "model": "scripted",
        "content": content,
        "stop_reason": "tool_use" if has_tools else "end_turn",
        "usage": {
            "input_tokens": prompt - cached,
            "output_tokens": 20,
            "cache_read_input_tokens": cached,
            "cache_creation_input_tokens": 0,
        },
    }
