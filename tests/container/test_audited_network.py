"""The strict audited setting on a plain Docker engine (`spu harbor export --network audited`, no
--audit-url; docs/harbor.md): the agent's container has no network at all, only loopback; the tool server in
it reaches the audit service (`spu audit serve --socket`) through a Unix socket in a folder the two
containers share, read-only on the agent's side; the audit service alone has a network.

In the test the audit service has no network either (nothing leaves this machine): the page it fetches is a
stand-in web server on its own loopback, which the agent's container cannot reach (its loopback is its own).
The agent (tests/container/scripted_agent.py) calls `web_fetch` through `spu serve` over MCP: the stand-in
page comes back and the call is in the service's keyed log. Its shell reads its interfaces (only `lo`) and
routes (none), and finds the socket's folder read-only and the socket guarded by the token. Traffic goes
only over loopback and the socket: there is no gateway or other address to probe."""

from __future__ import annotations

import json
import secrets
import subprocess
import sys

import yaml
from container_helpers import REPO, docker, spu, task_dir

from environment.demo_tasks import demo_task_dir
from spu_common.audit_log import key_path

WEB_PORT = 8080
MARKER = "stand-in page for the audited network test"
SOCKET = "/run/spu-audit/audit.sock"

PROBE = r"""
set -u
work=$(mktemp -d)   # the container's own temporary folder
cat > "$work/probe.py" <<'PY'
import asyncio, json, os, socket, subprocess

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

PORT, SOCKET = int(os.environ["WEB_PORT"]), os.environ["AUDIT_SOCKET"]
found = {"audit_url": os.environ.get("SPU_AUDIT_URL")}


async def fetch_through_spu() -> None:
    server = StdioServerParameters(command="spu", args=["serve"], env=dict(os.environ))
    async with stdio_client(server) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        # the audit service's loopback, which is not this container's
        result = await session.call_tool("web_fetch", {"url": f"http://127.0.0.1:{PORT}/page.html"})
        text = " ".join(getattr(c, "text", "") for c in result.content)
        found["fetch"] = {"error": result.is_error, "text": text[:2000]}


asyncio.run(fetch_through_spu())
try:  # this container's own loopback: nothing listens there
    socket.create_connection(("127.0.0.1", PORT), timeout=5).close()
    found["own_loopback"] = "connected"
except OSError as exc:
    found["own_loopback"] = type(exc).__name__
found["interfaces"] = sorted(line.split(":")[0].strip() for line in open("/proc/net/dev").readlines()[2:])
found["ipv4_routes"] = open("/proc/net/route").read().splitlines()[1:]
found["ipv6_route_devices"] = sorted({line.split()[-1] for line in open("/proc/net/ipv6_route")})
# the socket's folder is read-only here: the agent can neither replace the socket nor write beside it
for name, args in (("touch", ["touch", os.path.dirname(SOCKET) + "/x"]), ("rm", ["rm", "-f", SOCKET])):
    done = subprocess.run(args, capture_output=True, text=True)
    found[name] = {"exit": done.returncode, "stderr": done.stderr.strip()}
# the socket answers only with the token
bearer = ["-H", "Authorization: Bearer " + os.environ["SPU_AUDIT_TOKEN"]]
for name, header in (("no_token", []), ("token", bearer)):
    done = subprocess.run(
        ["curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", "--unix-socket", SOCKET, *header,
         "http://localhost/v1/health"], capture_output=True, text=True)
    found[f"health_{name}"] = done.stdout
json.dump(found, open("/app/output/probe.json", "w"), indent=1)
PY
AUDIT_SOCKET=@SOCKET@ WEB_PORT=@WEB_PORT@ python3 "$work/probe.py"
python3 - <<'PY'
import json
contract = json.load(open("/app/task/contract.json"))
rankings = [{"group_id": g["group_id"], "order": g["experiment_ids"]} for g in contract["groups"]]
json.dump({"task_id": contract["task_id"], "rankings": rankings}, open("/app/output/rankings.json", "w"))
PY
"""


def test_web_fetch_goes_through_the_audit_socket_and_the_agent_has_no_network(
    test_image, run_trial, tmp_path, monkeypatch
):
    task = task_dir(tmp_path, "audited")
    demo = str(demo_task_dir("aromatic-acidity"))
    spu("harbor", "export", demo, str(task), "--image", test_image, "--network", "audited")
    compose_file = task / "environment" / "docker-compose.yaml"
    compose = yaml.safe_load(compose_file.read_text())
    # the test's changes: the audit service without a network too (nothing may leave this machine), and a
    # stand-in web server on its loopback (its guard admits that one loopback port for tests)
    service = compose["services"]["spu-audit"]
    del service["networks"], compose["networks"]
    service["network_mode"] = "none"
    service["environment"]["SPU_WEB_TEST_ALLOW"] = f"127.0.0.1:{WEB_PORT}"
    page = f"<html><body><p>{MARKER}</p></body></html>"
    compose["services"]["web"] = {
        "image": test_image,
        "network_mode": "service:spu-audit",
        "depends_on": ["spu-audit"],
        "command": [
            "sh",
            "-c",
            # $$: Compose's own interpolation leaves one $ for the shell
            f"site=$$(mktemp -d) && echo '{page}' > $$site/page.html && "
            f"exec python3 -m http.server {WEB_PORT} --bind 127.0.0.1 --directory $$site",
        ],
        "healthcheck": {"test": ["CMD", "true"], "interval": "1s", "retries": 30},
    }
    compose_file.write_text(yaml.safe_dump(compose))
    script = tmp_path / "probe.sh"
    script.write_text(PROBE.replace("@SOCKET@", SOCKET).replace("@WEB_PORT@", str(WEB_PORT)))
    monkeypatch.setenv("SPU_AUDIT_TOKEN", secrets.token_urlsafe(32))
    trial = run_trial(task, "--agent", "scripted_agent:ScriptedAgent", "--ak", f"script={script}")
    assert trial.result.get("exception_info") is None, trial.result["exception_info"]
    script_log = (trial.trial_dir / "agent" / "script.txt").read_text()
    probe_file = trial.trial_dir / "artifacts" / "app" / "collected" / "output" / "probe.json"
    assert probe_file.is_file(), script_log[-3000:]
    probe = json.loads(probe_file.read_text())

    # web_fetch reached the stand-in page through the audit service's socket
    assert probe["audit_url"] == f"unix://{SOCKET}"
    assert probe["fetch"]["error"] is False and MARKER in probe["fetch"]["text"], probe
    assert probe["own_loopback"] == "ConnectionRefusedError", probe
    # no interface but loopback, no IPv4 route, IPv6 only the kernel's entries on lo
    assert probe["interfaces"] == ["lo"] and probe["ipv4_routes"] == [], probe
    assert probe["ipv6_route_devices"] in ([], ["lo"]), probe
    assert probe["touch"]["exit"] != 0 and "Read-only file system" in probe["touch"]["stderr"], probe
    assert probe["rm"]["exit"] != 0 and "Read-only file system" in probe["rm"]["stderr"], probe
    assert (probe["health_no_token"], probe["health_token"]) == ("401", "200"), probe
    # as Docker sees it: no network, and the socket's folder mounted read-only
    assert (
        docker("inspect", "--format", "{{.HostConfig.NetworkMode}}", trial.agent_container).strip() == "none"
    )
    mounts = json.loads(docker("inspect", "--format", "{{json .Mounts}}", trial.agent_container))
    shared = [m for m in mounts if m["Destination"] == "/run/spu-audit"]
    assert len(shared) == 1 and shared[0]["Type"] == "volume" and shared[0]["RW"] is False, mounts

    # the call is in the audit service's log, collected from its own container; the keyed chain verifies
    audit = trial.trial_dir / "artifacts" / "srv" / "spu" / "audit"
    records = [json.loads(line) for line in (audit / "audit.jsonl").read_text().splitlines()]
    calls = [r for r in records if r.get("kind") == "call" and r.get("tool") == "web_fetch"]
    assert [c["args"]["url"] for c in calls] == [f"http://127.0.0.1:{WEB_PORT}/page.html"], calls
    assert not calls[0].get("error"), calls
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
