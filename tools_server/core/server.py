"""The MCP server: the registry's tools over stdio or streamable HTTP.

``SpuServer`` is the official SDK's ``MCPServer`` with tool listing and calling routed to our registry and
:class:`~tools_server.core.dispatch.Dispatcher`; this is the one place where a :class:`ToolError` becomes an
MCP
error result (``isError``).
"""

from __future__ import annotations

import json
import logging
from typing import Any

import anyio
from mcp.server.mcpserver import MCPServer
from mcp.types import CallToolResult, TextContent, Tool, ToolAnnotations

from tools_server import __version__
from tools_server.core.dispatch import Dispatcher
from tools_server.core.errors import ToolError
from tools_server.core.framing import MAX_FRAME_BYTES, StdioWire, guard_http, serve_stdio
from tools_server.core.handshake import INSTRUCTIONS, SERVER_NAME
from tools_server.core.http_guard import guard_requests, uvicorn_options
from tools_server.core.registry import ToolSpec
from tools_server.core.serve_cli import is_loopback, is_wildcard
from tools_server.core.server_tools import SERVER_TOOLS

log = logging.getLogger(__name__)


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
        super().__init__(
            name=SERVER_NAME, version=__version__, instructions=INSTRUCTIONS, log_level="WARNING"
        )
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
    # Host, token and body limits are checked before the body is read (the SDK checks Host after it)
    return guard_requests(
        app, max_body_bytes=MAX_FRAME_BYTES, token=token, allowed_hosts=hosts if hosts else None
    )


def run(
    transport: str = "stdio",
    host: str = "127.0.0.1",
    port: int = 8765,
    token: str | None = None,
    allowed_hosts: list[str] | None = None,
    wire: StdioWire | None = None,
) -> None:
    """Serve until the client leaves. ``wire``: stdin/stdout already taken (see ``serve_cli``)."""
    server = SpuServer()
    server.dispatcher.preload()
    server.dispatcher.warm_up_later()
    try:
        if transport == "stdio":
            anyio.run(serve_stdio, server._lowlevel_server, wire)
        else:
            import uvicorn

            uvicorn.run(
                http_app(server, host, port, token, allowed_hosts),
                host=host,
                port=port,
                log_level="warning",
                **uvicorn_options(),
            )
    finally:
        server.dispatcher.jobs.shutdown()
        server.dispatcher.cache.flush()
