"""Where ``spu serve`` may listen: loopback and wildcard addresses, and the refusal to start a public bind
without a strong token (the token-strength rule is :mod:`tools_server.core.http_guard`'s, shared with
``spu audit serve``) or named host names. Standard library only: the fast ``spu serve`` path reads these
before it imports the MCP SDK, and the HTTP app reads them to build its ``Host`` allow-list.
"""

from __future__ import annotations

import errno
import ipaddress
import socket

from tools_server.core.http_guard import TOKEN_ADVICE, token_problem


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def is_wildcard(host: str) -> bool:
    return host.strip("[]") in ("0.0.0.0", "::", "")


def refusal(transport: str, host: str, token: str | None, allowed_hosts: list[str]) -> str | None:
    """Why ``spu serve`` with these options must not start, or None."""
    if transport not in ("stdio", "http"):
        return f"unknown transport {transport!r}: use stdio or http"
    if transport == "http" and not is_loopback(host):
        if (problem := token_problem(token)) is not None:
            return (
                f"refusing to bind {host}: a non-loopback address needs --token (or SPU_SERVER_TOKEN) "
                f"of at least 32 random characters: {problem}. {TOKEN_ADVICE}"
            )
        if is_wildcard(host) and not allowed_hosts:
            return (
                f"refusing to bind {host}: name the host names clients use with --allowed-host "
                "(e.g. --allowed-host spu.example.org)"
            )
    return None


class CannotListen(RuntimeError):
    """The address cannot be bound (taken, or not this machine's): a usage error, said in one line."""


def listening_socket(host: str, port: int) -> socket.socket:
    """A socket bound to ``host``:``port`` and listening, bound before the server starts so a taken port
    is one clear error (:class:`CannotListen`) instead of the web server's log line and exit status."""
    family = socket.AF_INET6 if ":" in host.strip("[]") else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host.strip("[]"), port))
    except OSError as exc:
        sock.close()
        hint = "; choose another --port (0 picks a free one)" if exc.errno == errno.EADDRINUSE else ""
        raise CannotListen(f"cannot listen on {host}:{port}: {exc.strerror or exc}{hint}") from None
    sock.listen(128)
    return sock
