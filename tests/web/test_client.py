"""The audited client against real loopback servers: caps, retries, redirects, environment isolation."""

from __future__ import annotations

import time

import pytest

from tools_server.core.errors import ToolError
from tools_server.web.client import _parse_retry_after, redact_url


def outcomes(log):
    """The outcome records (kind http); each follows its own attempt record, written before connecting."""
    return [r for r in log.records() if r["kind"] == "http"]


def test_every_attempt_logged_with_hash_and_peer(make_gateway, farm):
    gw = make_gateway()
    r = gw.client.request("GET", farm.url("/notes.txt"), tool="web_fetch", call_id="c1")
    assert r.status == 200 and r.content == b"plain notes\nsecond line\n"
    rec = outcomes(gw.audit)[-1]
    assert rec["kind"] == "http" and rec["call_id"] == "c1" and rec["status"] == 200
    assert rec["bytes"] == 24 and rec["content_sha256"] == r.sha256 and rec["peer"] == "127.0.0.1"
    assert rec["content_type"] == "text/plain" and rec["latency_ms"] >= 0


def test_redirect_chain_followed_hop_by_hop(make_gateway, farm):
    gw = make_gateway()
    r = gw.client.request("GET", farm.url("/redirect/3"))
    assert r.status == 200 and r.final_url == farm.url("/page.html") and len(r.redirects) == 3
    hops = [rec["hop"] for rec in outcomes(gw.audit)]
    assert hops == [0, 1, 2, 3]


def test_too_many_redirects(make_gateway, farm):
    gw = make_gateway(max_redirects=2)
    with pytest.raises(ToolError) as info:
        gw.client.request("GET", farm.url("/redirect/5"))
    assert info.value.code == "http_error" and "redirects" in info.value.message


def test_slow_body_hits_total_timeout(make_gateway, farm):
    gw = make_gateway(timeout_s=1.0, max_retries=0)
    t0 = time.monotonic()
    with pytest.raises(ToolError) as info:
        gw.client.request("GET", farm.url("/slow"))
    assert info.value.code == "timeout"
    assert time.monotonic() - t0 < 12  # a no-hang bound: the server would drip for 20 s


def test_declared_oversize_refused_without_reading(make_gateway, farm):
    gw = make_gateway(max_retries=0)
    with pytest.raises(ToolError) as info:
        gw.client.request("GET", farm.url("/huge-declared"))
    assert info.value.code == "too_large"


def test_streamed_oversize_stops_at_cap(make_gateway, farm):
    gw = make_gateway(max_retries=0, max_bytes=1024 * 1024)
    with pytest.raises(ToolError) as info:
        gw.client.request("GET", farm.url("/huge-chunked"))  # 6.4 MB without Content-Length
    assert info.value.code == "too_large"
    assert outcomes(gw.audit)[-1]["error"] == "too_large"


def test_gzip_bomb_stops_at_cap(make_gateway, farm):
    import tracemalloc

    gw = make_gateway(max_retries=0, max_bytes=1024 * 1024)
    tracemalloc.start()
    with pytest.raises(ToolError) as info:
        gw.client.request("GET", farm.url("/bomb"))  # 40 KB on the wire, 40 MB inflated
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert info.value.code == "too_large"
    assert peak < 16 * 1024 * 1024  # bounded decompression never held the 40 MB


def test_gzip_decoded(make_gateway, farm):
    r = make_gateway().client.request("GET", farm.url("/gzip"))
    assert r.content == b"compressed text body " * 10


def test_retry_after_honoured(make_gateway, farm):
    gw = make_gateway()
    t0 = time.monotonic()
    r = gw.client.request("GET", farm.url("/retry-after?k=a"))
    assert r.status == 200 and r.content == b"after retry"
    assert time.monotonic() - t0 >= 0.95  # waited the server's Retry-After: 1
    attempts = [(rec["attempt"], rec["status"]) for rec in outcomes(gw.audit)]
    assert attempts == [(1, 429), (2, 200)]


def test_retries_exhausted_returns_last_status(make_gateway, farm):
    gw = make_gateway(max_retries=2)
    r = gw.client.request("GET", farm.url("/always-503"))
    assert r.status == 503
    assert [rec["attempt"] for rec in outcomes(gw.audit)] == [1, 2, 3]


def test_long_retry_after_not_waited(make_gateway, farm):
    assert _parse_retry_after("120") == 120.0
    assert _parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT") == 0.0
    assert _parse_retry_after("soon") is None


def test_environment_proxies_ignored(make_gateway, farm, monkeypatch):
    # trust_env is off: a proxy in the environment must not be used (it would point nowhere).
    monkeypatch.setenv("HTTP_PROXY", "http://127.0.0.1:9")
    monkeypatch.setenv("ALL_PROXY", "http://127.0.0.1:9")
    assert make_gateway().client.request("GET", farm.url("/notes.txt")).status == 200


def test_secrets_redacted_in_log(make_gateway, farm):
    gw = make_gateway()
    gw.client.request("GET", farm.url("/notes.txt"), params={"api_key": "s3cret", "q": "x"})
    line = gw.audit.path.read_text()
    assert "s3cret" not in line and "api_key=REDACTED" in line
    assert redact_url("https://a.org/x?token=abc&b=1") == "https://a.org/x?token=REDACTED&b=1"


def test_provider_rate_limit_spaces_requests(make_gateway, farm):
    from tools_server.web.client import ProviderLimit

    gw = make_gateway(limits={"slowprov": ProviderLimit(4, 1)})
    t0 = time.monotonic()
    for _ in range(3):
        gw.client.request("GET", farm.url("/notes.txt"), provider="slowprov")
    assert time.monotonic() - t0 >= 0.45  # three requests at 4/s span at least two intervals of 0.25 s


def test_each_attempt_is_on_record_before_its_connection(make_gateway, farm):
    """An attempt record precedes every outcome, so a connection the process never returns from (a kill,
    a hang) still left its URL in the log."""
    gw = make_gateway()
    gw.client.request("GET", farm.url("/redirect/2"), tool="web_fetch", call_id="a1")
    records = [r for r in gw.audit.records() if r["kind"] in ("attempt", "http")]
    assert [r["kind"] for r in records] == ["attempt", "http"] * 3
    for attempt, outcome in zip(records[::2], records[1::2], strict=True):
        assert (attempt["url"], attempt["hop"], attempt["call_id"]) == (outcome["url"], outcome["hop"], "a1")
        assert attempt["method"] == "GET" and "status" not in attempt and attempt["seq"] < outcome["seq"]
