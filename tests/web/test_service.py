"""The audit service as a separate process with a token, forwarding from the MCP tools, a SIGKILL during a
burst of calls, and the web tools through the real MCP client over stdio."""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from spu_common.audit_log import read_records, summary, verify
from tools_server.core.context import ToolContext
from tools_server.core.errors import ToolError
from tools_server.web.service import RemoteGateway

REPO = Path(__file__).resolve().parents[2]
TOKEN = "test-token-5f1c"


class Service:
    def __init__(
        self, env: dict[str, str], log: Path, policy: Path | None, socket: Path | None = None
    ) -> None:
        args = [sys.executable, "-m", "spu", "audit", "serve", "--log", str(log), "--token", TOKEN]
        args += ["--socket", str(socket)] if socket is not None else ["--port", "0"]
        if policy is not None:
            args += ["--policy", str(policy)]
        self.log = log
        self.proc = subprocess.Popen(
            args, env=env, cwd=str(REPO), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"audit service did not start: {self.proc.stderr.read()}")
        self.url = json.loads(line)["url"]

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc.stdout.close()
        self.proc.stderr.close()


@pytest.fixture
def start_service(web_env, tmp_path):
    started: list[Service] = []

    def start(policy: dict | None = None, name: str = "svc", socket: Path | None = None) -> Service:
        policy_file = None
        if policy is not None:
            policy_file = tmp_path / f"{name}-policy.json"
            policy_file.write_text(json.dumps(policy))
        svc = Service(web_env, tmp_path / name / "audit.jsonl", policy_file, socket)
        started.append(svc)
        return svc

    yield start
    for svc in started:
        svc.stop()


POLICY = {"mode": "enforce", "doi": "10.1021/jacs.5b01234"}


def test_token_required(start_service):
    svc = start_service()
    with pytest.raises(ToolError) as info:
        RemoteGateway(svc.url, "wrong-token").call("web_search", {"query": "x", "provider": "brave"})
    assert info.value.code == "http_error" and "token" in info.value.message
    import httpx

    r = httpx.get(f"{svc.url}/v1/health", trust_env=False)
    assert r.status_code == 401


def test_forwarding_from_tools_never_reads_policy(start_service, farm, monkeypatch, tmp_path):
    from tools_server.core import settings
    from tools_server.web import tools

    svc = start_service(POLICY)
    monkeypatch.setenv("SPU_AUDIT_URL", svc.url)
    monkeypatch.setenv("SPU_AUDIT_TOKEN", TOKEN)
    monkeypatch.setenv("SPU_POLICY", str(tmp_path / "no-such-policy.json"))  # embedded mode would fail on it
    ctx = ToolContext("web_search", "fw-1")
    out = tools.web_search(tools.SearchInput(query="amines", provider="brave"), ctx)
    assert out.results[0].url == "https://example.org/amines"
    pdb = tools.pdb_lookup(tools.PDBInput(pdb_id="1CRN"), ToolContext("pdb_lookup", "fw-2"))
    assert Path(pdb.structure_file).read_text() == farm.crn_cif
    assert not (settings.workdir() / "audit").exists()  # nothing logged on the agent side
    calls = [r for r in read_records(svc.log) if r["kind"] == "call"]
    assert [c["call_id"] for c in calls] == ["fw-1", "fw-2"]
    flagged = tools.web_fetch(
        tools.FetchInput(url=farm.url("/flagged.html")), ToolContext("web_fetch", "fw-3")
    )
    assert flagged.withheld and "10.1021" not in flagged.model_dump_json()
    with pytest.raises(ToolError) as info:
        tools.web_fetch(tools.FetchInput(url=farm.url("/notes.txt")), ToolContext("web_fetch", "fw-4"))
    assert info.value.code == "policy_blocked"
    import httpx

    health = httpx.get(
        f"{svc.url}/v1/health", headers={"Authorization": f"Bearer {TOKEN}"}, trust_env=False
    ).json()
    assert health["mode"] == "enforce" and "10.1021" not in json.dumps(health)
    assert verify(svc.log).ok


def test_missing_token_is_a_clear_error(monkeypatch):
    from tools_server.web import tools

    monkeypatch.setenv("SPU_AUDIT_URL", "http://127.0.0.1:9")
    monkeypatch.delenv("SPU_AUDIT_TOKEN", raising=False)
    with pytest.raises(ToolError) as info:
        tools.current_gateway()
    assert "SPU_AUDIT_TOKEN" in info.value.message


@pytest.mark.slow
def test_sigkill_during_burst_loses_no_returned_call(start_service, farm):
    svc = start_service()
    remote = RemoteGateway(svc.url, TOKEN, timeout_s=30)
    returned: list[str] = []
    lock = threading.Lock()
    stop = threading.Event()

    def worker(w: int) -> None:
        for i in range(1000):
            if stop.is_set():
                return
            call_id = f"w{w}-{i}"
            try:
                remote.call("web_fetch", {"url": farm.url(f"/notes.txt?w={w}&i={i}")}, call_id)
            except ToolError:
                return  # the service died under us
            with lock:
                returned.append(call_id)

    threads = [threading.Thread(target=worker, args=(w,)) for w in range(6)]
    for t in threads:
        t.start()
    while True:
        with lock:
            if len(returned) >= 60:
                break
        threads[0].join(0.05)
    os.kill(svc.proc.pid, signal.SIGKILL)
    stop.set()
    for t in threads:
        t.join(timeout=60)
    svc.proc.wait(timeout=10)
    result = verify(svc.log)
    assert result.ok, result.errors
    logged = {r["call_id"] for r in read_records(svc.log) if r["kind"] == "call" and not r.get("error")}
    missing = [c for c in returned if c not in logged]
    assert missing == [] and len(returned) >= 60


def test_web_tools_over_mcp(web_env, farm, start_mcp_server):
    server = start_mcp_server(web_env)
    tools = {t.name: t for t in server.list_tools()}
    for name in (
        "web_search",
        "web_fetch",
        "literature_search",
        "pubchem_lookup",
        "uniprot_lookup",
        "pdb_lookup",
    ):
        assert (
            tools[name].annotations.open_world_hint is True and tools[name].annotations.read_only_hint is True
        )
    out = server.call_ok("web_fetch", {"url": farm.url("/page.html")})
    assert "iridium, rhodium and ruthenium" in out["content"] and out["provenance"]["tool"] == "web_fetch"
    err = server.call_error("web_fetch", {"url": "http://169.254.169.254/latest/meta-data/"})
    assert err["code"] == "url_refused"
    log = Path(web_env["SPU_WORKDIR"]) / "audit" / "audit.jsonl"
    assert verify(log).ok and sum(1 for r in read_records(log) if r["kind"] == "call") == 2
    # the SSRF refusal counts as a refusal in `spu audit summary` (it said "0 refused" before)
    counts = summary(log)
    assert counts["refused_calls"] == 1 and counts["url_refusals"] == 1 and counts["policy_refusals"] == 0


# --- the service on a Unix socket (the agent's only way out in `spu harbor export --network audited`)

#: a uid no account of this machine has (the socket's permissions are checked against it)
OTHER_UID = 64123
needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="connecting as another user needs root")


@pytest.fixture
def socket_dir():
    """A folder any user may enter (pytest's own are root-only), so that only the socket's mode decides."""
    import shutil
    import tempfile

    path = Path(tempfile.mkdtemp(prefix="spu-audit-"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path)


def _health(url_or_socket: str | Path, token: str | None) -> int:
    import httpx

    headers = {"Authorization": f"Bearer {token}"} if token else {}
    transport = httpx.HTTPTransport(uds=str(url_or_socket))
    with httpx.Client(transport=transport, trust_env=False) as client:
        return client.get("http://localhost/v1/health", headers=headers).status_code


def test_forwarding_through_a_unix_socket_with_the_token(start_service, farm, monkeypatch, socket_dir):
    from tools_server.web import tools

    path = socket_dir / "audit.sock"
    svc = start_service(socket=path)
    assert svc.url == f"unix://{path}"
    # made with mode 660 (owner and group), and the token is required on it as on TCP
    assert stat.S_ISSOCK(path.lstat().st_mode) and stat.S_IMODE(path.lstat().st_mode) == 0o660
    assert _health(path, None) == 401 and _health(path, "wrong") == 401 and _health(path, TOKEN) == 200
    monkeypatch.setenv("SPU_AUDIT_URL", svc.url)
    monkeypatch.setenv("SPU_AUDIT_TOKEN", TOKEN)
    out = tools.web_fetch(tools.FetchInput(url=farm.url("/page.html")), ToolContext("web_fetch", "uds-1"))
    assert "iridium, rhodium and ruthenium" in out.content
    calls = [r for r in read_records(svc.log) if r["kind"] == "call"]
    assert [(c["call_id"], c["args"]["url"]) for c in calls] == [("uds-1", farm.url("/page.html"))]
    with pytest.raises(ToolError) as info:
        RemoteGateway(svc.url, "wrong-token").call("web_fetch", {"url": farm.url("/page.html")})
    assert info.value.code == "http_error" and "token" in info.value.message
    svc.stop()
    assert not path.exists()  # the service removes its socket when it ends (SIGTERM)


@needs_root
def test_the_socket_admits_its_owner_and_group_only(start_service, socket_dir):
    import shutil

    # the system's Python: the other user may not enter the folder of this one
    python = shutil.which("python3", path="/usr/bin:/bin")
    if python is None:
        pytest.skip("no system python3 for the other user")
    path = socket_dir / "audit.sock"
    start_service(socket=path)
    probe = "import socket, sys; socket.socket(socket.AF_UNIX).connect(sys.argv[1])"

    def connect_as_other_user() -> subprocess.CompletedProcess:
        return subprocess.run(
            [python, "-I", "-c", probe, str(path)],
            user=OTHER_UID,
            group=OTHER_UID,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )

    refused = connect_as_other_user()
    assert refused.returncode == 1 and "PermissionError" in refused.stderr, refused.stderr
    path.chmod(0o666)  # the mode is what refused it: opened to everyone, the same user connects
    assert connect_as_other_user().returncode == 0


def _serve_cmd(env: dict[str, str], tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "spu",
            "audit",
            "serve",
            "--log",
            str(tmp_path / "a.jsonl"),
            "--token",
            TOKEN,
            *args,
        ],
        env=env,
        cwd=str(REPO),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_a_socket_path_that_cannot_be_used_is_a_usage_error(web_env, start_service, socket_dir, tmp_path):
    taken = socket_dir / "file.sock"
    taken.write_text("not a socket")
    done = _serve_cmd(web_env, tmp_path, "--socket", str(taken))
    assert done.returncode == 2 and done.stderr.strip().splitlines() == [
        f"error: cannot listen on {taken}: it exists and is not a socket; remove it or choose another path"
    ]
    assert taken.read_text() == "not a socket"  # left as it was
    live = socket_dir / "live.sock"
    start_service(socket=live)
    done = _serve_cmd(web_env, tmp_path, "--socket", str(live))
    assert done.returncode == 2 and "another service listens there" in done.stderr
    assert _health(live, TOKEN) == 200  # the running service keeps its socket
    done = _serve_cmd(web_env, tmp_path, "--socket", str(socket_dir / "x.sock"), "--port", "0")
    assert done.returncode == 2 and "give one or the other" in done.stderr


def test_a_socket_left_by_a_service_that_ended_is_replaced(start_service, socket_dir):
    import socket

    path = socket_dir / "audit.sock"
    with socket.socket(socket.AF_UNIX) as left:
        left.bind(str(path))  # bound, never listening: what a killed service leaves
    svc = start_service(socket=path)
    assert svc.url == f"unix://{path}" and _health(path, TOKEN) == 200


@pytest.mark.parametrize(
    "url",
    [
        "unix://run/audit.sock",
        "unix:relative.sock",
        "unix:///run/a.sock?x=1",
        "ftp://host/",
        "spu-audit:8765",
    ],
)
def test_an_audit_url_that_is_no_address_is_a_clear_tool_error(url, monkeypatch):
    from tools_server.web import tools

    monkeypatch.setenv("SPU_AUDIT_URL", url)
    monkeypatch.setenv("SPU_AUDIT_TOKEN", TOKEN)
    with pytest.raises(ToolError) as info:
        tools.current_gateway()
    assert info.value.code == "http_error"
    assert (
        info.value.message.startswith("SPU_AUDIT_URL: ")
        and "unix:///absolute/path.sock" in info.value.message
    )
