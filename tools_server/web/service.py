"""The audit service (``spu audit serve``) and the client the MCP server uses to forward web calls to it.

The service holds the policy and the audit log outside the agent's container and performs the web calls
itself. Protocol (JSON over HTTP, every request carries ``Authorization: Bearer <token>``):

* ``POST /v1/call`` with ``{"tool": "web_fetch", "args": {...}, "call_id": "..."}`` answers
  ``{"ok": true, "result": {...}}`` or ``{"ok": false, "error": {"code", "message", "hint"}}``;
* ``GET /v1/health`` answers ``{"ok": true, "records": N, "mode": "observe"|"enforce"|null}``
  (the mode, never the identifiers);
* a missing or wrong token gets HTTP 401; two ``Authorization`` headers 400; a ``Host`` other than a
  loopback name (when bound to loopback) 421; a body over 1 MiB 413, one slower than 30 s 408
  (:func:`tools_server.plugin.guard_requests`).

The MCP server forwards when ``SPU_AUDIT_URL`` and ``SPU_AUDIT_TOKEN`` are set (:class:`RemoteGateway`);
it then never reads a policy itself.
"""

from __future__ import annotations

import hashlib
import os
import socket
import sys
from pathlib import Path
from typing import Any

from tools_server.plugin import ToolError, guard_requests, uvicorn_options

AUDIT_URL_ENV = "SPU_AUDIT_URL"
AUDIT_TOKEN_ENV = "SPU_AUDIT_TOKEN"


class CannotListen(RuntimeError):
    """The service's address cannot be bound (a usage error for ``spu audit serve``)."""


#: Largest request body the service reads (a web call's arguments are a few KB).
MAX_BODY_BYTES = 1 * 2**20


def build_app(gateway: Any, token: str, allowed_hosts: list[str] | None = None):
    """The Starlette application serving ``gateway`` behind ``token``, wrapped in the server's request
    checks (:func:`tools_server.plugin.guard_requests`: one Authorization header, Host, token, body size
    and time)."""
    from starlette.applications import Starlette
    from starlette.concurrency import run_in_threadpool
    from starlette.requests import Request
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    if not token:
        raise ValueError("the audit service needs a non-empty token")

    async def call(request: Request) -> JSONResponse:
        try:
            body = await request.json()
            tool, args = body["tool"], body.get("args") or {}
            if not isinstance(tool, str) or not isinstance(args, dict):
                raise TypeError
        except (ValueError, KeyError, TypeError):
            return JSONResponse(
                {
                    "ok": False,
                    "error": {"code": "invalid_input", "message": "body must be {tool, args, call_id}"},
                },
                400,
            )
        try:
            result = await run_in_threadpool(gateway.call, tool, args, body.get("call_id"))
        except ToolError as exc:
            return JSONResponse({"ok": False, "error": exc.to_dict()})
        return JSONResponse({"ok": True, "result": result})

    async def health(request: Request) -> JSONResponse:
        count = await run_in_threadpool(_count_lines, gateway.audit.path)
        mode = gateway.policy.mode if gateway.policy else None
        return JSONResponse({"ok": True, "records": count, "mode": mode})

    app = Starlette(routes=[Route("/v1/call", call, methods=["POST"]), Route("/v1/health", health)])
    return guard_requests(app, max_body_bytes=MAX_BODY_BYTES, token=token, allowed_hosts=allowed_hosts)


def serve(
    *,
    log_path: Path,
    token: str,
    policy_path: Path | None = None,
    host: str = "127.0.0.1",
    port: int = 8765,
    workdir: Path | None = None,
    key_file: Path | None = None,
) -> None:
    """Run the audit service until interrupted; prints ``{"url": ...}`` on stdout once listening. The
    log's HMAC key is read from ``key_file`` (default ``LOG.key``, created when missing)."""
    import uvicorn

    from spu_common.audit_log import key_path
    from spu_common.console import echo_json
    from tools_server.web.audit import load_or_create_key
    from tools_server.web.gateway import Gateway
    from tools_server.web.policy import Policy

    policy = Policy.load(policy_path) if policy_path else None
    # the chain is keyed with a secret kept beside the log, out of the agent's reach: forged records fail
    key = load_or_create_key(key_file or key_path(Path(log_path)))
    gateway = Gateway(log_path, policy=policy, workdir=workdir, key=key)
    gateway.audit.append(
        {
            "kind": "service",
            "event": "start",
            "pid": os.getpid(),
            "policy_sha256": hashlib.sha256(policy_path.read_bytes()).hexdigest() if policy_path else None,
            "mode": policy.mode if policy else None,
        }
    )
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:  # the address is taken or not this machine's
        sock.close()
        raise CannotListen(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    sock.listen(128)
    bound = sock.getsockname()[1]
    shown = f"[{host}]" if ":" in host else host
    echo_json({"url": f"http://{shown}:{bound}"}, one_line=True)
    from tools_server.plugin import is_loopback

    # bound to loopback, only loopback names are valid Host values (DNS rebinding); elsewhere the token
    # alone guards the service (its clients reach it by addresses this process cannot know)
    hosts = [f"127.0.0.1:{bound}", f"localhost:{bound}", f"[::1]:{bound}"] if is_loopback(host) else None
    config = uvicorn.Config(
        build_app(gateway, token, hosts), log_level="warning", access_log=False, **uvicorn_options()
    )
    server = uvicorn.Server(config)
    try:
        server.run(sockets=[sock])
    finally:
        gateway.client.close()
        sys.stdout.flush()


def _count_lines(path: Path) -> int:
    if not path.exists():
        return 0
    with open(path, "rb") as fh:
        return sum(1 for _ in fh)


class RemoteGateway:
    """Forwards web tool calls to an audit service; same ``call`` signature as the embedded gateway."""

    def __init__(self, url: str, token: str, *, timeout_s: float = 600.0) -> None:
        import httpx

        self.url = url.rstrip("/")
        self._http = httpx.Client(
            trust_env=False,
            timeout=httpx.Timeout(timeout_s, connect=10.0),
            headers={"Authorization": f"Bearer {token}"},
        )

    def call(self, tool: str, args: dict[str, Any], call_id: str | None = None) -> dict[str, Any]:
        import httpx

        try:
            response = self._http.post(
                f"{self.url}/v1/call", json={"tool": tool, "args": args, "call_id": call_id}
            )
        except httpx.HTTPError as exc:
            raise ToolError(
                "http_error",
                f"the audit service at {self.url} is unreachable: {exc}",
                hint="Web tools are unavailable until the audit service is back; tell the operator.",
            ) from exc
        if response.status_code == 401:
            raise ToolError(
                "http_error",
                "the audit service rejected this server's token",
                hint="The operator must set SPU_AUDIT_TOKEN to the service's token.",
            )
        try:
            body = response.json()
        except ValueError:
            raise ToolError(
                "http_error", f"the audit service answered HTTP {response.status_code} without JSON"
            ) from None
        if body.get("ok"):
            return body["result"]
        error = body.get("error") or {}
        code = error.get("code") if error.get("code") in _codes() else "http_error"
        raise ToolError(
            code,
            error.get("message", "the audit service reported an error"),
            error.get("hint"),
            **(error.get("details") or {}),
        )

    def close(self) -> None:
        self._http.close()


def _codes() -> dict[str, str]:
    from tools_server.plugin import ERROR_CODES

    return ERROR_CODES
