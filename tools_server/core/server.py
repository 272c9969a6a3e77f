"""The MCP server: the registry's tools over stdio or streamable HTTP.

``SpuServer`` puts our registry and :class:`~tools_server.core.dispatch.Dispatcher` behind the SDK's
low-level ``mcp.server.lowlevel.Server``, through its public constructor hooks only (``on_list_tools``,
``on_call_tool``, ``get_tool_input_schema``); this is the one place where a :class:`ToolError` becomes an
MCP error result (``isError``). The transports are the SDK's own, with our frame checks in front
(:mod:`tools_server.core.framing`).
"""

from __future__ import annotations

import json
import logging
import threading
from typing import Any

import anyio
from mcp.server.lowlevel import Server
from mcp.types import CallToolResult, ListToolsResult, TextContent, Tool, ToolAnnotations

from tools_server import __version__
from tools_server.core import toollist
from tools_server.core.bind import is_loopback, is_wildcard, listening_socket
from tools_server.core.dispatch import Dispatcher
from tools_server.core.errors import ToolError, storage_error
from tools_server.core.framing import MAX_FRAME_BYTES, StdioWire, refuse_http_body, serve_stdio
from tools_server.core.handshake import INSTRUCTIONS, SERVER_NAME
from tools_server.core.http_guard import guard_requests, uvicorn_options
from tools_server.core.registry import ToolSpec
from tools_server.core.server_tools import SERVER_TOOLS

log = logging.getLogger(__name__)


def mcp_tool(spec: ToolSpec) -> Tool:
    return Tool(
        name=spec.name,
        title=spec.title,
        description=spec.description,
        input_schema=spec.input_schema(),
        output_schema=spec.output_schema(),
        annotations=ToolAnnotations(
            title=spec.title,
            read_only_hint=spec.read_only,
            destructive_hint=spec.destructive,
            idempotent_hint=spec.idempotent,
            open_world_hint=spec.open_world,
        ),
    )


def dump_tool(tool: Tool) -> dict[str, Any]:
    return tool.model_dump(mode="json", by_alias=True, exclude_none=True)


def error_result(exc: ToolError) -> CallToolResult:
    return CallToolResult(
        content=[TextContent(type="text", text=str(exc))],
        structured_content={"error": exc.to_dict()},
        is_error=True,
    )


class SpuServer:
    """The tool server: ``mcp`` is the SDK server that the transports run."""

    def __init__(self, dispatcher: Dispatcher | None = None) -> None:
        self.dispatcher = dispatcher or Dispatcher()
        # the server's own tools, registered explicitly beside the domains'
        self.dispatcher.add_server_tools(list(SERVER_TOOLS))
        self._tools: list[Tool] | None = None
        self._tools_lock = threading.Lock()
        self._listed = threading.Event()  # set once a tools/list has been answered

        async def on_list_tools(ctx: Any, params: Any) -> ListToolsResult:
            return ListToolsResult(tools=await self.list_tools())

        async def on_call_tool(ctx: Any, params: Any) -> CallToolResult:
            return await self.call_tool(params.name, params.arguments or {}, ctx)

        self.mcp = Server(
            SERVER_NAME,
            version=__version__,
            instructions=INSTRUCTIONS,
            get_tool_input_schema=self.tool_input_schema,
            on_list_tools=on_list_tools,
            on_call_tool=on_call_tool,
        )
        # No OpenTelemetry spans: the server installs no exporter, and a span per request costs on every
        # call (the SDK's documented opt-out: drop the middleware from the list).
        self.mcp.middleware.clear()

    def preload(self) -> None:
        """Have the tool list ready for the first ``tools/list``: the list a server on the same code built
        last, else the list shipped with the package if it was built from the same code
        (:mod:`tools_server.core.toollist`), else the registry loaded and the list built from a background
        thread. Then (after the first ``tools/list``, or a second at most, when the list came from the
        store or the package) load the registry for the first call; a list from the store is checked
        against it and the list is kept for the next start (a shipped list needs neither: its key is a
        digest of the content the list was built from, and the next start finds it the same way). Only then
        start the warm workers (their imports would compete with start-up for the CPU)."""
        kept = toollist.load()
        shipped = toollist.shipped() if kept is None else None
        stored = kept if kept is not None else shipped
        if stored is not None:
            try:
                self._tools = [Tool.model_validate(t) for t in stored]
            except ValueError:
                stored = shipped = None

        def load() -> None:
            if stored is None:
                tools = self.tools()  # built here, under the lock a tools/list waits on
            else:
                self._listed.wait(1.0)
                if shipped is not None:
                    self.dispatcher.registry  # noqa: B018 (loaded here, ahead of the first call)
                    self.dispatcher.warm_up_later()
                    return
                tools = self._build_tools()
            fresh = [dump_tool(t) for t in tools]
            if stored is not None and fresh != stored:
                log.warning("the stored tool list differed from the registry's; serving the registry's")
                self._tools = tools
            if fresh != kept:
                toollist.store(fresh, {spec.module for spec in self.dispatcher.registry.tools.values()})
            self.dispatcher.warm_up_later()

        threading.Thread(target=load, daemon=True, name="spu-registry").start()

    def _build_tools(self) -> list[Tool]:
        specs = sorted(self.dispatcher.registry.tools.values(), key=lambda s: s.name)
        return [mcp_tool(spec) for spec in specs]

    def tools(self) -> list[Tool]:
        """The MCP tool list, built once (the registry does not change while the server runs)."""
        if self._tools is None:
            with self._tools_lock:
                if self._tools is None:
                    self._tools = self._build_tools()
        return self._tools

    async def list_tools(self) -> list[Tool]:
        tools = list(self.tools())
        self._listed.set()
        return tools

    def tool_input_schema(self, name: str) -> dict[str, Any] | None:
        return next((t.input_schema for t in self.tools() if t.name == name), None)

    async def call_tool(self, name: str, arguments: dict[str, Any], context: Any = None) -> CallToolResult:
        """Run one tool; ``context`` is the SDK's request context (progress goes to its session)."""

        async def progress(fraction: float, message: str | None) -> None:
            if context is not None:
                try:
                    await context.session.report_progress(fraction, 1.0, message)
                except Exception:
                    log.debug("progress notification failed", exc_info=True)

        try:
            result = await self.dispatcher.call(name, arguments, progress)
        except ToolError as exc:
            return error_result(exc)
        except Exception as exc:
            # a tool run in the server (instant, net) that could not write its files is storage_error
            error = storage_error(exc) if isinstance(exc, OSError) else None
            if error is None:
                log.exception("tool %s failed", name)
                error = ToolError(
                    "internal_error", f"{type(exc).__name__}: {exc}", hint=_bug_hint(self, name)
                )
            return error_result(error)
        return CallToolResult(
            content=[TextContent(type="text", text=json.dumps(result, default=str))],
            structured_content=result,
        )


def _bug_hint(server: SpuServer, tool: str) -> str:
    """The hint of a bug in a tool run in the server itself (instant and network tools): it has no job, so
    the hint names what to report and to whom instead of a job id."""
    spec = server.dispatcher.registry.tools.get(tool)
    where = f" (module {spec.module})" if spec is not None else ""
    return (
        f"This is a bug in the tool {tool}{where}, which ran in the server without a job: report it to the "
        "tool's authors with its arguments and this message (the server's log holds the traceback)."
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
    # the SDK's own body limit (4 MiB by default) set to the frame limit, so the one that answers is ours
    app = server.mcp.streamable_http_app(
        transport_security=security, host=host, max_request_body_size=MAX_FRAME_BYTES
    )
    # Host, token and body limits are checked before the body is read (the SDK checks Host after it), and
    # the body, read once, is checked as a JSON-RPC frame before the SDK sees it
    return guard_requests(
        app,
        max_body_bytes=MAX_FRAME_BYTES,
        token=token,
        allowed_hosts=hosts if hosts else None,
        check_body=refuse_http_body,
    )


def run(
    transport: str = "stdio",
    host: str = "127.0.0.1",
    port: int = 8765,
    token: str | None = None,
    allowed_hosts: list[str] | None = None,
    wire: StdioWire | None = None,
) -> None:
    """Serve until the client leaves. ``wire``: stdin/stdout already taken (see ``serve_cli``). Over HTTP the
    address is bound first: :class:`~tools_server.core.bind.CannotListen` when it is taken."""
    sock = listening_socket(host, port) if transport == "http" else None
    server = SpuServer()
    server.preload()
    try:
        if sock is None:
            anyio.run(serve_stdio, server.mcp, wire)
        else:
            import uvicorn

            bound = sock.getsockname()[1]  # the port picked when ``port`` is 0
            config = uvicorn.Config(
                http_app(server, host, bound, token, allowed_hosts), log_level="warning", **uvicorn_options()
            )
            uvicorn.Server(config).run(sockets=[sock])
    finally:
        server.dispatcher.jobs.shutdown()
        server.dispatcher.cache.flush()
