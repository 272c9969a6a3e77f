"""Reference agent: per-step overhead of the loop, and how stable request prefixes stay.

A scripted model server on loopback (tests/scripted_model_server.py) answers every request at once
with one cheap tool call (read_file of a small task file), so what is left of each step is the agent's
own work. From the trajectory of a run of N steps:

* model call: building the request, the HTTP round trip to the local server, parsing the reply
  (``latency_s``), against a baseline in the same run: a bare httpx POST of the same final request body;
* tool: the read_file call (``wall_s``);
* loop bookkeeping: the rest of the step (budget checks, reminders, context estimate, trajectory
  records fsynced to disk).

Prefix stability, per wire format: how much of the previous request reappears unchanged from the first
byte of the next one (ideal: all of it but the closing brackets), and what share of the new request
that is (the rest is the new turn). Anthropic ``cache_control`` markers are removed first: they move
with the newest message but are not part of the prompt a cache keys on; the raw-byte figure keeps them.

Run: python bench/agent_loop.py [--steps 60]
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import httpx

from environment.demo_tasks import demo_task_dir
from environment.runs import read_records
from scaffold.agent.config import load_config
from scaffold.agent.models import PROVIDERS
from scaffold.agent.runner import run_agent
from spu_common.task import load_task

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))
from scripted_model_server import ScriptedModelServer, common_prefix  # noqa: E402 - a test helper, on the path above

TURN = {"tool_calls": [{"name": "read_file", "arguments": {"path": "TASK/contract.json", "limit": 5}}]}


def strip_cache_control(value):
    if isinstance(value, dict):
        return {k: strip_cache_control(v) for k, v in value.items() if k != "cache_control"}
    if isinstance(value, list):
        return [strip_cache_control(v) for v in value]
    return value


def run(provider: str, steps: int, workdir: Path) -> tuple[list[dict], ScriptedModelServer, list[dict]]:
    task = demo_task_dir("aromatic-acidity")
    turn = json.loads(json.dumps(TURN).replace("TASK", str(task)))
    config = load_config(
        None,
        [
            f"limits.step_limit={steps}",
            "tools.mcp.enabled=false",
            "limits.draft_reminder_fraction=2",
            "limits.wrapup_reminder_fraction=2",
        ],
    )
    server = ScriptedModelServer([], default=turn)
    server.__enter__()
    out = workdir / f"{provider}-{steps}"
    run_agent(load_task(task), out, f"{provider}:bench", config, base_url=server.url)
    return read_records(out / "trajectory.jsonl"), server, server.requests


def step_times(records: list[dict]) -> list[dict]:
    rows, current = [], None
    for rec in records:
        if rec["type"] == "model_turn":
            if current:
                rows.append(current)
            current = {
                "start": rec["elapsed_s"] - rec["latency_s"],
                "model_s": rec["latency_s"],
                "tool_s": 0.0,
            }
        elif rec["type"] == "tool_result" and current:
            current["tool_s"] += rec["wall_s"]
            current["end"] = rec["elapsed_s"]
    for a, b in itertools.pairwise(rows):
        a["step_s"] = b["start"] - a["start"]
        a["loop_s"] = a["step_s"] - a["model_s"] - a["tool_s"]
    return [r for r in rows if "step_s" in r]


def baseline_post_s(server: ScriptedModelServer, body: bytes, path: str, repeats: int = 20) -> float:
    times = []
    with httpx.Client() as client:
        for _ in range(repeats):
            server.script.append(TURN)
            started = time.perf_counter()
            client.post(server.url + path, content=body, headers={"content-type": "application/json"})
            times.append(time.perf_counter() - started)
    return statistics.median(times)


def fsync_s(folder: Path, repeats: int = 30) -> float:
    """The disk's cost of one flushed-and-fsynced trajectory line, the loop's main fixed cost per step."""
    times = []
    with open(folder / "fsync-probe.jsonl", "a") as handle:
        for _ in range(repeats):
            started = time.perf_counter()
            handle.write("x" * 2000 + "\n")
            handle.flush()
            os.fsync(handle.fileno())
            times.append(time.perf_counter() - started)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=60)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        print(f"per-step overhead, OpenAI chat wire format, {args.steps} steps (medians, ms)")
        records, server, requests = run("openai", args.steps, workdir)
        rows = step_times(records)
        for label, part in (
            (f"steps 1-{len(rows) // 3}", rows[: len(rows) // 3]),
            (f"last {len(rows) // 3} steps", rows[-(len(rows) // 3) :]),
        ):
            med = {
                k: statistics.median(r[k] for r in part) * 1000
                for k in ("step_s", "model_s", "tool_s", "loop_s")
            }
            print(
                f"  {label:>16}: step {med['step_s']:6.1f}  model call {med['model_s']:6.1f}  "
                f"tool {med['tool_s']:5.1f}  loop bookkeeping {med['loop_s']:5.1f}"
            )
        last = requests[-1]
        bare = baseline_post_s(server, last["raw"], last["path"])
        adapter = statistics.median(r["model_s"] for r in rows[-(len(rows) // 3) :])
        print(
            f"  final request {len(last['raw']) / 1024:.0f} KiB: adapter call {adapter * 1000:.1f} ms vs "
            "bare httpx "
            f"POST {bare * 1000:.1f} ms -> ratio {adapter / bare:.2f}"
        )
        loop_share = statistics.median(r["loop_s"] / r["step_s"] for r in rows)
        loop_ms = statistics.median(r["loop_s"] for r in rows) * 1000
        sync_ms = fsync_s(workdir) * 1000
        print(
            f"  loop bookkeeping is {loop_share:.1%} of a step when the model answers instantly; "
            f"{loop_ms:.1f} ms = {loop_ms / sync_ms:.1f} x one fsync on this disk ({sync_ms:.1f} ms)"
        )
        server.close()

        print("\nprefix stability: share of each request identical to the previous request's prefix")
        for provider in [p for p in PROVIDERS if p != "replay"]:
            _, server, requests = run(provider, 30, workdir)
            server.close()
            reused, of_new, raw = [], [], []
            for before, after in itertools.pairwise(requests):
                a = json.dumps(strip_cache_control(before["json"])).encode()
                b = json.dumps(strip_cache_control(after["json"])).encode()
                shared = common_prefix(a, b)
                reused.append(shared / len(a))
                of_new.append(shared / len(b))
                raw.append(common_prefix(before["raw"], after["raw"]) / len(before["raw"]))
            print(
                f"  {provider:>17}: previous request reused as prefix: mean {statistics.mean(reused):.2%}, "
                f"min {min(reused):.2%} (raw bytes with cache markers {statistics.mean(raw):.2%}); "
                f"share of the new request {statistics.mean(of_new):.1%}; {len(reused)} requests"
            )


if __name__ == "__main__":
    main()
