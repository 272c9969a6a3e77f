"""Where ``spu serve`` may listen: loopback and wildcard addresses, the bearer-token strength rule, and the
refusal to start a public bind without a strong token or named host names. Standard library only: the
fast ``spu serve`` path reads these before it imports the MCP SDK, and the HTTP app reads them to build its
``Host`` allow-list.
"""

from __future__ import annotations

import ipaddress
import math

#: Shortest bearer token accepted for a non-loopback bind, and the least estimated entropy (bits).
MIN_TOKEN_CHARS = 32
MIN_TOKEN_BITS = 128


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def is_wildcard(host: str) -> bool:
    return host.strip("[]") in ("0.0.0.0", "::", "")


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


def refusal(transport: str, host: str, token: str | None, allowed_hosts: list[str]) -> str | None:
    """Why ``spu serve`` with these options must not start, or None."""
    if transport not in ("stdio", "http"):
        return f"unknown transport {transport!r}: use stdio or http"
    if transport == "http" and not is_loopback(host):
        if (problem := token_problem(token)) is not None:
            return (
                f"refusing to bind {host}: a non-loopback address needs --token (or SPU_SERVER_TOKEN) "
                f"of at least 32 random characters: {problem}. "
                'Make one with: python -c "import secrets; print(secrets.token_urlsafe(32))"'
            )
        if is_wildcard(host) and not allowed_hosts:
            return (
                f"refusing to bind {host}: name the host names clients use with --allowed-host "
                "(e.g. --allowed-host spu.example.org)"
            )
    return None
