"""The spu MCP tools, reached with the official MCP Python client.

By default the agent starts ``spu serve`` over stdio (``[python, -m, spu, serve]``) with
``SPU_WORKDIR`` pointing into the run's output directory; ``tools.mcp.url`` connects to a running server
over streamable HTTP instead. The client lives on a private event loop in a background thread so the loop
of the agent stays plain synchronous code.

A successful result is shown to the model as its ``structuredContent`` (compact JSON; it carries the
provenance), falling back to the text content; an ``isError`` result is passed on as an error with its
text (``[code] message Hint: ...``). Long outputs are cut head and tail.
"""

from __future__ import annotations

import asyncio
import fnmatch
import json
import logging
import os
import sys
import threading
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from pathlib import Path
from typing import Any

from scaffold.agent.config import McpSection
from scaffold.agent.models import MODEL_KEY_ENV
from scaffold.agent.models.base import ToolDef
from scaffold.agent.tools.output import ToolResult, cut_middle

log = logging.getLogger(__name__)


class McpError(RuntimeError):
    """The server could not be started or reached."""


def server_command(config: McpSection) -> list[str]:
    command = config.command
    if not command:
        return [sys.executable, "-m", "spu", "serve"]
    return [str(c) for c in command] if isinstance(command, list) else str(command).split()


def offered(name: str, include: list[str] | None, exclude: list[str]) -> bool:
    """Whether the model sees MCP tool ``name``: listed in ``include`` (all when None) and not in ``exclude``;
    both take shell-style patterns (``chem_*``)."""
    if include is not None and not any(fnmatch.fnmatchcase(name, p) for p in include):
        return False
    return not any(fnmatch.fnmatchcase(name, p) for p in exclude)


class McpTools:
    def __init__(
        self,
        config: McpSection,
        *,
        workdir: Path,
        cwd: Path,
        max_output_chars: int,
        input_roots: tuple[Path, ...] = (),
    ) -> None:
        self.config = config
        self.workdir = workdir
        self.cwd = cwd
        self.input_roots = input_roots  # folders beyond workdir and cwd the server's tools may read
        self.max_chars = max_output_chars
        self.call_timeout_s = config.call_timeout_s
        self.include = config.include
        self.exclude = config.exclude
        self.tools: list[ToolDef] = []
        self.server_info: dict[str, Any] = {}
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="mcp-client", daemon=True)
        self._ready: Future = Future()
        self._stop: asyncio.Event | None = None
        self._main: Future | None = None
        self._client: Any = None

    # -- life cycle -------------------------------------------------------------------------------------

    def start(self, timeout_s: float = 120.0) -> None:
        self._thread.start()
        self._main = asyncio.run_coroutine_threadsafe(self._serve(), self._loop)
        try:
            self._ready.result(timeout=timeout_s)
        except FutureTimeout:
            self.close()
            raise McpError(f"the MCP server did not answer within {timeout_s:.0f} s") from None
        except Exception as exc:
            self.close()
            raise McpError(f"could not start or reach the MCP server: {_describe(exc)}") from exc

    def _target(self) -> Any:
        from mcp.client.stdio import StdioServerParameters

        if self.config.url:
            return self.config.url
        argv = server_command(self.config)
        env = {k: v for k, v in os.environ.items() if k not in MODEL_KEY_ENV}
        env["SPU_WORKDIR"] = str(self.workdir)
        roots = [env.get("SPU_INPUT_ROOTS", ""), *map(str, self.input_roots)]
        env["SPU_INPUT_ROOTS"] = os.pathsep.join(r for r in roots if r)
        return StdioServerParameters(command=argv[0], args=argv[1:], env=env, cwd=str(self.cwd))

    async def _serve(self) -> None:
        from mcp.client.client import Client

        self._stop = asyncio.Event()
        try:
            async with Client(self._target(), mode="legacy") as client:
                listing = await client.list_tools()
                self._client = client
                self.tools = sorted(
                    (
                        ToolDef(
                            t.name,
                            t.description or "",
                            t.input_schema or {"type": "object", "properties": {}},
                        )
                        for t in listing.tools
                        if offered(t.name, self.include, self.exclude)
                    ),
                    key=lambda t: t.name,
                )
                info = client.server_info
                self.server_info = {
                    "name": getattr(info, "name", None),
                    "version": getattr(info, "version", None),
                }
                self._ready.set_result(True)
                await self._stop.wait()
        except BaseException as exc:
            if not self._ready.done():
                self._ready.set_exception(exc if isinstance(exc, Exception) else McpError(repr(exc)))
                return
            raise

    def close(self) -> None:
        """Stop the client (which stops a stdio server) and the background loop; safe to call twice."""
        if self._thread.is_alive():
            if self._stop is not None:
                self._loop.call_soon_threadsafe(self._stop.set)
            if self._main is not None:
                try:
                    self._main.result(timeout=15)
                except Exception as exc:
                    log.debug("MCP client shutdown: %s", _describe(exc))
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout=10)

    # -- calls ------------------------------------------------------------------------------------------

    def definitions(self) -> list[ToolDef]:
        return list(self.tools)

    def has(self, name: str) -> bool:
        return any(t.name == name for t in self.tools)

    def call(self, name: str, args: dict[str, Any]) -> ToolResult:
        if self._client is None:
            return ToolResult("the MCP server is not connected", is_error=True)
        future = asyncio.run_coroutine_threadsafe(
            self._client.call_tool(name, args, read_timeout_seconds=self.call_timeout_s), self._loop
        )
        try:
            result = future.result(timeout=self.call_timeout_s + 30)
        except FutureTimeout:
            future.cancel()
            return ToolResult(
                f"{name}: no answer from the tool server within {self.call_timeout_s:.0f} s", is_error=True
            )
        except Exception as exc:
            return ToolResult(f"{name}: the tool server call failed: {_describe(exc)}", is_error=True)
        return to_tool_result(result, self.max_chars)


def to_tool_result(result: Any, max_chars: int) -> ToolResult:
    text = "\n".join(
        getattr(block, "text", "") for block in result.content or [] if getattr(block, "text", None)
    )
    structured = result.structured_content
    if result.is_error:
        return ToolResult(
            cut_middle(text or json.dumps(structured, ensure_ascii=False), max_chars),
            is_error=True,
            data=structured if isinstance(structured, dict) else None,
        )
    if structured is not None:
        content = json.dumps(structured, ensure_ascii=False, separators=(",", ":"))
    else:
        content = text
    return ToolResult(
        cut_middle(content, max_chars), data=structured if isinstance(structured, dict) else None
    )


def _describe(exc: BaseException) -> str:
    if isinstance(exc, BaseExceptionGroup):
        return "; ".join(_describe(e) for e in exc.exceptions)
    return f"{type(exc).__name__}: {exc}"
