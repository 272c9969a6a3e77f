"""The address guard: hostile URL spellings, private answers from a resolver stub, redirects into them,
and DNS rebinding. Nothing here connects anywhere but 127.0.0.1: private, link-local and metadata
addresses only ever come from the classification function or the resolver stub, and the recording
backend proves the guard refused before any connect."""

from __future__ import annotations

import ipaddress

import httpcore
import pytest

from tools_server.core.errors import ToolError
from tools_server.web.client import AuditedClient
from tools_server.web.guard import AddressRefused, Guard, GuardedBackend, classify_address, parse_ip_literal

REFUSED_ADDRESSES = [
    ("127.0.0.1", "loopback"),
    ("127.255.255.254", "loopback"),
    ("::1", "loopback"),
    ("0.0.0.0", "unspecified"),
    ("::", "unspecified"),
    ("10.1.2.3", "private"),
    ("172.16.0.1", "private"),
    ("172.31.255.255", "private"),
    ("192.168.0.1", "private"),
    ("fc00::1", "private"),
    ("fd12:3456::1", "private"),
    ("fec0::1", "private"),
    ("169.254.1.1", "link_local"),
    ("fe80::1", "link_local"),
    ("169.254.169.254", "metadata"),
    ("fd00:ec2::254", "metadata"),
    ("100.100.100.200", "metadata"),
    ("100.64.0.1", "shared"),
    ("224.0.0.251", "multicast"),
    ("ff02::1", "multicast"),
    ("240.0.0.1", "private"),
    ("255.255.255.255", "private"),
    ("192.0.2.1", "private"),
    ("::ffff:127.0.0.1", "ipv4_embedded_in_ipv6:loopback"),
    ("::ffff:169.254.169.254", "ipv4_embedded_in_ipv6:metadata"),
    ("::ffff:8.8.8.8", "ipv4_embedded_in_ipv6"),
    ("::127.0.0.1", "ipv4_embedded_in_ipv6:loopback"),
    ("64:ff9b::a00:1", "ipv4_embedded_in_ipv6:private"),
    ("64:ff9b:1::7f00:1", "ipv4_embedded_in_ipv6:loopback"),
    ("2002:a9fe:a9fe::1", "ipv4_embedded_in_ipv6:metadata"),
    # Teredo: client address is the bitwise inverse of the last 32 bits (0x80fffffe -> 127.0.0.1)
    ("2001:0:4136:e378:8000:63bf:80ff:fffe", "ipv4_embedded_in_ipv6:loopback"),
]


def outcomes(log):
    """The outcome records (kind http); each follows its own attempt record, written before connecting."""
    return [r for r in log.records() if r["kind"] == "http"]


@pytest.mark.parametrize(("address", "reason"), REFUSED_ADDRESSES)
def test_classify_refuses(address, reason):
    assert classify_address(address) == reason


@pytest.mark.parametrize(
    "address", ["8.8.8.8", "1.1.1.1", "93.184.216.34", "2606:4700:4700::1111", "2a00:1450:4001:82a::200e"]
)
def test_classify_public(address):
    assert classify_address(address) is None


@pytest.mark.parametrize(
    ("spelling", "expected"),
    [
        ("127.1", "127.0.0.1"),
        ("127.0.1", "127.0.0.1"),
        ("0x7f000001", "127.0.0.1"),
        ("2130706433", "127.0.0.1"),
        ("0177.0.0.1", "127.0.0.1"),
        ("0x7f.0.0.1", "127.0.0.1"),
        ("0", "0.0.0.0"),
        ("[::1]", "::1"),
        ("017700000001", "127.0.0.1"),
        ("169.254.43518", "169.254.169.254"),
        ("0xa9fea9fe", "169.254.169.254"),
        ("127.0.0.1.", "127.0.0.1"),
    ],
)
def test_legacy_ip_spellings(spelling, expected):
    assert parse_ip_literal(spelling) == ipaddress.ip_address(expected)


@pytest.mark.parametrize("host", ["example.com", "1.2.3.4.5", "256.1.1.1", "0x1g.0.0.1", "127.0.0.1.example"])
def test_not_ip_literals(host):
    assert parse_ip_literal(host) is None


HOSTILE_URLS = [
    "http://127.0.0.1/",
    "http://127.1/",
    "http://0x7f000001/",
    "http://2130706433/",
    "http://0177.0.0.1/",
    "http://[::1]/",
    "http://[::ffff:127.0.0.1]/",
    "http://[::ffff:7f00:1]/",
    "http://0.0.0.0/",
    "http://0/",
    "http://localhost/",
    "http://LOCALHOST./",
    "http://api.localhost/",
    "http://169.254.169.254/latest/meta-data/",
    "http://[fd00:ec2::254]/",
    "http://10.0.0.1/",
    "http://192.168.1.1:8080/",
    "http://[fe80::1]/",
    "http://[64:ff9b::a9fe:a9fe]/",
    "http://[2002:7f00:1::]/",
    "https://172.16.5.4/",
    "file:///etc/passwd",
    "ftp://example.com/",
    "gopher://example.com/",
    "javascript:alert(1)",
    "data:text/html,hi",
    "http://user:pw@example.com/",
    "dict://127.0.0.1:11211/",
    "http://127%2E0%2E0%2E1/",
    "http://%31%32%37.0.0.1/",
    "http://127.0.0.1%2509/",
    "http://[::]/",
    "http://[0:0:0:0:0:ffff:127.0.0.1]/",
    "http://[fe80::1%25eth0]/",
    "http://example.com\\@127.0.0.1/",
    "http://0177.1/",
    "http://[::ffff:a9fe:a9fe]/",
]


@pytest.mark.parametrize("url", HOSTILE_URLS)
def test_check_url_refuses(url):
    with pytest.raises(AddressRefused):
        Guard().check_url(url)


@pytest.mark.parametrize(
    "url", ["http://example.org:99999/", "https://example.org:0/", "http://example.org:-1/"]
)
def test_a_port_out_of_range_is_refused_before_any_lookup(url):
    """httpx parses these ports; on 00212bd the guard passed them on and web_fetch went on to resolve the
    host (port 0 even read as 80)."""
    asked = []
    guard = Guard(resolver=lambda host, port: asked.append(host) or ["93.184.216.34"])
    with pytest.raises(AddressRefused) as err:
        guard.check_url(url)
    assert err.value.reason == "invalid_url" and "not a port" in str(err.value)
    assert asked == []


class RecordingBackend(GuardedBackend):
    """Counts connections that actually reach the socket layer."""

    def __init__(self, guard):
        super().__init__(guard)
        self.connected: list[str] = []
        inner_connect = self._inner.connect_tcp

        def connect(host, port, **kw):
            self.connected.append(host)
            return inner_connect(host, port, **kw)

        self._inner.connect_tcp = connect


def _stub_guard(mapping, allow_port):
    calls = []

    def resolver(host, port):
        calls.append(host)
        if host not in mapping:
            raise OSError("stub: unknown host")
        return list(mapping[host])

    guard = Guard(resolver=resolver, allow=frozenset({(ipaddress.ip_address("127.0.0.1"), allow_port)}))
    return guard, calls


@pytest.mark.parametrize(
    ("host", "answer"),
    [
        ("internal.test", ["10.0.0.5"]),
        ("meta.test", ["169.254.169.254"]),
        ("v6meta.test", ["fd00:ec2::254"]),
        ("mixed.test", ["127.0.0.1", "192.168.1.10"]),
        ("mapped.test", ["::ffff:10.0.0.1"]),
        ("linklocal.test", ["fe80::1"]),
        ("nat64.test", ["64:ff9b::a00:5"]),
    ],
)
def test_resolved_private_address_refused_before_connect(farm, host, answer):
    guard, calls = _stub_guard({host: answer}, farm.port)
    backend = RecordingBackend(guard)
    with pytest.raises(AddressRefused) as info:
        backend.connect_tcp(host, farm.port, timeout=2)
    assert calls == [host]
    assert backend.connected == []  # refused before any socket was opened
    assert info.value.reason != "resolve_failed"


def test_backend_connects_to_the_checked_address(farm):
    guard, calls = _stub_guard({"provider.test": ["127.0.0.1"]}, farm.port)
    backend = RecordingBackend(guard)
    assert calls == []
    stream = backend.connect_tcp("provider.test", farm.port, timeout=2)
    stream.close()
    assert backend.connected == ["127.0.0.1"] and calls == ["provider.test"]


def test_loopback_without_allow_entry_is_refused(farm):
    guard = Guard(resolver=lambda h, p: ["127.0.0.1"])  # no allow-list
    with pytest.raises(AddressRefused):
        guard.resolve_checked("provider.test", farm.port)
    with pytest.raises(AddressRefused):  # the allow-list names a port, not the whole host
        Guard(allow=frozenset({(ipaddress.ip_address("127.0.0.1"), farm.port)})).check_url(
            f"http://127.0.0.1:{farm.port + 1 if farm.port < 65535 else 1}/"
        )


def test_allow_list_accepts_only_loopback(monkeypatch):
    monkeypatch.setenv("SPU_WEB_TEST_ALLOW", "10.0.0.1:80")
    with pytest.raises(ValueError, match="loopback"):
        Guard.from_env()


def test_dns_rebinding_cannot_reach_private_address(farm, tmp_path):
    """The first answer is public-enough (allowed loopback), later answers are private: each new
    connection resolves once and connects to what it checked, so the private answer is refused."""
    answers = iter([["127.0.0.1"], ["10.0.0.5"], ["10.0.0.5"]])
    lookups = []

    def rebinding(host, port):
        lookups.append(host)
        return next(answers)

    guard = Guard(resolver=rebinding, allow=frozenset({(ipaddress.ip_address("127.0.0.1"), farm.port)}))
    client = AuditedClient(None, guard, max_retries=0)
    try:
        ok = client.request("GET", f"http://rebind.test:{farm.port}/notes.txt")
        assert ok.status == 200
        client._http._transport._pool.close()  # force a new connection, hence a new lookup
        with pytest.raises(ToolError) as info:
            client.request("GET", f"http://rebind.test:{farm.port}/notes.txt")
        assert info.value.code == "url_refused"
        assert lookups == [
            "rebind.test",
            "rebind.test",
        ]  # one lookup per connection, none between check and connect
    finally:
        client.close()


def test_redirect_into_private_address_refused(make_gateway, farm):
    gw = make_gateway()
    before = len(farm.paths())
    target = f"http://internal.test:{farm.port}/latest/meta-data/"
    with pytest.raises(ToolError) as info:
        gw.client.request("GET", farm.url(f"/redirect-to?to={target}"))
    assert info.value.code == "url_refused"
    assert farm.paths()[before:] == ["/redirect-to"]
    records = outcomes(gw.audit)
    assert records[-2]["status"] == 302 and records[-2]["location"] == target
    assert records[-1]["error"] == "url_refused" and records[-1]["hop"] == 1 and "peer" not in records[-1]


@pytest.mark.parametrize(
    "target",
    [
        "http://169.254.169.254/latest/meta-data/",
        "http://[::1]:22/",
        "file:///etc/passwd",
        "http://localhost/admin",
        "gopher://127.0.0.1:25/",
    ],
)
def test_redirect_to_hostile_literal_refused(make_gateway, farm, target):
    gw = make_gateway()
    with pytest.raises(ToolError) as info:
        gw.client.request("GET", farm.url(f"/redirect-to?to={target}"))
    assert info.value.code == "url_refused"


def test_unix_socket_refused():
    with pytest.raises(AddressRefused):
        GuardedBackend(Guard()).connect_unix_socket("x.sock")


def test_connect_error_is_not_masked(farm):
    """A closed loopback port gives http_error (a real connect attempt), not a guard refusal."""
    import socket

    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    guard = Guard(allow=frozenset({(ipaddress.ip_address("127.0.0.1"), port)}))
    with pytest.raises(httpcore.ConnectError):
        GuardedBackend(guard).connect_tcp("127.0.0.1", port, timeout=2)
