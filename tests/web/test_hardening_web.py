"""Issue 14 regressions on the web side: redirects to any scheme are audited and refused, unparseable
redirect targets are not retried, a dripping server cannot hold a call past its deadline, and the audit
log refuses appends once it no longer matches its seal."""

from __future__ import annotations

import json
import time

import pytest

from spu_common.audit_log import seal_path, verify
from tools_server.core.errors import ToolError
from tools_server.web.audit import AuditLog
from tools_server.web.policy import Policy


def outcomes(log):
    """The outcome records (kind http); each follows its own attempt record, written before connecting."""
    return [r for r in log.records() if r["kind"] == "http"]


@pytest.mark.parametrize(
    "target",
    ["data:text/plain,hello", "mailto:someone@example.org", "javascript:alert(1)", "file:///etc/passwd"],
)
def test_redirect_to_any_scheme_is_logged_and_refused(make_gateway, farm, target):
    gw = make_gateway(max_retries=0)
    with pytest.raises(ToolError) as info:
        gw.client.request("GET", farm.url(f"/redirect-to?to={target}"), tool="web_fetch", call_id="r1")
    assert info.value.code == "url_refused"
    records = outcomes(gw.audit)
    assert [r["hop"] for r in records] == [0, 1]
    assert records[0]["status"] == 302 and records[1]["error"] == "url_refused"
    assert records[1]["url"].split(":", 1)[0] == target.split(":", 1)[0]


@pytest.mark.parametrize("target", ["http://[::1", "http://exa mple.org:99999/", "https://[zz::1]/x"])
def test_unparseable_redirect_is_refused_without_retry(make_gateway, farm, target):
    gw = make_gateway(max_retries=3)
    with pytest.raises(ToolError) as info:
        gw.client.request("GET", farm.url("/redirect-to"), params={"to": target}, tool="web_fetch")
    assert info.value.code == "url_refused"
    records = outcomes(gw.audit)
    assert len(records) == 2 and records[-1]["error"] == "url_refused"  # one attempt, then the refusal


def test_dripping_body_cannot_outlast_the_call_deadline(make_gateway, farm):
    # each byte comes inside the 1 s read timeout; retries would restart the clock without a call deadline
    gw = make_gateway(timeout_s=1.0, call_timeout_s=2.5, max_retries=3)
    t0 = time.monotonic()
    with pytest.raises(ToolError) as info:
        gw.client.request("GET", farm.url("/drip?every=0.6"))
    elapsed = time.monotonic() - t0
    assert info.value.code == "timeout"
    # a no-hang bound, not a speed: without the call deadline the drip lasts 60 s
    assert elapsed < 20, f"held for {elapsed:.1f} s with a 2.5 s call limit"


def test_attempt_deadline_holds_while_bytes_drip(make_gateway, farm):
    gw = make_gateway(timeout_s=1.0, call_timeout_s=60, max_retries=0)
    t0 = time.monotonic()
    with pytest.raises(ToolError) as info:
        gw.client.request("GET", farm.url("/drip?every=0.9"))
    # a no-hang bound, not a speed: without the attempt deadline the drip lasts 90 s
    assert info.value.code == "timeout" and time.monotonic() - t0 < 20


def _sealed_log(tmp_path, n=4) -> AuditLog:
    log = AuditLog(tmp_path / "audit.jsonl")
    for i in range(n):
        log.append({"kind": "http", "i": i})
    return log


def assert_append_refused(path) -> ToolError:
    with pytest.raises(ToolError) as info:
        AuditLog(path).append({"kind": "http", "after": True})
    assert info.value.code == "audit_log_invalid"
    return info.value


def test_truncated_log_refuses_appends_and_keeps_the_seal(tmp_path):
    log = _sealed_log(tmp_path)
    lines = log.path.read_text().splitlines(keepends=True)
    log.path.write_text("".join(lines[:2]))
    seal_before = seal_path(log.path).read_bytes()
    assert "truncated" in assert_append_refused(log.path).message
    assert seal_path(log.path).read_bytes() == seal_before  # never rewritten to match the shorter log
    assert not verify(log.path).ok


def test_emptied_log_refuses_appends(tmp_path):
    log = _sealed_log(tmp_path)
    log.path.write_text("")
    assert_append_refused(log.path)
    assert log.path.read_text() == "" and not verify(log.path).ok


def test_deleted_seal_refuses_appends(tmp_path):
    log = _sealed_log(tmp_path)
    seal_path(log.path).unlink()
    assert "seal" in assert_append_refused(log.path).message
    assert not seal_path(log.path).exists() and not verify(log.path).ok


def test_same_writer_notices_a_deleted_seal(tmp_path):
    log = _sealed_log(tmp_path)
    seal_path(log.path).unlink()
    with pytest.raises(ToolError):
        log.append({"kind": "http"})


def test_removed_last_records_refuse_appends_even_with_a_forged_shorter_seal_missing(tmp_path):
    log = _sealed_log(tmp_path, 6)
    lines = log.path.read_text().splitlines(keepends=True)
    log.path.write_text("".join(lines[:3]))
    seal_path(log.path).unlink()
    assert_append_refused(log.path)


def test_corrupt_last_line_after_the_seal_is_cut_and_recorded(tmp_path):
    log = _sealed_log(tmp_path, 3)
    with open(log.path, "ab") as fh:
        fh.write(b"{garbage that a dying writer left}\n")
    rec = AuditLog(log.path).append({"kind": "http", "after": True})
    records = AuditLog(log.path).records()
    assert records[3]["kind"] == "recovery" and records[3]["dropped_bytes"] == 35
    assert rec["seq"] == 4 and verify(log.path).ok


def test_corrupt_sealed_last_line_refuses_appends(tmp_path):
    log = _sealed_log(tmp_path, 3)
    lines = log.path.read_text().splitlines(keepends=True)
    lines[-1] = "{not a record}\n"
    log.path.write_text("".join(lines))
    assert_append_refused(log.path)


def test_enforce_block_survives_deleting_flagged_records_and_a_restart(make_gateway, farm, tmp_path):
    policy = Policy.from_dict({"mode": "enforce", "doi": "10.1021/jacs.5b01234"})
    log_path = tmp_path / "enf" / "audit.jsonl"
    gw = make_gateway(policy=policy, log=log_path)
    out = gw.call("web_fetch", {"url": farm.url("/flagged.html")})
    assert out.get("withheld") is True and gw.exposed
    # delete every flagged record and rebuild a valid chain and seal from the rest, then restart
    kept = [r for r in AuditLog(log_path).records() if not r.get("flags")]
    log_path.unlink()
    seal_path(log_path).unlink()
    rebuilt = AuditLog(log_path)
    for r in kept:
        rebuilt.append({k: v for k, v in r.items() if k not in ("seq", "prev", "hash", "ts")})
    assert verify(log_path).ok and not any(r.get("flags") for r in rebuilt.records())
    gw2 = make_gateway(policy=policy, log=log_path)
    assert gw2.exposed
    with pytest.raises(ToolError) as info:
        gw2.call("web_fetch", {"url": farm.url("/page.html")})
    assert info.value.code == "policy_blocked"


def test_verify_cli_explains_a_refused_log(tmp_path):
    import subprocess
    import sys

    log = _sealed_log(tmp_path)
    log.path.write_text("")
    res = subprocess.run(
        [sys.executable, "-m", "spu", "audit", "verify", str(log.path), "--json"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    out = json.loads(res.stdout)
    assert res.returncode != 0 and not out["ok"] and any("truncated" in e for e in out["errors"])


def test_web_call_on_a_tampered_log_opens_no_connection(make_gateway, farm, tmp_path):
    log_path = tmp_path / "t" / "audit.jsonl"
    gw = make_gateway(log=log_path)
    gw.call("web_fetch", {"url": farm.url("/notes.txt")})
    log_path.write_text("")  # emptied by someone
    before = len(farm.paths())
    with pytest.raises(ToolError) as info:
        gw.call("web_fetch", {"url": farm.url("/notes.txt")})
    assert info.value.code == "audit_log_invalid"
    assert len(farm.paths()) == before and log_path.read_text() == ""
