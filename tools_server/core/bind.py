"""Where ``spu serve`` may listen: loopback and wildcard addresses, and the refusal to start a public bind
without a strong token (the token-strength rule is :mod:`tools_server.core.http_guard`'s, shared with
``spu audit serve``) or named host names. Standard library only: the fast ``spu serve`` path reads these
before it imports the MCP SDK, and the HTTP app reads them to build its ``Host`` allow-list.
"""

from __future__ import annotations

import ipaddress

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
