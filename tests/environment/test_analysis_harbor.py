"""The analysis reads ATIF as Harbor writes it: checked with Harbor's own `Trajectory` model.

Harbor lives in its own venv (``bash scripts/setup-harbor.sh`` or ``SPU_HARBOR_PYTHON``); these tests skip
without it. The analysis itself never imports Harbor.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from analysis_runs import atif_trajectory

from environment.analysis.activities import classify
from environment.analysis.trajectories import read_atif

REPO = Path(__file__).resolve().parents[2]

# Harbor's models build a Claude-Code-like trajectory: MCP tool names, multimodal content parts, an error
# flagged the way Harbor's Claude Code converter does, and a copied-context step that must not count twice.
BUILD = r"""
import json, sys
from harbor.models.trajectories import Agent, Observation, ObservationResult, Step, ToolCall, Trajectory
from harbor.models.trajectories.content import ContentPart

def call(call_id, name, args):
    return [ToolCall(tool_call_id=call_id, function_name=name, arguments=args)]

parts = [ContentPart(type="text", text="result one"), ContentPart(type="text", text="two")]
failed = ObservationResult(source_call_id="b", content="No such file", extra={"tool_result_is_error": True})
steps = [
    Step(step_id=1, timestamp="2026-01-01T00:00:00Z", source="user", message="Rank the experiments."),
    Step(step_id=2, timestamp="2026-01-01T00:00:00Z", source="agent", message="(copied)",
         is_copied_context=True, tool_calls=call("old", "Bash", {"command": "ls"})),
    Step(step_id=3, timestamp="2026-01-01T00:01:00Z", source="agent", message="",
         tool_calls=call("a", "mcp__spu__web_search", {"query": "x"}),
         observation=Observation(results=[ObservationResult(source_call_id="a", content=parts)])),
    Step(step_id=4, timestamp="2026-01-01T00:03:00Z", source="agent", message="",
         tool_calls=call("b", "Bash", {"command": "python fit.py"}),
         observation=Observation(results=[failed])),
    Step(step_id=5, timestamp="2026-01-01T00:04:00Z", source="agent", message="Done."),
]
trajectory = Trajectory(schema_version="ATIF-v1.6", session_id="s", agent=Agent(name="claude-code",
    version="2.0", model_name="claude-test"), steps=steps)
open(sys.argv[1], "w").write(trajectory.model_dump_json(exclude_none=True, indent=2))
# and the fixture the other analysis tests write by hand must be valid ATIF too
Trajectory.model_validate(json.load(open(sys.argv[2])))
print("ok")
"""


@pytest.fixture
def harbor_python() -> Path:
    repo_venv = REPO / ".harbor-venv" / "bin" / "python"
    value = Path(os.environ.get("SPU_HARBOR_PYTHON") or repo_venv)
    if not value.exists():
        pytest.skip("no Harbor venv: run `bash scripts/setup-harbor.sh` or set SPU_HARBOR_PYTHON")
    return value


def test_atif_written_by_harbors_models_is_read(harbor_python, tmp_path):
    written = tmp_path / "harbor.json"
    fixture = tmp_path / "fixture.json"
    content = json.dumps({"task_id": "t", "task_version": "1", "rankings": []})
    fixture.write_text(
        json.dumps(
            atif_trajectory(
                "t",
                [
                    ("Read", {"file_path": "/app/task/targets.csv"}),
                    ("Write", {"file_path": "/app/output/rankings.json", "content": content}),
                ],
            )
        )
    )
    env = {**os.environ, "HARBOR_TELEMETRY": "0", "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    env.pop("PYTHONPATH", None)
    done = subprocess.run(
        [str(harbor_python), "-c", BUILD, str(written), str(fixture)],
        capture_output=True,
        text=True,
        env=env,
        timeout=180,
        check=False,
    )
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-3000:]
    trajectory = read_atif(written)
    assert [c.name for c in trajectory.calls] == ["web_search", "Bash"]  # the copied step is not counted
    assert trajectory.n_steps == 3
    first, second = trajectory.calls
    assert first.content == "result one\ntwo" and not first.is_error
    assert second.is_error
    # time runs from the first step (0:00) to the last (4:00): the Bash call starts at 3/4 of the run
    assert trajectory.t_norm(second) == pytest.approx(0.75)
    assert [classify(c)[0] for c in trajectory.calls] == ["literature", "code"]
    assert (trajectory.agent, trajectory.model) == ("claude-code", "claude-test")
