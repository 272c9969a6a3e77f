"""A hostile agent in real Harbor trials (docs/harbor.md, "The boundary"): links, hard links, a named pipe,
sparse files of 3 GiB and 100 GB and space allocated past a file's end in its output and in the log folders
Harbor mounts from the host, writes to the verifier's folders, a process left behind that keeps rewriting the
submission, and another compose project started beside the trial on the same Docker engine. None of it
changes the reward, costs the host's disk or disturbs the other project. The agent is
tests/container/scripted_agent.py running the scripts below as the agent's user."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from container_helpers import (
    check_no_network,
    compose_project,
    docker,
    project_containers,
    spu,
    task_dir,
)

from environment.demo_tasks import demo_answers_path, demo_task_dir

AGENT = ("--agent", "scripted_agent:ScriptedAgent")

HOSTILE_OUTPUT = r"""
set -u
out=/app/output
tried() { echo "$1" >> "$out/attempts.txt"; }
# the submission: a link to the verifier's answers (they lie at /tests only in the verifier's container)
ln -s /tests/answers.json "$out/rankings.json"
# beside it: a link to a system file, a named pipe, sparse files of 3 GiB and 100 GB, a link to / in a folder
ln -s /etc/passwd "$out/passwd.json"
mkfifo "$out/pipe"
truncate -s 3G "$out/huge.bin"
truncate -s 100G "$out/sparse-100g.bin"
mkdir -p "$out/sub" && ln -s / "$out/sub/root"
# hard links: two names of its own file, and one of a file it does not own (the kernel refuses that one
# when fs.protected_hardlinks is on; the hook refuses it whatever the setting)
echo '{"mine": 1}' > "$out/mine.json" && ln "$out/mine.json" "$out/mine-again.json"
ln /etc/passwd "$out/passwd-hard" 2>/dev/null && tried "hard-linked /etc/passwd"
# the same in the folders Harbor mounts from the host's trial folder, and 200 MiB allocated past a file's end
ln -s /etc/passwd /logs/agent/passwd-link
mkfifo /logs/agent/pipe
truncate -s 3G /logs/agent/huge.bin
truncate -s 100G /logs/agent/sparse-100g.bin
echo log > /logs/agent/log.txt && ln /logs/agent/log.txt /logs/agent/log-again.txt
touch /logs/agent/reserved.bin && fallocate --keep-size -l 200MiB /logs/agent/reserved.bin
ln -s / /logs/artifacts/root-link
# the verifier's folders
echo '{"reward": 1.0}' 2>/dev/null > /logs/verifier/reward.json && tried "wrote /logs/verifier/reward.json"
echo 1.0 2>/dev/null > /logs/verifier/reward.txt && tried "wrote /logs/verifier/reward.txt"
mkdir -p /tests 2>/dev/null && echo '{}' 2>/dev/null > /tests/answers.json && tried "wrote /tests"
tried done
"""

LEFTOVER = r"""
set -u
out=/app/output
python3 - <<'PY'
import json
contract = json.load(open("/app/task/contract.json"))
for name, turn in (("a", 1), ("b", -1)):
    rankings = [{"group_id": g["group_id"], "order": g["experiment_ids"][::turn]} for g in contract["groups"]]
    text = json.dumps({"task_id": contract["task_id"], "tick": 0, "rankings": rankings})
    open(f"/app/output/.{name}.json", "w").write(text)
PY
cp "$out/.a.json" "$out/rankings.json"
# left behind in a session of its own: rewrites rankings.json, the order turned each time, and counts
setsid sh -c 'n=0; while :; do n=$((n+1)); t=a; [ $((n % 2)) = 0 ] && t=b
  sed "s/\"tick\": 0/\"tick\": $n/" "$1/.$t.json" > "$1/.tmp" && mv "$1/.tmp" "$1/rankings.json"
  sleep 0.05; done' spu-leftover "$out" </dev/null >/dev/null 2>&1 &
# the agent ends once the test has started another compose project beside this trial (at most 10 min)
for _ in $(seq 1 6000); do [ -e /tmp/spu-go ] && break; sleep 0.1; done
"""


def _script(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / f"{name}.sh"
    path.write_text(text)
    return f"script={path}"


def _export(name: str, slug: str, tmp_path: Path, image: str) -> Path:
    out = task_dir(tmp_path, name)
    spu("harbor", "export", str(demo_task_dir(slug)), str(out), "--image", image, "--network", "none")
    return out


def _host_entries(folder: Path) -> list[tuple[str, str]]:
    """(path, what) of everything under ``folder`` on the host that is not a regular file or a folder, or is a
    file over 64 MiB."""
    odd = []
    for path in folder.rglob("*"):
        st = path.lstat()
        if stat.S_ISLNK(st.st_mode) or not (stat.S_ISREG(st.st_mode) or stat.S_ISDIR(st.st_mode)):
            odd.append((str(path.relative_to(folder)), stat.filemode(st.st_mode)))
        elif st.st_size > 64 * 2**20:
            odd.append((str(path.relative_to(folder)), f"{st.st_size} bytes"))
    return odd


def _disk_use(folder: Path) -> tuple[int, int]:
    """(bytes allocated, apparent bytes) of everything under ``folder`` on the host, by ``du``."""
    real = subprocess.run(["du", "-s", "-B1", str(folder)], capture_output=True, text=True, check=True)
    apparent = subprocess.run(
        ["du", "-s", "-B1", "--apparent-size", str(folder)], capture_output=True, text=True, check=True
    )
    return int(real.stdout.split()[0]), int(apparent.stdout.split()[0])


def test_links_pipes_sparse_files_hard_links_and_verifier_writes_change_nothing(
    test_image, run_trial, tmp_path
):
    task = _export("hostile", "enzyme-kinetics", tmp_path, test_image)
    # in the documented safe mode (the log folders mounted from the host: run_trial's SAFE); without it Harbor
    # copies /logs/agent with `docker compose cp` before any hook of the task runs (docs/harbor.md)
    trial = run_trial(task, *AGENT, "--ak", _script(tmp_path, "hostile", HOSTILE_OUTPUT))
    assert trial.result.get("exception_info") is None, trial.result["exception_info"]
    assert "exit status 0" in (trial.trial_dir / "agent" / "script.txt").read_text()
    # the submission was a link: left out at collection, so no submission: -1, with the reason on record
    assert trial.result["verifier_result"]["rewards"]["reward"] == -1.0
    grade = json.loads((trial.trial_dir / "verifier" / "grade.json").read_text())
    assert grade["file_errors"] == ["no submission file at /app/collected/output/rankings.json"]
    collection = grade["collection"]
    left_out = {i["path"]: i["kind"] for i in collection["output"]["left_out"]}
    collected = trial.trial_dir / "artifacts" / "app" / "collected" / "output"
    attempts = (collected / "attempts.txt").read_text().splitlines()
    assert left_out == {
        "huge.bin": "sparse",
        "sparse-100g.bin": "sparse",
        "mine.json": "hard_link",
        "mine-again.json": "hard_link",
        "passwd.json": "not_regular",
        "pipe": "not_regular",
        "rankings.json": "not_regular",
        "sub/root": "not_regular",
        **({"passwd-hard": "hard_link"} if "hard-linked /etc/passwd" in attempts else {}),
    }
    sparse = next(i for i in collection["output"]["left_out"] if i["path"] == "sparse-100g.bin")
    assert sparse["apparent_bytes"] == 100 * 2**30 and sparse["allocated_bytes"] == 0
    # every write to the verifier's folders failed: the agent's user could write neither
    assert [a for a in attempts if a.startswith("wrote")] == [] and attempts[-1] == "done"
    # nothing but regular files of bounded size reached the host: not from the output, not from the logs;
    # the 100 GB sparse files and the 200 MiB allocated past a file's end cost the trial folder nothing
    assert _host_entries(trial.trial_dir) == []
    allocated, apparent = _disk_use(trial.trial_dir)
    assert allocated < 16 * 2**20 and apparent < 16 * 2**20, (allocated, apparent)
    cleaned = collection["cleaned"]["/logs/agent"]
    assert cleaned["mounted"] is True and collection["warnings"] == []
    assert {i["path"]: i["kind"] for i in cleaned["removed"]} == {
        "passwd-link": "not_regular",
        "pipe": "not_regular",
        "huge.bin": "sparse",
        "sparse-100g.bin": "sparse",
        "log.txt": "hard_link",
        "log-again.txt": "hard_link",
        "reserved.bin": "too_large",
    }
    assert [i["path"] for i in collection["cleaned"]["/logs/artifacts"]["removed"]] == ["root-link"]
    # the reward file is the verifier's own
    reward = json.loads((trial.trial_dir / "verifier" / "reward.json").read_text())
    assert reward == {"reward": -1.0, "recovered_score": -1.0, "valid": 0}
    check_no_network(trial)


@pytest.fixture(scope="module")
def foreign_project(test_image, tmp_path_factory):
    """``start()``: a compose project of someone else's on the same engine, looking like the agent's
    container of a Harbor trial (a task in /app/task). At the end of the module, after every trial's
    teardown, it must still be running, untouched."""
    name = f"foreign{uuid.uuid4().hex[:8]}"
    compose = tmp_path_factory.mktemp("foreign") / "compose.yaml"
    compose.write_text(
        "services:\n  main:\n"
        f"    image: {test_image}\n"
        '    user: "0"\n    network_mode: none\n'
        '    command: ["sh", "-c", "mkdir -p /app/task && echo {} > /app/task/contract.json; sleep 1d"]\n'
    )
    started: list[str] = []

    def start() -> str:
        docker("compose", "-p", name, "-f", str(compose), "up", "-d", "--wait")
        started.extend(cid for _, cid in project_containers(name)[name])
        return started[0]

    yield start
    try:
        for cid in started:
            assert docker("inspect", "--format", "{{.State.Running}}", cid).strip() == "true", "stopped"
            assert docker("inspect", "--format", "{{.RestartCount}}", cid).strip() == "0"
    finally:
        subprocess.run(["docker", "compose", "-p", name, "-f", str(compose), "down", "-t", "0"], check=False)


def _agent_of(task: Path) -> str:
    """The id of the agent's container of the trial running on ``task``, once it exists."""
    prefix = compose_project(task.name[:32])
    give_up = time.monotonic() + 600  # a guard against a hang, not a measure
    while time.monotonic() < give_up:
        for project, found in project_containers(prefix).items():
            if project.endswith("__env") and (main := dict(found).get("main")):
                return main
        time.sleep(0.5)
    raise AssertionError(f"no agent container of {prefix} appeared")


def test_a_leftover_process_is_ended_before_the_output_is_collected(
    test_image, run_trial, foreign_project, tmp_path
):
    task = _export("leftover", "aromatic-acidity", tmp_path, test_image)
    with ThreadPoolExecutor(1) as pool:
        running = pool.submit(run_trial, task, *AGENT, "--ak", _script(tmp_path, "leftover", LEFTOVER))
        agent = _agent_of(task)
        # another compose project starts beside the trial, then the agent ends (tests/container owns only
        # its own projects: this one survives every teardown, checked by the fixture)
        foreign_project()
        docker("exec", agent, "touch", "/tmp/spu-go")
        trial = running.result()
    assert trial.agent_container == agent
    grade = json.loads((trial.trial_dir / "verifier" / "grade.json").read_text())
    ended = grade["collection"]["ended_processes"]
    assert any("spu-leftover" in p["command"] for p in ended["listed"]), ended
    # the version graded is the last one there was: nothing wrote after the copy
    graded = trial.trial_dir / "artifacts" / "app" / "collected" / "output" / "rankings.json"
    final = docker("exec", agent, "cat", "/app/output/rankings.json")
    assert graded.read_text() == final and json.loads(final)["tick"] >= 1
    scored = json.loads(
        spu(
            "grade",
            str(graded),
            "--task",
            str(demo_task_dir("aromatic-acidity")),
            "--answers",
            str(demo_answers_path("aromatic-acidity")),
            "--json",
        ).stdout
    )
    assert trial.result["verifier_result"]["rewards"]["reward"] == pytest.approx(scored["score"], abs=1e-12)
    assert os.path.getsize(graded) < 2**20
    check_no_network(trial)
