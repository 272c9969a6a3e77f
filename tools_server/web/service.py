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

The service listens on a TCP address (``--host``/``--port``) or on a Unix socket (``--socket PATH``): the
strict Harbor setting gives the agent's container no network at all and shares only the socket's folder
with the service's container (docs/harbor.md). The socket file is made with mode :data:`SOCKET_MODE` (its
owner and group may connect) before anyone can connect to it; the token is required on it as on TCP.

The MCP server forwards when ``SPU_AUDIT_URL`` and ``SPU_AUDIT_TOKEN`` are set (:class:`RemoteGateway`);
it then never reads a policy itself. ``SPU_AUDIT_URL`` is ``http://HOST:PORT`` (or ``https://``) or
``unix:///absolute/path.sock`` (:func:`parse_audit_url`).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import socket
import stat
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from tools_server.plugin import ToolError, guard_requests, uvicorn_options

AUDIT_URL_ENV = "SPU_AUDIT_URL"
AUDIT_TOKEN_ENV = "SPU_AUDIT_TOKEN"
#: the mode of the service's Unix socket: its owner and group may connect, nobody else
SOCKET_MODE = 0o660
URL_ADVICE = "Use http://HOST:PORT or unix:///absolute/path.sock (three slashes)."


@dataclass(frozen=True)
class AuditAddress:
    """Where an audit service listens: ``base_url`` for requests, over ``socket_path`` when it is set."""

    url: str
    base_url: str
    socket_path: str | None = None


def parse_audit_url(url: str) -> AuditAddress:
    """The address of ``SPU_AUDIT_URL``: ``http(s)://HOST[:PORT]``, or ``unix:///ABSOLUTE/PATH`` for a Unix
    socket (requests then go to ``http://localhost`` through it). Raises ``ValueError`` saying what is
    wrong."""
    given = url.strip()
    parts = urlsplit(given)
    if parts.scheme == "unix":
        if parts.netloc or not parts.path.startswith("/") or parts.query or parts.fragment:
            raise ValueError(f"{given!r} is not a Unix socket address. {URL_ADVICE}")
        return AuditAddress(given, "http://localhost", parts.path)
    if parts.scheme in ("http", "https") and parts.hostname:
        return AuditAddress(given, given.rstrip("/"))
    raise ValueError(f"{given!r} is not an audit service address. {URL_ADVICE}")


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
    socket_path: Path | None = None,
    workdir: Path | None = None,
    key_file: Path | None = None,
) -> None:
    """Run the audit service until interrupted, on ``host``:``port`` or, when ``socket_path`` is given, on
    that Unix socket; prints ``{"url": ...}`` on stdout once listening. The log's HMAC key is read from
    ``key_file`` (default ``LOG.key``, created when missing)."""
    import uvicorn

    from spu_common.audit_log import key_path
    from spu_common.console import echo_json
    from tools_server.plugin import is_loopback
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
    if socket_path is not None:
        sock, url = _unix_listener(socket_path)
        made = os.lstat(socket_path.absolute())
        # no Host check: a Unix socket is out of a browser's reach (DNS rebinding); the token guards it
        hosts = None
    else:
        sock, url = _tcp_listener(host, port)
        bound = sock.getsockname()[1]
        # bound to loopback, only loopback names are valid Host values (DNS rebinding); elsewhere the token
        # alone guards the service (its clients reach it by addresses this process cannot know)
        hosts = [f"127.0.0.1:{bound}", f"localhost:{bound}", f"[::1]:{bound}"] if is_loopback(host) else None
    echo_json({"url": url}, one_line=True)
    config = uvicorn.Config(
        build_app(gateway, token, hosts), log_level="warning", access_log=False, **uvicorn_options()
    )

    class Server(uvicorn.Server):
        # uvicorn ends the process by the signal it caught once it has shut down: tidy up here, not after run
        async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
            await super().shutdown(sockets)
            gateway.client.close()
            if socket_path is not None:
                _remove_own_socket(socket_path.absolute(), made)

    try:
        Server(config).run(sockets=[sock])
    finally:
        sys.stdout.flush()


def _tcp_listener(host: str, port: int) -> tuple[socket.socket, str]:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:  # the address is taken or not this machine's
        sock.close()
        raise CannotListen(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    sock.listen(128)
    shown = f"[{host}]" if ":" in host else host
    return sock, f"http://{shown}:{sock.getsockname()[1]}"


def _unix_listener(path: Path) -> tuple[socket.socket, str]:
    """A listening Unix socket at ``path``, made with mode :data:`SOCKET_MODE` (by the umask at ``bind``, so
    it is never more open, not even for an instant). A socket left by a service that ended is replaced;
    anything else at ``path`` (a file, a live service) is a :class:`CannotListen`."""
    path = path.absolute()
    try:
        found = os.lstat(path)
    except FileNotFoundError:
        found = None
    except OSError as exc:
        raise CannotListen(f"cannot listen on {path}: {exc.strerror}") from None
    if found is not None:
        if not stat.S_ISSOCK(found.st_mode):
            raise CannotListen(
                f"cannot listen on {path}: it exists and is not a socket; remove it or choose another path"
            )
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
            try:
                probe.connect(str(path))
            except ConnectionRefusedError:
                os.unlink(path)  # a socket nobody listens on any more
            except OSError as exc:
                raise CannotListen(f"cannot listen on {path}: {exc.strerror or exc}") from None
            else:
                raise CannotListen(f"cannot listen on {path}: another service listens there")
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    previous = os.umask(0o777 & ~SOCKET_MODE)
    try:
        sock.bind(str(path))
    except OSError as exc:  # no such folder, not writable, a path longer than the 107 bytes allowed
        sock.close()
        raise CannotListen(f"cannot listen on {path}: {exc.strerror or exc}") from None
    finally:
        os.umask(previous)
    sock.listen(128)
    return sock, f"unix://{path}"


def _remove_own_socket(path: Path, made: os.stat_result) -> None:
    """Remove the socket file at ``path`` when it is still the one this service made."""
    with contextlib.suppress(FileNotFoundError):
        if (os.lstat(path).st_dev, os.lstat(path).st_ino) == (made.st_dev, made.st_ino):
            os.unlink(path)


def _count_lines(path: Path) -> int:
    if not path.exists():
        return 0
    with open(path, "rb") as fh:
        return sum(1 for _ in fh)


class RemoteGateway:
    """Forwards web tool calls to an audit service; same ``call`` signature as the embedded gateway.
    ``url`` is read by :func:`parse_audit_url` (``ValueError`` when it is not an address)."""

    def __init__(self, url: str, token: str, *, timeout_s: float = 600.0) -> None:
        import httpx

        address = parse_audit_url(url)
        self.url = address.url
        self._calls = f"{address.base_url}/v1/call"
        self._http = httpx.Client(
            trust_env=False,
            timeout=httpx.Timeout(timeout_s, connect=10.0),
            headers={"Authorization": f"Bearer {token}"},
            transport=httpx.HTTPTransport(uds=address.socket_path) if address.socket_path else None,
        )

    def call(self, tool: str, args: dict[str, Any], call_id: str | None = None) -> dict[str, Any]:
        import httpx

        try:
            response = self._http.post(self._calls, json={"tool": tool, "args": args, "call_id": call_id})
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
