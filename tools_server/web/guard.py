"""The address guard: which URLs and IP addresses the audited client may connect to.

Two layers, both always on:

* :func:`check_url` runs before a request is sent (and again for every redirect): only ``http`` and
  ``https``, no credentials in the URL, no ``localhost`` names, and a host written as an IP literal in any
  spelling (``127.1``, ``0x7f000001``, ``2130706433``, ``0177.0.0.1``, ``[::ffff:127.0.0.1]``) is
  classified before any DNS lookup.
* :class:`GuardedBackend` is the httpcore network backend of the audited client: it resolves the host
  once, refuses the connection if *any* resolved address is not public, and then connects to the checked
  IP itself (TLS still uses the original host name for SNI and certificate checks, and the ``Host``
  header is untouched). A DNS answer that changes between the check and the connect (DNS rebinding)
  therefore cannot reach a private address: the address that was checked is the address connected to.

:func:`classify_address` is the single rule for "public": loopback, private, shared (CGNAT), link-local,
cloud-metadata, multicast, reserved, unspecified, documentation and benchmarking ranges are refused, and
so is every IPv6 form that embeds an IPv4 address (IPv4-mapped, IPv4-compatible, 6to4, Teredo, NAT64).

The test allow-list (``allow`` argument, or ``SPU_WEB_TEST_ALLOW=127.0.0.1:8080,[::1]:9000``) names
loopback ``address:port`` pairs that may be reached anyway. It exists for the test suite, which serves
fake providers on loopback; it accepts loopback addresses only and never widens anything else.
``SPU_WEB_TEST_HOSTS=name=ip,...`` is the matching test-only resolver stub: it maps test host names to
addresses, which are then checked like any DNS answer.
"""

from __future__ import annotations

import ipaddress
import os
import re
import socket
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

import httpcore

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

ALLOW_ENV = "SPU_WEB_TEST_ALLOW"
HOSTS_ENV = "SPU_WEB_TEST_HOSTS"

#: Cloud instance-metadata endpoints (AWS, GCP, Azure, OpenStack; AWS IPv6; Alibaba; Oracle).
METADATA_ADDRESSES = frozenset(
    ipaddress.ip_address(a)
    for a in ("169.254.169.254", "fd00:ec2::254", "100.100.100.200", "192.0.0.192", "169.254.170.2")
)
_NAT64 = (ipaddress.ip_network("64:ff9b::/96"), ipaddress.ip_network("64:ff9b:1::/48"))
_SHARED = ipaddress.ip_network("100.64.0.0/10")
_HOSTNAME = re.compile(r"[a-z0-9_](?:[a-z0-9_-]{0,62}\.?)*")  # after IDNA: no %, spaces or other bytes
_BLOCKED_NAMES = ("localhost", "localhost.localdomain", "ip6-localhost", "ip6-loopback")


class AddressRefused(Exception):
    """A URL or address the guard will not connect to; ``reason`` is a short machine-readable word."""

    def __init__(self, message: str, reason: str, url: str | None = None) -> None:
        super().__init__(message)
        self.reason = reason
        self.url = url


def classify_address(ip: IPAddress | str) -> str | None:
    """Why ``ip`` may not be connected to (``"loopback"``, ``"private"``, ``"metadata"`` …), or None if
    public."""
    if isinstance(ip, str):
        ip = ipaddress.ip_address(ip.split("%", 1)[0])
    if ip in METADATA_ADDRESSES:
        return "metadata"
    if isinstance(ip, ipaddress.IPv6Address):
        embedded = embedded_ipv4(ip)
        if embedded is not None:
            inner = classify_address(embedded)
            return f"ipv4_embedded_in_ipv6:{inner}" if inner else "ipv4_embedded_in_ipv6"
        if ip.is_site_local:
            return "private"
    if ip.is_unspecified:
        return "unspecified"
    if ip.is_loopback:
        return "loopback"
    if ip.is_link_local:
        return "link_local"
    if ip.is_multicast:
        return "multicast"
    if isinstance(ip, ipaddress.IPv4Address) and ip in _SHARED:
        return "shared"
    if ip.is_private:
        return "private"
    if ip.is_reserved:
        return "reserved"
    if not ip.is_global:
        return "not_global"
    return None


def embedded_ipv4(ip: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 address carries (mapped, compatible, 6to4, Teredo client, NAT64), if any."""
    if ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    if ip.sixtofour is not None:
        return ip.sixtofour
    if ip.teredo is not None:
        return ip.teredo[1]
    for net in _NAT64:
        if ip in net:
            return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    packed = int(ip)
    if packed >> 32 == 0 and packed > 1:  # deprecated IPv4-compatible ::a.b.c.d
        return ipaddress.IPv4Address(packed & 0xFFFFFFFF)
    return None


def parse_ip_literal(host: str) -> IPAddress | None:
    """Interpret ``host`` the way C resolvers do when it is an address literal, else None.

    Accepts the standard forms and the legacy inet_aton ones: fewer than four parts (``127.1``), octal
    (``0177.0.0.1``), hexadecimal (``0x7f.0.0.1``) and a single integer (``2130706433``, ``0x7f000001``).
    """
    host = host.strip().rstrip(".")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    try:
        return ipaddress.ip_address(host.split("%", 1)[0] if ":" in host else host)
    except ValueError:
        pass
    parts = host.split(".")
    if not 1 <= len(parts) <= 4 or not all(parts):
        return None
    values = []
    for part in parts:
        try:
            if part.lower().startswith("0x"):
                values.append(int(part[2:] or "0", 16))
            elif len(part) > 1 and part.startswith("0"):
                values.append(int(part, 8))
            else:
                values.append(int(part, 10))
        except ValueError:
            return None
    *head, last = values
    if any(v > 255 for v in head) or last >= 256 ** (5 - len(values)):
        return None
    number = 0
    for v in head:
        number = number * 256 + v
    number = (number << (8 * (5 - len(values)))) | last
    return ipaddress.IPv4Address(number)


def _parse_allow(entries: Iterable[str]) -> frozenset[tuple[IPAddress, int]]:
    allowed = set()
    for entry in entries:
        entry = entry.strip()
        if not entry:
            continue
        host, _, port = entry.rpartition(":")
        ip = parse_ip_literal(host)
        if ip is None or not port.isdigit():
            raise ValueError(f"test allow-list entry {entry!r} must be ADDRESS:PORT")
        if not ip.is_loopback:
            raise ValueError(f"test allow-list entry {entry!r}: only loopback addresses may be allowed")
        allowed.add((ip, int(port)))
    return frozenset(allowed)


def _parse_hosts(text: str) -> dict[str, list[str]]:
    hosts: dict[str, list[str]] = {}
    for entry in text.split(","):
        if "=" in entry:
            name, _, addr = entry.partition("=")
            hosts.setdefault(name.strip().lower().rstrip("."), []).append(addr.strip())
    return hosts


Resolver = Callable[[str, int], list[str]]


def system_resolver(host: str, port: int) -> list[str]:
    """Every address the system resolver returns for ``host`` (TCP), in its order, without duplicates."""
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    seen: list[str] = []
    for *_, sockaddr in infos:
        addr = str(sockaddr[0]).split("%", 1)[0]
        if addr not in seen:
            seen.append(addr)
    return seen


@dataclass
class Guard:
    """The connection policy: resolver plus test allow-list. ``Guard.from_env()`` is the normal one."""

    resolver: Resolver = system_resolver
    allow: frozenset[tuple[IPAddress, int]] = field(default_factory=frozenset)
    hosts: dict[str, list[str]] = field(default_factory=dict)

    @classmethod
    def from_env(cls, *, resolver: Resolver | None = None) -> Guard:
        return cls(
            resolver=resolver or system_resolver,
            allow=_parse_allow(os.environ.get(ALLOW_ENV, "").split(",")),
            hosts=_parse_hosts(os.environ.get(HOSTS_ENV, "")),
        )

    def permits(self, ip: IPAddress, port: int) -> str | None:
        """None when a connection to ``ip:port`` is allowed, else the refusal reason."""
        reason = classify_address(ip)
        if reason is not None and (ip, port) in self.allow:
            return None
        return reason

    def check_url(self, url: str) -> None:
        """Refuse a URL before any lookup: scheme, credentials, local names, literal addresses."""
        import httpx

        try:
            parsed = httpx.URL(url)
        except Exception as exc:
            raise AddressRefused(f"not a valid URL: {exc}", "invalid_url", url) from None
        if parsed.scheme not in ("http", "https"):
            raise AddressRefused(f"scheme {parsed.scheme!r} is not allowed; use http or https", "scheme", url)
        if parsed.userinfo:
            raise AddressRefused("URLs with user names or passwords are not allowed", "userinfo", url)
        host = parsed.host.lower().rstrip(".")
        if not host:
            raise AddressRefused("the URL has no host", "invalid_url", url)
        if parsed.port is not None and not 1 <= parsed.port <= 65535:  # httpx takes 0, -1 and 99999
            raise AddressRefused(f"port {parsed.port} is not a port (1-65535)", "invalid_url", url)
        port = parsed.port or (443 if parsed.scheme == "https" else 80)
        ip = parse_ip_literal(host)
        if ip is not None:
            reason = self.permits(ip, port)
            if reason:
                raise AddressRefused(f"address {ip} is not public ({reason})", reason, url)
            return
        if host in _BLOCKED_NAMES or host.endswith(".localhost"):
            raise AddressRefused(f"host {host!r} names this machine", "loopback", url)
        raw_host = parsed.raw_host.decode("ascii", "replace").lower().rstrip(".")
        if not _HOSTNAME.fullmatch(raw_host):
            raise AddressRefused(f"host {host!r} is not a valid host name", "invalid_url", url)

    def resolve_checked(self, host: str, port: int) -> list[IPAddress]:
        """Resolve once and check every address; raise :class:`AddressRefused` if any is not allowed."""
        literal = parse_ip_literal(host)
        name = host.lower().rstrip(".")
        if literal is not None:
            addresses = [literal]
        else:
            if name in _BLOCKED_NAMES or name.endswith(".localhost"):
                raise AddressRefused(f"host {host!r} names this machine", "loopback")
            try:
                raw = self.hosts.get(name) or self.resolver(name, port)
            except (OSError, UnicodeError) as exc:
                raise AddressRefused(f"could not resolve {host!r}: {exc}", "resolve_failed") from None
            addresses = []
            for a in raw:
                parsed = parse_ip_literal(a)
                if parsed is None:
                    raise AddressRefused(f"resolver returned a non-address {a!r}", "resolve_failed")
                addresses.append(parsed)
        if not addresses:
            raise AddressRefused(f"{host!r} did not resolve to any address", "resolve_failed")
        for ip in addresses:
            reason = self.permits(ip, port)
            if reason:
                raise AddressRefused(f"{host} resolves to {ip}, which is not public ({reason})", reason)
        return addresses


class GuardedBackend(httpcore.NetworkBackend):
    """httpcore network backend that connects only to addresses the guard has just checked."""

    def __init__(self, guard: Guard) -> None:
        self.guard = guard
        self._inner = httpcore.SyncBackend()

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[tuple] | None = None,
    ) -> httpcore.NetworkStream:
        addresses = self.guard.resolve_checked(host, port)
        last: Exception | None = None
        for ip in addresses:
            try:
                return self._inner.connect_tcp(
                    str(ip), port, timeout=timeout, local_address=local_address, socket_options=socket_options
                )
            except (httpcore.ConnectError, httpcore.ConnectTimeout) as exc:
                last = exc
        assert last is not None
        raise last

    def connect_unix_socket(self, path: str, timeout: float | None = None, socket_options=None):
        raise AddressRefused("unix sockets are not allowed", "scheme")

    def sleep(self, seconds: float) -> None:
        self._inner.sleep(seconds)
