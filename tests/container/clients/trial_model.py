"""The scripted model of the client trials (tests/container/test_clients.py), run inside the agent's container
on its loopback: tests/scripted_model_server.py with the two scripts below, Claude Code's on the Anthropic
Messages wire and Codex's on the Responses wire. Every request and reply is logged to ``model-server.jsonl``
in the temporary folder. Standard library only (both files are copied into the image).

Claude Code: when the spu MCP server's tools are offered and no tool has run yet, a ``tool_use`` of the spu
tool ``system_info``; after its result, a ``tool_use`` of Claude Code's ``Write`` with a valid
``/app/output/rankings.json`` (each group in the order of ``targets.csv``); after that, a final text. Side
requests (titles, summaries) get plain text.

Codex: a call of the spu server's ``system_info`` as soon as Codex offers it (Codex lists an MCP server's
tools once the server has started: until then a shell command ``sleep 1``, at most sixty times); after its
output, Codex's shell tool writing the same ``/app/output/rankings.json``; after that, a final message.

    python3 trial_model.py PORT
"""

from __future__ import annotations

import csv
import json
import sys
import tempfile
from pathlib import Path

from scripted_model_server import ScriptedModelServer, offered_tools, tool_call, tool_results

TASK = Path("/app/task")
LOG = Path(tempfile.gettempdir()) / "model-server.jsonl"
SPU_TOOL = "system_info"
FINAL_TEXT = "Wrote /app/output/rankings.json."
MAX_WAITS = 60


def submission() -> str:
    contract = json.loads((TASK / "contract.json").read_text(encoding="utf-8"))
    groups: dict[str, list[str]] = {}
    with (TASK / "targets.csv").open(encoding="utf-8") as fh:
        for row in csv.DictReader(fh):
            groups.setdefault(row["group_id"], []).append(row["experiment_id"])
    return json.dumps(
        {
            "task_id": contract["task_id"],
            "task_version": contract["task_version"],
            "rankings": [{"group_id": g, "order": order} for g, order in groups.items()],
        },
        indent=1,
    )


def claude_code(request: dict, wire: str) -> dict:
    spu_tool = next(
        (t for t in offered_tools(request, wire) if t.startswith("mcp__spu__") and t.endswith(SPU_TOOL)), None
    )
    results = tool_results(request, wire)
    if spu_tool is None:
        return {"text": "ok"}
    if not results:
        return {"tool_calls": [{"id": "toolu_spu_1", "name": spu_tool, "arguments": {}}]}
    if len(results) == 1:
        write = {"file_path": "/app/output/rankings.json", "content": submission()}
        return {"tool_calls": [{"id": "toolu_write_1", "name": "Write", "arguments": write}]}
    return {"text": FINAL_TEXT}


def shell_call(offered: list[str], command: str) -> dict:
    """Codex's own shell tool, in whichever of its forms this version offers."""
    if "exec_command" in offered:
        return tool_call("exec_command", {"cmd": command})
    if "shell_command" in offered:
        return tool_call("shell_command", {"command": command})
    return tool_call("shell", {"command": ["bash", "-lc", command]})


def codex(request: dict, wire: str) -> dict:
    offered = offered_tools(request, wire)
    items = request.get("input") if isinstance(request.get("input"), list) else []
    called = [i.get("name") or "" for i in items if i.get("type") == "function_call"]
    spu = next((t for t in offered if t.endswith("/" + SPU_TOOL) and "spu" in t), None)
    spu_at = next((k for k, name in enumerate(called) if name == SPU_TOOL), None)
    if spu_at is None and spu is not None:
        return {"tool_calls": [tool_call(spu, {})]}
    if spu_at is None and len(called) < MAX_WAITS:
        return {"tool_calls": [shell_call(offered, "sleep 1")]}
    if not called[(spu_at if spu_at is not None else MAX_WAITS - 1) + 1 :]:
        write = f"cat > /app/output/rankings.json <<'JSON'\n{submission()}\nJSON"
        return {"tool_calls": [shell_call(offered, write)]}
    return {"text": FINAL_TEXT}


def reply(request: dict, wire: str) -> dict:
    return claude_code(request, wire) if wire == "anthropic" else codex(request, wire)


if __name__ == "__main__":
    ScriptedModelServer(default=reply, port=int(sys.argv[1]), log_path=LOG).serve_forever()
