"""The test suite's own guard: connections off loopback are refused before any packet is sent.

The check is called on an unconnected socket object; nothing is ever connected to a non-loopback address.
"""

import socket

import pytest
import sitecustomize


@pytest.mark.parametrize(
    "host", ["10.0.0.1", "192.168.1.1", "169.254.169.254", "8.8.8.8", "::ffff:10.0.0.1", "example.org"]
)
def test_guard_refuses_non_loopback(host):
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock, pytest.raises(OSError, match="spu test guard"):
        sitecustomize._check(sock, (host, 80))


@pytest.mark.parametrize("host", ["127.0.0.1", "127.8.9.10", "::1", "::ffff:127.0.0.1"])
def test_guard_allows_loopback(host):
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        assert sitecustomize._check(sock, (host, 80)) is None


def test_guard_is_installed_in_this_process():
    assert socket.socket.connect is sitecustomize._guarded_connect
