"""The MCP server: the registry's tools over stdio or streamable HTTP.

``SpuServer`` is the official SDK's ``MCPServer`` with tool listing and calling routed to our registry and
:class:`~tools_server.core.dispatch.Dispatcher`; this is the one place where a :class:`ToolError` becomes an
MCP
error result (``isError``).
"""

from __future__ import annotations

import hmac
import ipaddress
import json
import logging
import math
from typing import Any

import anyio
from mcp.server.mcpserver import MCPServer
from mcp.types import CallToolResult, TextContent, Tool, ToolAnnotations

from tools_server import __version__
from tools_server.core.dispatch import Dispatcher
from tools_server.core.errors import ToolError
from tools_server.core.framing import guard_http, serve_stdio
from tools_server.core.registry import ToolSpec
from tools_server.core.server_tools import SERVER_TOOLS

log = logging.getLogger(__name__)

INSTRUCTIONS = """\
Tools for predicting wet-lab outcomes: audited web search and fetch, cheminformatics (RDKit), xTB and DFT,
molecular dynamics, protein models and ranking helpers. Call system_info first. Compute tools run as jobs:
if a call answers {status: running, job_id}, poll it with job_wait. Results carry provenance; big outputs
are files under the server's work directory. Errors carry a stable code and a hint for recovery."""


def mcp_tool(spec: ToolSpec) -> Tool:
    return Tool(
        name=spec.name,
        title=spec.title,
        description=spec.description,
        input_schema=spec.input_schema(),
        annotations=ToolAnnotations(
            title=spec.title,
            read_only_hint=spec.read_only,
            destructive_hint=spec.destructive,
            idempotent_hint=spec.idempotent,
            open_world_hint=spec.open_world,
        ),
    )


def error_result(exc: ToolError) -> CallToolResult:
    return CallToolResult(
        content=[TextContent(type="text", text=str(exc))],
        structured_content={"error": exc.to_dict()},
        is_error=True,
    )


class SpuServer(MCPServer):
    def __init__(self, dispatcher: Dispatcher | None = None) -> None:
        super().__init__(name="spu", version=__version__, instructions=INSTRUCTIONS, log_level="WARNING")
        self.dispatcher = dispatcher or Dispatcher()
        # the server's own tools, registered explicitly beside the domains'
        self.dispatcher.add_server_tools(list(SERVER_TOOLS))

    async def list_tools(self) -> list[Tool]:
        tools = self.dispatcher.registry.tools
        return [mcp_tool(spec) for spec in sorted(tools.values(), key=lambda s: s.name)]

    def _tool_input_schema(self, name: str) -> dict[str, Any] | None:
        spec = self.dispatcher.registry.tools.get(name)
        return None if spec is None else spec.input_schema()

    async def call_tool(self, name: str, arguments: dict[str, Any], context: Any = None) -> CallToolResult:
        async def progress(fraction: float, message: str | None) -> None:
            if context is not None:
                try:
                    await context.report_progress(fraction, 1.0, message)
                except Exception:
                    log.debug("progress notification failed", exc_info=True)

        try:
            result = await self.dispatcher.call(name, arguments, progress)
        except ToolError as exc:
            return error_result(exc)
        except Exception as exc:
            log.exception("tool %s failed", name)
            return error_result(ToolError("internal_error", f"{type(exc).__name__}: {exc}"))
        return CallToolResult(
            content=[TextContent(type="text", text=json.dumps(result, default=str))],
            structured_content=result,
        )


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


#: Shortest bearer token accepted for a non-loopback bind, and the least estimated entropy (bits).
MIN_TOKEN_CHARS = 32
MIN_TOKEN_BITS = 128


def token_problem(token: str | None) -> str | None:
    """Why ``token`` is too weak to guard a public bind, or None. Entropy is estimated as length times
    log2 of the number of distinct characters (a 32-character hex token scores 128 bits)."""
    if not token:
        return "no token given"
    if token != token.strip() or any(c.isspace() for c in token):
        return "the token holds white space"
    if len(token) < MIN_TOKEN_CHARS:
        return f"the token has {len(token)} characters (at least {MIN_TOKEN_CHARS} needed)"
    distinct = len(set(token))
    bits = len(token) * math.log2(distinct) if distinct > 1 else 0.0
    if distinct < 8 or bits < MIN_TOKEN_BITS:
        return f"the token is low in entropy (about {bits:.0f} bits from {distinct} distinct characters)"
    return None


def is_wildcard(host: str) -> bool:
    return host.strip("[]") in ("0.0.0.0", "::", "")


def _host_entries(name: str, port: int) -> list[str]:
    name = name.strip()
    if name.startswith("[") or name.count(":") > 1:  # an IPv6 literal, bracketed or not
        bare = name if name.startswith("[") else f"[{name}]"
        return [bare, f"{bare}:{port}"] if "]:" not in bare else [bare]
    return [name] if ":" in name else [name, f"{name}:{port}"]


def http_app(
    server: SpuServer, host: str, port: int, token: str | None, allowed_hosts: list[str] | None = None
):
    """The streamable-HTTP ASGI app with DNS-rebinding protection (Host and Origin checks) and, when a
    token is given, a bearer-token check on every request."""
    from mcp.server.transport_security import TransportSecuritySettings

    hosts = [entry for name in allowed_hosts or [] for entry in _host_entries(name, port)]
    if is_loopback(host):
        hosts += [f"127.0.0.1:{port}", f"localhost:{port}", f"[::1]:{port}"]
    elif not is_wildcard(host):
        hosts += _host_entries(host, port)
    origins = [f"http://{h}" for h in hosts] + [f"https://{h}" for h in hosts]
    security = TransportSecuritySettings(
        enable_dns_rebinding_protection=True, allowed_hosts=hosts, allowed_origins=origins
    )
    app = guard_http(server.streamable_http_app(transport_security=security, host=host))
    if not token:
        return app
    expected = f"Bearer {token}".encode()

    async def guarded(scope, receive, send):
        if scope["type"] == "http":
            auth = dict(scope.get("headers") or []).get(b"authorization", b"")
            if not hmac.compare_digest(auth, expected):
                await send(
                    {
                        "type": "http.response.start",
                        "status": 401,
                        "headers": [(b"content-type", b"application/json"), (b"www-authenticate", b"Bearer")],
                    }
                )
                await send(
                    {"type": "http.response.body", "body": b'{"error": "missing or wrong bearer token"}'}
                )
                return
        await app(scope, receive, send)

    return guarded


def run(
    transport: str = "stdio",
    host: str = "127.0.0.1",
    port: int = 8765,
    token: str | None = None,
    allowed_hosts: list[str] | None = None,
) -> None:
    server = SpuServer()
    server.dispatcher.preload()
    server.dispatcher.warm_up_later()
    try:
        if transport == "stdio":
            anyio.run(serve_stdio, server._lowlevel_server)
        else:
            import uvicorn

            uvicorn.run(
                http_app(server, host, port, token, allowed_hosts), host=host, port=port, log_level="warning"
            )
    finally:
        server.dispatcher.jobs.shutdown()
