"""What every HTTP server we run checks before a request reaches its application: ``spu serve
--transport http`` and ``spu audit serve`` share it.

* **Token strength** (:func:`token_problem`): a bearer token that guards a non-loopback bind must be at
  least :data:`MIN_TOKEN_CHARS` characters and carry :data:`MIN_TOKEN_BITS` bits by an estimate that
  does not count characters continuing a sequence (``0123…``, ``abcd…``, ``aaaa…``) or repeating an earlier
  stretch of the token (``Password1Password1…``).
* **Requests** (:func:`guard_requests`), in this order, each before the body is read: two
  ``Authorization`` headers are a 400; a ``Host`` outside the allowed list is a 421; a missing or wrong
  token is a 401; a ``Content-Length`` over the body limit (or not a number) is a 413 (400) at once. The
  body is then read under one deadline for the whole body (:data:`BODY_TIMEOUT_S`, 408) and the size
  limit (413), checked whole by the server's own ``check_body`` where it gives one (the MCP server's
  JSON-RPC frame check: a failing frame gets HTTP 400 and the JSON-RPC error), and handed to the
  application in pieces of :data:`REPLAY_PIECE_BYTES`, let go with the last piece. This is the one
  place a body is read: nothing in front of the application reads it again.
* **Requests in flight**: at most :data:`MAX_REQUESTS` POST requests are served at once; one more gets a
  503 with ``Retry-After: 1`` before its body is read. A session's event stream (its long-lived GET) and
  idle connections do not count.
* **Connections** (:func:`uvicorn_options`): a connection that has not sent a complete request head
  within :data:`HEADER_TIMEOUT_S` is closed (uvicorn itself waits for ever), request heads are capped
  at 64 KiB, idle keep-alive connections close after 5 s, and at most :data:`MAX_CONNECTIONS` are open
  at once (more get a 503). uvicorn's own limit counts open connections, not requests: an MCP client
  holds two or three (its event stream, its POSTs, a keep-alive), so that limit alone, at 200, let only
  about 50 clients call a tool at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import json
import math
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

#: Shortest bearer token accepted for a non-loopback bind, and the least estimated entropy (bits).
MIN_TOKEN_CHARS = 32
MIN_TOKEN_BITS = 128
#: Seconds a connection may take to send a complete request head, and a request its whole body.
HEADER_TIMEOUT_S = 10.0
BODY_TIMEOUT_S = 30.0
MAX_REQUESTS = 200
MAX_CONNECTIONS = 1000
MAX_HEAD_BYTES = 64 * 1024
#: The size of the pieces a body that was read whole is handed to the application in.
REPLAY_PIECE_BYTES = 2**20
#: at most this much of a refused body is read (and dropped) so that the client reads the refusal
DRAIN_BYTES = 64 * 2**20

_RUN = 5  # an arithmetic run of this many characters (small step) is a sequence
_REPEAT = 6  # a stretch of this many characters seen earlier in the token is a repetition


def _alphabet_bits(token: str) -> float:
    """log2 of the size of the smallest usual alphabet the token is drawn from."""
    if token.isdigit():
        return math.log2(10)
    if all(c in "0123456789abcdef" for c in token) or all(c in "0123456789ABCDEF" for c in token):
        return 4.0
    if token.isalpha() and (token.islower() or token.isupper()):
        return math.log2(26)
    if token.isalnum() and token.isascii():
        return math.log2(62)
    if all(c.isascii() and (c.isalnum() or c in "-_") for c in token):
        return 6.0
    return math.log2(95)


def _predictable(token: str) -> int:
    """How many characters continue a sequence or repeat an earlier stretch of the token."""
    marked = [False] * len(token)
    codes = [ord(c) for c in token]
    start = 0
    for i in range(2, len(token) + 1):
        steady = i < len(token) and codes[i] - codes[i - 1] == codes[i - 1] - codes[i - 2]
        if steady and abs(codes[i] - codes[i - 1]) <= 3:
            continue
        if i - start >= _RUN:  # token[start:i] is a run: all but its first two characters follow
            for j in range(start + 2, i):
                marked[j] = True
        start = i - 1
    for i in range(_REPEAT - 1, len(token)):
        if token[i - _REPEAT + 1 : i + 1] in token[:i]:
            marked[i] = True
    return sum(marked)


def token_bits(token: str) -> float:
    """The token's estimated entropy in bits (see the module docstring)."""
    return (len(token) - _predictable(token)) * _alphabet_bits(token)


def token_problem(token: str | None) -> str | None:
    """Why ``token`` is too weak to guard a public bind, or None."""
    if not token:
        return "no token given"
    if token != token.strip() or any(c.isspace() for c in token):
        return "the token holds white space"
    if len(token) < MIN_TOKEN_CHARS:
        return f"the token has {len(token)} characters (at least {MIN_TOKEN_CHARS} needed)"
    distinct = len(set(token))
    bits = token_bits(token)
    if distinct < 8 or bits < MIN_TOKEN_BITS:
        return (
            f"the token is low in entropy (about {bits:.0f} bits; sequences and repeated stretches do not "
            f"count; {MIN_TOKEN_BITS} needed)"
        )
    return None


TOKEN_ADVICE = 'Make one with: python -c "import secrets; print(secrets.token_urlsafe(32))"'


async def _reply(
    send: Any,
    status: int,
    message: str,
    extra: Iterable[tuple[bytes, bytes]] = (),
    before_end: Callable[[], Awaitable[None]] | None = None,
) -> None:
    await _send_json(
        send, status, json.dumps({"error": message}).encode(), [(b"connection", b"close"), *extra], before_end
    )


async def _send_json(
    send: Any,
    status: int,
    body: bytes,
    extra: Iterable[tuple[bytes, bytes]] = (),
    before_end: Callable[[], Awaitable[None]] | None = None,
) -> None:
    """The whole response at once; with ``before_end``, the response is finished (and so, under
    ``connection: close``, the connection closed) only after it has run (:func:`_drain`)."""
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()), *extra]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body, "more_body": before_end is not None})
    if before_end is not None:
        await before_end()
        await send({"type": "http.response.body", "body": b""})


async def _drain(receive: Any, timeout_s: float) -> None:
    """Read and drop the rest of a refused body, up to :data:`DRAIN_BYTES` and ``timeout_s`` (or until the
    client goes), after the refusal was sent whole and before its response is finished (``before_end``):
    uvicorn closes the connection when a ``connection: close`` response is complete and hands out no more
    of the body after it, and a connection closed with request bytes unread is reset by the kernel, which
    can cost the client the refusal it was sent (httpx: "peer closed connection without sending complete
    message body")."""
    dropped = 0
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(timeout_s):
            while dropped <= DRAIN_BYTES:
                event = await receive()
                if event["type"] != "http.request":
                    return
                dropped += len(event.get("body", b""))
                if not event.get("more_body", False):
                    return


def guard_requests(
    app: Any,
    *,
    max_body_bytes: int,
    token: str | None = None,
    allowed_hosts: Iterable[str] | None = None,
    body_timeout_s: float = BODY_TIMEOUT_S,
    max_requests: int = MAX_REQUESTS,
    check_body: Callable[[bytes], bytes | None] | None = None,
) -> Any:
    """ASGI wrapper applying the request checks of the module docstring. ``allowed_hosts``: the exact
    ``Host`` values accepted (None: any); ``token``: the bearer token required (None: none);
    ``max_requests``: POST requests served at once; ``check_body``: given a whole body, the JSON answer
    of an HTTP 400 refusing it, or None to pass it to the application."""
    hosts = None if allowed_hosts is None else {h.lower() for h in allowed_hosts}
    expected = f"Bearer {token}".encode() if token else None
    in_flight = 0

    async def guarded(scope, receive, send):
        if scope["type"] != "http":
            await app(scope, receive, send)
            return
        headers: dict[bytes, list[bytes]] = {}
        for name, value in scope.get("headers") or []:
            headers.setdefault(name.lower(), []).append(value)
        if len(headers.get(b"authorization", [])) > 1:
            await _reply(send, 400, "more than one Authorization header")
            return
        if hosts is not None:
            given = headers.get(b"host", [])
            if len(given) != 1 or given[0].decode("latin-1").lower() not in hosts:
                await _reply(send, 421, "invalid Host header")
                return
        if expected is not None:
            auth = headers.get(b"authorization", [b""])[0]
            if not hmac.compare_digest(auth, expected):
                await _reply(send, 401, "missing or wrong bearer token", [(b"www-authenticate", b"Bearer")])
                return
        lengths = headers.get(b"content-length", [])
        if lengths:
            if len(set(lengths)) != 1 or not lengths[0].isdigit():
                await _reply(send, 400, "invalid Content-Length")
                return
            if int(lengths[0]) > max_body_bytes:
                await _reply(
                    send,
                    413,
                    f"body larger than {max_body_bytes} bytes",
                    before_end=lambda: _drain(receive, body_timeout_s),
                )
                return
        if scope.get("method") not in ("POST", "PUT", "PATCH"):
            await app(scope, receive, send)
            return
        nonlocal in_flight
        if in_flight >= max_requests:
            await _reply(send, 503, f"{max_requests} requests in flight; try again", [(b"retry-after", b"1")])
            return
        in_flight += 1
        answered = False

        def done() -> None:
            nonlocal in_flight, answered
            if not answered:
                answered = True
                in_flight -= 1

        async def counted_send(message):
            await send(message)
            if message["type"] == "http.response.body" and not message.get("more_body", False):
                done()  # answered: the application may still be tidying up, but the request is served

        try:
            await _serve_body(scope, receive, counted_send)
        finally:
            done()

    async def _serve_body(scope, receive, send):
        chunks: list[bytes] = []
        size = 0
        try:
            async with asyncio.timeout(body_timeout_s):
                more = True
                while more:
                    event = await receive()
                    if event["type"] == "http.disconnect":
                        return
                    chunk = event.get("body", b"")
                    size += len(chunk)
                    if size > max_body_bytes:
                        more = event.get("more_body", False)
                        await _reply(
                            send,
                            413,
                            f"body larger than {max_body_bytes} bytes",
                            before_end=(lambda: _drain(receive, body_timeout_s)) if more else None,
                        )
                        return
                    chunks.append(chunk)
                    more = event.get("more_body", False)
        except TimeoutError:
            await _reply(send, 408, f"the body did not arrive within {body_timeout_s:.0f} s")
            return
        body = b"".join(chunks)
        chunks.clear()
        refusal = check_body(body) if check_body is not None else None
        if refusal is not None:
            await _send_json(send, 400, refusal)
            return
        # Handed over in pieces, and let go with the last one: an application that gathers the body into
        # its own buffer (the SDK does) then holds the only copy, not a second beside this one.
        pending: bytes | None = body
        del body
        offset = 0

        async def replay():
            nonlocal pending, offset
            if pending is None:
                return await receive()
            piece = pending[offset : offset + REPLAY_PIECE_BYTES]
            offset += len(piece)
            more = offset < len(pending)
            if not more:
                pending = None
            return {"type": "http.request", "body": piece, "more_body": more}

        await app(scope, replay, send)

    return guarded


def _timed_h11() -> type:
    from uvicorn.protocols.http.h11_impl import H11Protocol

    class TimedH11Protocol(H11Protocol):
        """uvicorn's h11 protocol, closing a connection whose request head is not complete in time."""

        header_timeout_s = HEADER_TIMEOUT_S

        def connection_made(self, transport):  # type: ignore[override]
            super().connection_made(transport)
            self._head_timer = self.loop.call_later(self.header_timeout_s, self._head_timeout)

        def on_response_complete(self) -> None:
            super().on_response_complete()
            if not self.transport.is_closing():  # the next request's head has the same allowance
                self._head_timer.cancel()
                self._head_timer = self.loop.call_later(self.header_timeout_s, self._head_timeout)

        def handle_events(self) -> None:
            super().handle_events()
            if self.cycle is not None:  # a complete head arrived: the body has its own deadline
                self._head_timer.cancel()

        def connection_lost(self, exc):  # type: ignore[override]
            self._head_timer.cancel()
            super().connection_lost(exc)

        def _head_timeout(self) -> None:
            if self.cycle is None or self.cycle.response_complete:
                self.transport.close()

    return TimedH11Protocol


def uvicorn_options() -> dict[str, Any]:
    """Keyword arguments for ``uvicorn.Config``/``uvicorn.run`` applying the connection limits."""
    return {
        "http": _timed_h11(),
        "h11_max_incomplete_event_size": MAX_HEAD_BYTES,
        "timeout_keep_alive": 5,
        "limit_concurrency": MAX_CONNECTIONS,
    }
