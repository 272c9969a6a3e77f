"""The real npm MCP clients against `spu serve` (marker `npm`; install them with
`bash scripts/install-npm-clients.sh`). Each scenario runs in a network namespace with only loopback
(`unshare -n`, needs root or user namespaces), so neither the clients nor the server can reach anything
else; the scripted model server lives on that loopback too. Commands: docs/claude-code.md."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
BIN = Path(os.environ.get("SPU_NPM_PREFIX") or REPO / ".npm-clients") / "node_modules" / ".bin"
DRIVER = Path(__file__).resolve().parent / "npm_driver.py"


def _isolated_loopback_available() -> bool:
    if shutil.which("unshare") is None or shutil.which("ip") is None:
        return False
    probe = subprocess.run(
        ["unshare", "-n", "ip", "link", "set", "lo", "up"], capture_output=True, timeout=30, check=False
    )
    return probe.returncode == 0


pytestmark = [
    pytest.mark.npm,
    pytest.mark.skipif(
        not (BIN / "claude").exists() or not (BIN / "mcp-inspector").exists(),
        reason="npm clients not installed: bash scripts/install-npm-clients.sh",
    ),
    pytest.mark.skipif(
        not _isolated_loopback_available(),
        reason="`unshare -n` is not permitted here: the clients cannot be cut off from the network",
    ),
]


def _scenario(name: str, tmp_path: Path, env: dict[str, str]) -> dict:
    # inside the namespace: bring loopback up, then run the driver with this interpreter
    script = f"ip link set lo up && exec {sys.executable} {DRIVER} {name} {tmp_path}"
    proc = subprocess.run(
        ["unshare", "-n", "bash", "-c", script],
        capture_output=True,
        text=True,
        env=env,
        cwd=REPO,
        timeout=400,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_claude_mcp_list_reports_spu_connected(tmp_path, spu_env):
    result = _scenario("mcp-list", tmp_path, spu_env)
    assert result["returncode"] == 0, result["stderr"]
    line = next(ln for ln in result["stdout"].splitlines() if ln.startswith("spu:"))
    assert "serve" in line and "Connected" in line, result["stdout"]


def test_inspector_cli_lists_and_calls_tools(tmp_path, spu_env):
    result = _scenario("inspector", tmp_path, spu_env)
    assert result["list"]["returncode"] == 0, result["list"]["stderr"]
    tools = {t["name"]: t for t in json.loads(result["list"]["stdout"])["tools"]}
    assert {"system_info", "chem_descriptors", "job_wait"} <= set(tools)
    assert tools["chem_descriptors"]["annotations"]["readOnlyHint"] is True
    assert result["call"]["returncode"] == 0, result["call"]["stderr"]
    called = json.loads(result["call"]["stdout"])
    item = called["structuredContent"]["items"][0]
    # ethanol: C2H6O, average molar mass 46.069 g/mol (IUPAC atomic weights)
    assert item["ok"] is True and item["descriptors"]["mol_weight_g_mol"] == pytest.approx(46.069, abs=1e-3)


def test_headless_claude_code_calls_spu_tool(tmp_path, spu_env):
    result = _scenario("claude-headless", tmp_path, spu_env)
    assert result["returncode"] == 0, result["stderr"]
    assert "mcp__spu__system_info" in result["tools_offered"]
    # Claude Code ran our tool on the scripted tool_use and sent its result back to the model server
    assert len(result["tool_results"]) == 1
    block = result["tool_results"][0]
    text = block["content"] if isinstance(block["content"], str) else json.dumps(block["content"])
    assert block["tool_use_id"] == "toolu_spu_1" and "cpu_cores" in text and not block.get("is_error")
    final = json.loads(result["stdout"])
    assert final["result"] == "The spu server reports its hardware." and final["is_error"] is False


@pytest.mark.skipif(
    not (BIN / "codex").exists(), reason="codex not installed: bash scripts/install-npm-clients.sh"
)
def test_codex_reads_the_spu_config_block(tmp_path, spu_env):
    result = _scenario("codex-mcp-list", tmp_path, spu_env)
    assert result["returncode"] == 0, result["stderr"]
    row = next(ln for ln in result["stdout"].splitlines() if ln.startswith("spu "))
    assert "serve" in row and "enabled" in row, result["stdout"]
