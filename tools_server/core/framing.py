"""JSON-RPC frame checks in front of the MCP SDK's stdio transport and HTTP app.

The MCP SDK drops some malformed frames without a reply (a parse error, ``"jsonrpc": "1.0"``, an object
id, a null id, string params, a batch array, deep nesting, a lone surrogate), which leaves a client
waiting for ever. Every frame is checked here before the SDK sees it; a frame that fails gets a JSON-RPC
error reply (``-32700`` parse error, ``-32600`` invalid request, ``-32602`` invalid params) carrying the
request's id when one can be read, else ``null``. Limits (also in ``docs/server.md``):

* a frame is at most :data:`MAX_FRAME_BYTES` of UTF-8 (invalid UTF-8 is a parse error, never replaced);
* JSON nesting at most :data:`MAX_DEPTH` levels, at most :data:`MAX_ITEMS` values in one frame;
* no lone surrogate anywhere (``"\\ud800"`` is refused with ``-32602``).

Over stdio, :class:`StdioWire` takes the process's stdin and stdout and :func:`serve_stdio` hands the SDK's
own transport (``mcp.server.stdio.stdio_server``) only frames that passed, through its public ``stdin`` and
``stdout`` parameters. Over HTTP, :func:`refuse_http_body` checks each POST body that the request guard
(:mod:`tools_server.core.http_guard`) has read, before the SDK's streamable-HTTP app sees it.
"""

from __future__ import annotations

import json
import logging
import os
import re
import select
import stat
import sys
import threading
from collections.abc import AsyncIterator, Callable
from typing import Any

import anyio

from tools_server.core import handshake

log = logging.getLogger(__name__)

MAX_FRAME_BYTES = 16 * 2**20
#: Frames the stdio reader reads ahead of the server (it then waits: a flood cannot fill the memory).
FRAMES_AHEAD = 64
MAX_DEPTH = 64
MAX_ITEMS = 1_000_000

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603


class FrameError(Exception):
    def __init__(self, code: int, message: str, request_id: Any = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.request_id = request_id

    def reply(self) -> dict[str, Any]:
        return {
            "jsonrpc": "2.0",
            "id": self.request_id,
            "error": {"code": self.code, "message": self.message},
        }


def _usable_id(value: Any) -> Any:
    return value if isinstance(value, str | int) and not isinstance(value, bool) else None


_SURROGATE = re.compile("[\ud800-\udfff]")


def _has_lone_surrogate(text: str) -> int:
    """Index of the first lone surrogate in ``text``, or -1."""
    m = _SURROGATE.search(text)
    return -1 if m is None else m.start()


def _walk(value: Any) -> str | None:
    """Depth, size and surrogate check without recursion; returns a problem or None. Strings inside a
    container are checked in place, not pushed, so long lists cost little more than parsing them."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    seen = 0
    while stack:
        item, depth = stack.pop()
        if depth > MAX_DEPTH:
            return f"nesting deeper than {MAX_DEPTH} levels"
        if isinstance(item, dict):
            for k in item:
                if not k.isascii() and _has_lone_surrogate(k) >= 0:
                    return "a key holds a lone surrogate (invalid Unicode)"
            children: Any = item.values()
            seen += len(item)
        elif isinstance(item, list):
            children = item
            seen += len(item)
        elif isinstance(item, str):
            if not item.isascii() and _has_lone_surrogate(item) >= 0:
                return "a string holds a lone surrogate (invalid Unicode)"
            continue
        else:
            continue
        if seen > MAX_ITEMS:
            return f"more than {MAX_ITEMS} values in one frame"
        for child in children:
            if isinstance(child, str):
                if not child.isascii() and _has_lone_surrogate(child) >= 0:
                    return "a string holds a lone surrogate (invalid Unicode)"
            elif isinstance(child, dict | list):
                stack.append((child, depth + 1))
    return None


def check_frame(raw: bytes | str) -> dict[str, Any]:
    """The decoded JSON-RPC message of one frame, or :class:`FrameError` saying why it is refused."""
    if len(raw) > MAX_FRAME_BYTES:
        raise FrameError(INVALID_REQUEST, f"frame larger than {MAX_FRAME_BYTES} bytes")
    if isinstance(raw, bytes):
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise FrameError(
                PARSE_ERROR, f"Parse error: the frame is not valid UTF-8 (byte {exc.start})"
            ) from None
    else:
        text = raw
    try:
        message = json.loads(text)
    except RecursionError:
        raise FrameError(INVALID_REQUEST, f"nesting deeper than {MAX_DEPTH} levels") from None
    except ValueError as exc:
        raise FrameError(PARSE_ERROR, f"Parse error: {exc}") from None
    if isinstance(message, list):
        raise FrameError(INVALID_REQUEST, "batch requests are not supported: send one message per frame")
    if not isinstance(message, dict):
        raise FrameError(INVALID_REQUEST, "a JSON-RPC message must be a JSON object")
    request_id = _usable_id(message.get("id"))
    if message.get("jsonrpc") != "2.0":
        raise FrameError(INVALID_REQUEST, 'Invalid request: "jsonrpc" must be "2.0"', request_id)
    if "id" in message and message["id"] is not None and request_id is None:
        raise FrameError(INVALID_REQUEST, "Invalid request: id must be a string or an integer")
    if "method" in message:
        if "id" in message and message["id"] is None:
            raise FrameError(
                INVALID_REQUEST,
                'Invalid request: "id" is null: give a string or an integer '
                '(or leave "id" out for a notification)',
            )
        if not isinstance(message["method"], str):
            raise FrameError(INVALID_REQUEST, "Invalid request: method must be a string", request_id)
        if "params" in message and not isinstance(message["params"], dict | type(None)):
            raise FrameError(INVALID_PARAMS, "Invalid params: params must be an object", request_id)
    elif not ("result" in message or "error" in message):
        raise FrameError(INVALID_REQUEST, "Invalid request: no method, result or error", request_id)
    problem = _walk(message)
    if problem is not None:
        code = INVALID_PARAMS if "surrogate" in problem else INVALID_REQUEST
        raise FrameError(code, f"Invalid request: {problem}", request_id)
    return message


def _dump(message: Any) -> bytes:
    return (json.dumps(message, separators=(",", ":"), ensure_ascii=False) + "\n").encode("utf-8")


class StdioWire:
    """The process's stdin and stdout, taken for MCP frames.

    From construction on, fd 0 reads the null device and fd 1 writes to stderr, so tool code, imports and
    child processes cannot read or corrupt the wire. A daemon thread reads frames from the start and
    hands them to the consumer (:meth:`attach`). With ``answer_initialize``, a first frame that
    :func:`~tools_server.core.handshake.initialize_result` can answer is answered by that thread at once,
    before the SDK is imported, and queued for the SDK under
    :data:`~tools_server.core.handshake.REPLAY_ID`. Construct it before the heavy imports.
    """

    def __init__(self, answer_initialize: bool = True) -> None:
        self._in = os.fdopen(os.dup(0), "rb")
        self._out = os.dup(1)
        null_in = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null_in, 0)
        os.close(null_in)
        sys.stdout.flush()
        os.dup2(2, 1)
        self._lock = threading.Lock()  # the frames and the consumer
        self._write_lock = threading.Lock()
        self._pipe_size = _pipe_size(self._out)
        self._frames: list[bytes] = []  # read before a consumer attached
        self._deliver: Callable[[bytes], None] | None = None
        self._room = threading.Semaphore(FRAMES_AHEAD)
        #: The result sent early, kept until the SDK's answer to the replayed request is compared with it.
        self.early_result: dict[str, Any] | None = None
        reader = threading.Thread(target=self._read, args=(answer_initialize,), name="spu-stdio", daemon=True)
        reader.start()

    def attach(self, deliver: Callable[[bytes], None]) -> None:
        """Hand every frame read so far, then each new one, to ``deliver`` (called from the reader thread;
        ``b""`` marks the end of input). The consumer calls :meth:`taken` for each frame it takes, so the
        reader stays at most :data:`FRAMES_AHEAD` frames ahead."""
        with self._lock:
            for line in self._frames:
                deliver(line)
            self._frames.clear()
            self._deliver = deliver

    def taken(self) -> None:
        self._room.release()

    def _put(self, line: bytes) -> None:
        self._room.acquire()
        with self._lock:
            if self._deliver is None:
                self._frames.append(line)
            else:
                self._deliver(line)

    def write_now(self, data: bytes) -> bool:
        """Write ``data`` from the calling thread if that cannot block: no other write under way, and the
        pipe to the client has room for all of it (not a pipe: at most ``PIPE_BUF`` bytes and writable).
        False if it was not written (the caller then writes from a thread)."""
        if len(data) > max(select.PIPE_BUF, self._pipe_size) or not self._write_lock.acquire(blocking=False):
            return False
        try:
            if self._pipe_size:
                room = self._pipe_size - _queued(self._out)
            else:
                room = select.PIPE_BUF if select.select([], [self._out], [], 0)[1] else 0
            if len(data) > room:
                return False
            self._write_all(data)
            return True
        except OSError:
            return False
        finally:
            self._write_lock.release()

    def write(self, data: bytes) -> None:
        with self._write_lock:
            self._write_all(data)

    def _write_all(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            view = view[os.write(self._out, view) :]

    def _read_frame(self) -> bytes:
        """One line, or b"" at end of input; an over-long line is skipped to its end and returned cut."""
        line = self._in.readline(MAX_FRAME_BYTES + 1)
        if len(line) > MAX_FRAME_BYTES and not line.endswith(b"\n"):
            while (more := self._in.readline(MAX_FRAME_BYTES)) and not more.endswith(b"\n"):
                pass
        return line

    def _read(self, answer_initialize: bool) -> None:
        try:
            while line := self._read_frame():
                if not line.strip():
                    continue
                if answer_initialize:
                    answer_initialize = False
                    line = self._answer_early(line)
                self._put(line)
        finally:
            self._put(b"")

    def _answer_early(self, line: bytes) -> bytes:
        try:
            message = check_frame(line.rstrip(b"\r\n"))
        except FrameError:
            return line
        result = handshake.initialize_result(message)
        if result is None:
            return line
        self.early_result = result
        self.write(_dump({"jsonrpc": "2.0", "id": message["id"], "result": result}))
        return _dump({**message, "id": handshake.REPLAY_ID})


def _pipe_size(fd: int) -> int:
    """The capacity of the pipe ``fd`` writes to, or 0 when it is not a pipe (or the system cannot say)."""
    try:
        import fcntl

        if not stat.S_ISFIFO(os.fstat(fd).st_mode):
            return 0
        return int(fcntl.fcntl(fd, 1032))  # F_GETPIPE_SZ (Linux)
    except (ImportError, OSError):
        return 0


def _queued(fd: int) -> int:
    """Bytes written to the pipe ``fd`` and not yet read by the client."""
    import array
    import fcntl
    import termios

    count = array.array("i", [0])
    fcntl.ioctl(fd, termios.FIONREAD, count)
    return count[0]


async def serve_stdio(server: Any, wire: StdioWire | None = None) -> None:
    """Serve ``server`` (the SDK's ``mcp.server.lowlevel.Server``) over stdin/stdout (``wire``, taken now if
    not given) with the SDK's stdio transport, every frame checked first (see the module docstring)."""
    from mcp.server.stdio import stdio_server

    wire = wire or StdioWire(answer_initialize=False)
    async with stdio_server(stdin=_CheckedFrames(wire), stdout=_Replies(wire)) as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


async def _send(wire: StdioWire, data: bytes) -> None:
    if not wire.write_now(data):  # no thread hand-off for a reply the pipe takes at once
        await anyio.to_thread.run_sync(wire.write, data)


class _CheckedFrames:
    """The SDK transport's ``stdin``: the frames that pass :func:`check_frame` and the SDK's own message
    model, as text lines; every other frame is answered here with its JSON-RPC error."""

    def __init__(self, wire: StdioWire) -> None:
        self.wire = wire

    async def __aiter__(self) -> AsyncIterator[str]:
        import asyncio

        from mcp_types import jsonrpc_message_adapter

        loop = asyncio.get_running_loop()
        inbox: asyncio.Queue[bytes] = asyncio.Queue()
        self.wire.attach(lambda line: loop.call_soon_threadsafe(inbox.put_nowait, line))
        while True:
            line = await inbox.get()
            self.wire.taken()
            if not line:
                return
            frame = line.rstrip(b"\r\n")
            checked: Any = None
            try:
                checked = check_frame(frame)
                jsonrpc_message_adapter.validate_python(checked, by_name=False)
            except FrameError as exc:
                await _send(self.wire, _dump(exc.reply()))
                continue
            except Exception as exc:  # the SDK's model refuses it: answer rather than drop it
                text = str(exc).splitlines()[0][:300]
                error = FrameError(INVALID_REQUEST, f"Invalid request: {text}", _usable_id(checked.get("id")))
                await _send(self.wire, _dump(error.reply()))
                continue
            yield frame.decode("utf-8")


class _Replies:
    """The SDK transport's ``stdout``: writes each line to the client, and drops the SDK's answer to an
    ``initialize`` already answered early (comparing the two; a difference is logged)."""

    def __init__(self, wire: StdioWire) -> None:
        self.wire = wire

    async def write(self, text: str) -> None:
        if self.wire.early_result is not None and handshake.REPLAY_ID in text and self._replayed(text):
            return
        try:
            data = text.encode("utf-8")
        except UnicodeEncodeError:  # a lone surrogate in a reply: it must still answer its request
            log.warning("could not encode a reply")
            rid = _usable_id(json.loads(text).get("id"))
            if rid is None:
                return
            data = _dump(FrameError(INTERNAL_ERROR, "the reply could not be encoded", rid).reply())
        await _send(self.wire, data)

    async def flush(self) -> None:
        """Every write above is complete when it returns."""

    def _replayed(self, text: str) -> bool:
        reply = json.loads(text)
        if reply.get("id") != handshake.REPLAY_ID:
            return False
        problem = handshake.same_answer(self.wire.early_result or {}, reply)
        if problem is not None:
            log.warning("the early answer to initialize is not the SDK's: %s", problem)
        self.wire.early_result = None
        return True


def refuse_http_body(raw: bytes) -> bytes | None:
    """The JSON-RPC error reply to an HTTP POST body that fails :func:`check_frame`, or None when it passes
    (the ``check_body`` of :func:`tools_server.core.http_guard.guard_requests`, which reads the body)."""
    try:
        check_frame(raw)
    except FrameError as exc:
        return _dump(exc.reply())
    return None
