"""Loaded by every Python process the tests start (PYTHONPATH): refuse connections off loopback.

Tests never send a packet outside 127.0.0.0/8 and ::1, even through a server they spawn.
"""

import ipaddress
import socket

_connect = socket.socket.connect
_connect_ex = socket.socket.connect_ex


def _check(sock, address):
    if sock.family in (socket.AF_INET, socket.AF_INET6) and isinstance(address, tuple):
        host = address[0]
        try:
            ip = ipaddress.ip_address(host.split("%")[0])
        except ValueError:
            raise OSError(f"spu test guard: refusing to connect to unresolved host {host!r}") from None
        mapped = getattr(ip, "ipv4_mapped", None)
        if not (ip.is_loopback or (mapped is not None and mapped.is_loopback)):
            raise OSError(f"spu test guard: refusing to connect to non-loopback address {host}")


def _guarded_connect(self, address):
    _check(self, address)
    return _connect(self, address)


def _guarded_connect_ex(self, address):
    _check(self, address)
    return _connect_ex(self, address)


socket.socket.connect = _guarded_connect
socket.socket.connect_ex = _guarded_connect_ex
