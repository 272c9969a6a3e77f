"""docs/batch.md against the code: its option table is `spu batch`'s options, its recording example
replays, and a bad agent config stops a batch before any run."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import typer

from scaffold.agent.models.replay import load_turns, substitute
from spu.cli import make_app

REPO = Path(__file__).resolve().parents[2]
DOC = (REPO / "docs" / "batch.md").read_text(encoding="utf-8")


def test_the_option_table_is_spu_batch_s_options():
    command = typer.main.get_command(make_app(["scaffold.harbor_cli"])).commands["batch"]
    shown = [p for p in command.params if not getattr(p, "hidden", False)]  # --task: TASK's old spelling
    options = {o for p in shown for o in [*p.opts, *p.secondary_opts] if o.startswith("-")}
    options.discard("--help")
    table = DOC.split("## Options", 1)[1].split("\n## ", 1)[0]
    documented = {
        o
        for cell in re.findall(r"^\| ([^|]+) \|", table, flags=re.M)
        for o in re.findall(r"`(-[^`]+)`", cell)
    }
    assert documented == options, (sorted(options - documented), sorted(documented - options))
    assert "`TASK…`" in table


def test_the_documented_recording_replays(tmp_path):
    example = DOC.split("## Replaying a recording", 1)[1].split("```json\n", 1)[1].split("```", 1)[0]
    records, buffer = [], ""
    for line in example.splitlines():  # the page wraps each record over two lines
        buffer += line
        try:
            records.append(json.loads(buffer))
            buffer = ""
        except ValueError:
            continue
    assert len(records) == 2 and not buffer
    path = tmp_path / "rec.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in records) + "\n" + '{"type": "tool_result"}\n')
    turns = load_turns(path)
    assert [c["name"] for t in turns for c in t["tool_calls"]] == ["chem_parse", "ranking_check"]
    args = substitute(turns[1]["tool_calls"][0]["arguments"], {"TASK_DIR": "/t", "OUT_DIR": "/o"})
    assert args == {"task_dir": "/t", "draft_path": "/o/rankings.json"}


def test_a_bad_agent_config_stops_the_batch_before_any_run(tmp_path):
    from environment.demo_tasks import demo_task_dir

    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "spu",
            "batch",
            str(demo_task_dir("aromatic-acidity")),
            "--model",
            "replay:x",
            "-o",
            str(tmp_path / "runs"),
            "-c",
            "limits.stpe_limit=3",
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 2 and "Did you mean limits.step_limit?" in result.stderr
    assert not (tmp_path / "runs").exists()
