"""The strict audited setting on a plain Docker engine (`spu harbor export --network audited`, no
--audit-url; docs/harbor.md): the agent's container on an internal network whose only other member is the
audit service (`spu audit serve`), which alone has a way out. In the test every network is internal, so
nothing leaves the machine: the audit service's way out leads to a stand-in web server reachable only from
its side (on its loopback) and to a second container on its egress network.

The agent (tests/container/scripted_agent.py) calls `web_fetch` through `spu serve` over MCP, which forwards
to the audit service: the stand-in page comes back and the call is in the service's keyed log. Its shell
reaches nothing else: curl, Python sockets and DNS all fail, but for the audit service's own port."""

from __future__ import annotations

import json
import secrets
import subprocess
import sys

import yaml
from container_helpers import REPO, docker, spu, task_dir

from environment.demo_tasks import demo_task_dir
from spu_common.audit_log import key_path

EGRESS_SUBNET = "172.31.250.0/24"
CANARY_IP = "172.31.250.10"
WEB_PORT = 8080
MARKER = "stand-in page for the audited network test"

PROBE = r"""
set -u
cat > /tmp/probe.py <<'PY'
import asyncio, json, os, socket, subprocess

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

CANARY_IP, PORT = os.environ["CANARY_IP"], int(os.environ["WEB_PORT"])
found = {}


async def fetch_through_spu() -> None:
    server = StdioServerParameters(command="spu", args=["serve"], env=dict(os.environ))
    async with stdio_client(server) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        for name, url in (
            ("stand_in", f"http://127.0.0.1:{PORT}/page.html"),  # the audit service's loopback
            ("canary", f"http://canary:{PORT}/"),  # a private address on its egress network
        ):
            result = await session.call_tool("web_fetch", {"url": url})
            text = " ".join(getattr(c, "text", "") for c in result.content)
            found[f"fetch_{name}"] = {"error": result.is_error, "text": text[:2000]}


def connect(host: str, port: int) -> str:
    try:
        socket.create_connection((host, port), timeout=5).close()
        return "connected"
    except OSError as exc:
        return type(exc).__name__ + ": " + str(exc)


asyncio.run(fetch_through_spu())
for name, host in (("canary_ip", CANARY_IP), ("audit_web_port", "spu-audit"), ("own_loopback", "127.0.0.1")):
    found[f"socket_{name}"] = connect(host, PORT)
found["socket_audit_api"] = connect("spu-audit", 8765)  # the one peer: reachable
for name in ("canary", "nothing.invalid", "spu-audit"):
    try:
        found[f"dns_{name}"] = socket.gethostbyname(name)
    except OSError as exc:
        found[f"dns_{name}"] = type(exc).__name__
for name, url in (("canary", f"http://{CANARY_IP}:{PORT}/"), ("stand_in", f"http://spu-audit:{PORT}/page.html")):
    done = subprocess.run(["curl", "-sS", "-m", "5", "-o", "/dev/null", url], capture_output=True, text=True)
    found[f"curl_{name}"] = {"exit": done.returncode, "stderr": done.stderr.strip()}
found["interfaces"] = sorted(line.split(":")[0].strip() for line in open("/proc/net/dev").readlines()[2:])
json.dump(found, open("/app/output/probe.json", "w"), indent=1)
PY
CANARY_IP=@CANARY_IP@ WEB_PORT=@WEB_PORT@ python3 /tmp/probe.py
python3 - <<'PY'
import json
contract = json.load(open("/app/task/contract.json"))
rankings = [{"group_id": g["group_id"], "order": g["experiment_ids"]} for g in contract["groups"]]
json.dump({"task_id": contract["task_id"], "rankings": rankings}, open("/app/output/rankings.json", "w"))
PY
"""


def _serve(bind: str) -> list[str]:
    """A web server of one page on ``bind``:WEB_PORT (the standard library's)."""
    page = f"<html><body><p>{MARKER}</p></body></html>"
    return [
        "sh",
        "-c",
        f"mkdir -p /tmp/site && echo '{page}' > /tmp/site/page.html && "
        f"exec python3 -m http.server {WEB_PORT} --bind {bind} --directory /tmp/site",
    ]


def test_web_fetch_goes_through_the_audit_service_and_nothing_else_is_reached(
    test_image, run_trial, tmp_path, monkeypatch
):
    task = task_dir(tmp_path, "audited")
    demo = str(demo_task_dir("aromatic-acidity"))
    spu("harbor", "export", demo, str(task), "--image", test_image, "--network", "audited")
    compose_file = task / "environment" / "docker-compose.yaml"
    compose = yaml.safe_load(compose_file.read_text())
    quick = {"test": ["CMD", "true"], "interval": "1s", "retries": 30}
    # the test's changes: the egress network internal as well (nothing may leave this machine), a stand-in
    # web server on the audit service's loopback (its guard admits that one loopback port for tests) and a
    # second server on the egress network
    compose["networks"]["spu-audit-egress"] = {
        "internal": True,
        "ipam": {"config": [{"subnet": EGRESS_SUBNET}]},
    }
    compose["services"]["spu-audit"]["environment"]["SPU_WEB_TEST_ALLOW"] = f"127.0.0.1:{WEB_PORT}"
    compose["services"]["web"] = {
        "image": test_image,
        "network_mode": "service:spu-audit",
        "depends_on": ["spu-audit"],
        "command": _serve("127.0.0.1"),
        "healthcheck": quick,
    }
    compose["services"]["canary"] = {
        "image": test_image,
        "networks": {"spu-audit-egress": {"ipv4_address": CANARY_IP}},
        "command": _serve("0.0.0.0"),
        "healthcheck": quick,
    }
    compose_file.write_text(yaml.safe_dump(compose))
    assert all(net.get("internal") for net in compose["networks"].values())
    script = tmp_path / "probe.sh"
    script.write_text(PROBE.replace("@CANARY_IP@", CANARY_IP).replace("@WEB_PORT@", str(WEB_PORT)))
    monkeypatch.setenv("SPU_AUDIT_TOKEN", secrets.token_urlsafe(32))
    trial = run_trial(task, "--agent", "scripted_agent:ScriptedAgent", "--ak", f"script={script}")
    assert trial.result.get("exception_info") is None, trial.result["exception_info"]
    script_log = (trial.trial_dir / "agent" / "script.txt").read_text()
    probe_file = trial.trial_dir / "artifacts" / "app" / "collected" / "output" / "probe.json"
    assert probe_file.is_file(), script_log[-3000:]
    probe = json.loads(probe_file.read_text())

    # web_fetch reached the stand-in page through the audit service
    assert probe["fetch_stand_in"]["error"] is False and MARKER in probe["fetch_stand_in"]["text"], probe
    # a private address on the service's egress network is refused by its guard, not fetched
    assert probe["fetch_canary"]["error"] is True and "url_refused" in probe["fetch_canary"]["text"], probe
    # the agent's shell reaches nothing but the audit service's API
    assert probe["socket_audit_api"] == "connected"
    for name in ("canary_ip", "audit_web_port", "own_loopback"):
        assert probe[f"socket_{name}"] != "connected", probe
    assert probe["dns_canary"] == "gaierror" and probe["dns_nothing.invalid"] == "gaierror", probe
    assert probe["dns_spu-audit"].count(".") == 3  # the service's own name resolves
    for name in ("canary", "stand_in"):
        assert probe[f"curl_{name}"]["exit"] != 0, probe
    assert probe["interfaces"] == ["eth0", "lo"]
    # the agent's container has one network, internal, shared with the audit service only
    networks = json.loads(
        docker("inspect", "--format", "{{json .NetworkSettings.Networks}}", trial.agent_container)
    )
    assert len(networks) == 1 and next(iter(networks)).endswith("spu-audit-internal"), networks
    members = json.loads(
        docker("network", "inspect", "--format", "{{json .Containers}}", next(iter(networks)))
    )
    assert set(members) == {trial.services["main"], trial.services["spu-audit"]}, members

    # the call is in the audit service's log, collected from its own container; the keyed chain verifies
    audit = trial.trial_dir / "artifacts" / "srv" / "spu" / "audit"
    records = [json.loads(line) for line in (audit / "audit.jsonl").read_text().splitlines()]
    calls = [r for r in records if r.get("kind") == "call" and r.get("tool") == "web_fetch"]
    urls = [json.dumps(r.get("args")) for r in calls]
    assert any(f"127.0.0.1:{WEB_PORT}/page.html" in u for u in urls), urls
    assert any("canary" in u for u in urls), urls
    log = audit / "audit.jsonl"
    verified = subprocess.run(
        [sys.executable, "-m", "spu", "audit", "verify", str(log), "--key", str(key_path(log))],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=120,
        check=False,
    )
    assert verified.returncode == 0, verified.stdout + verified.stderr
