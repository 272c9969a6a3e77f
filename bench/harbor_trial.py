"""What a Harbor trial costs beyond its agent: Harbor's `nop` agent (it does nothing) on a demo task exported
with `spu harbor export --network none`, run a few times in Docker, in the documented safe mode (`--ek
auto_mounting=true`: the log folders mounted from the host). Prints each phase from the trials' `result.json`
(the environment's start, the hand-off between the agent's end and the verifier's start, the verifier with
its own container), the disk the trial folder takes on the host (`du`), and, as the baseline of the same run,
one bare container started and stopped (`docker run --rm --network none IMAGE true`).

    .venv/bin/python bench/harbor_trial.py [--trials 3] [--image spu-scaffold:test] [--task enzyme-kinetics]
        [--sparse-gib N] [--harbor-default]

`--sparse-gib N`: the agent is Harbor's oracle instead, whose script also leaves a sparse file of N GiB and a
hard link in the output and in `/logs/agent`, as a hostile agent could. `--harbor-default`: Harbor's default
mode, which copies `/logs/agent` to the host before any hook of the task runs (keep N small there: the
sparse file is copied whole).

Needs Docker with the Compose plugin and Harbor (`scripts/setup-docker.sh`, `scripts/setup-harbor.sh`) and
the image (`scripts/build-image.sh`; the container tests build `spu-scaffold:test`). The first trial builds
the task's two small images; it is run once before the measured ones.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
HARBOR = REPO / ".harbor-venv" / "bin" / "harbor"


def _seconds(start: str, end: str) -> float:
    return (datetime.fromisoformat(end) - datetime.fromisoformat(start)).total_seconds()


#: what `--sparse-gib` adds to the oracle's script (as the agent's user): a sparse file and a hard link in the
#: output and in the agent's log folder
HOSTILE = """
truncate -s {gib}G /app/output/sparse.bin /logs/agent/sparse.bin
echo x > /app/output/a.txt && ln /app/output/a.txt /app/output/b.txt
echo x > /logs/agent/a.txt && ln /logs/agent/a.txt /logs/agent/b.txt
"""


def disk_use_bytes(folder: Path) -> int:
    """Bytes allocated under ``folder`` (``du``)."""
    done = subprocess.run(["du", "-s", "-B1", str(folder)], capture_output=True, text=True, check=True)
    return int(done.stdout.split()[0])


def trial_phases(task: Path, jobs: Path, agent: list[str], mode: list[str]) -> dict[str, float]:
    env = {**os.environ, "HARBOR_TELEMETRY": "0", "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    subprocess.run(
        [
            str(HARBOR),
            "run",
            "-p",
            str(task),
            "-o",
            str(jobs),
            "-e",
            "docker",
            "-n",
            "1",
            "-y",
            "-q",
            *mode,
            *agent,
        ],
        env=env,
        capture_output=True,
        check=True,
        timeout=900,
    )
    found = next(
        (p, r)
        for p in jobs.rglob("result.json")
        if "trial_name" in (r := json.loads(p.read_text(encoding="utf-8")))
    )
    trial_dir, result = found[0].parent, found[1]
    if result.get("exception_info"):
        raise SystemExit(f"the trial failed: {result['exception_info']}")
    env_setup, agent, verifier = result["environment_setup"], result["agent_execution"], result["verifier"]
    return {
        "environment": _seconds(env_setup["started_at"], env_setup["finished_at"]),
        "hand-off": _seconds(agent["finished_at"], verifier["started_at"]),
        "verifier": _seconds(verifier["started_at"], verifier["finished_at"]),
        "trial": _seconds(result["started_at"], result["finished_at"]),
        "agent": _seconds(agent["started_at"], agent["finished_at"]),
        "disk": disk_use_bytes(trial_dir) / 2**20,
    }


def bare_container(image: str) -> float:
    start = time.perf_counter()
    subprocess.run(
        ["docker", "run", "--rm", "--network", "none", image, "true"], check=True, capture_output=True
    )
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=3)
    parser.add_argument("--image", default="spu-scaffold:test")
    parser.add_argument("--task", default="enzyme-kinetics", help="a demo task slug")
    parser.add_argument(
        "--sparse-gib", type=int, default=0, help="the oracle leaves a sparse file this large"
    )
    parser.add_argument("--harbor-default", action="store_true", help="Harbor's default mode (logs copied)")
    args = parser.parse_args()
    mode = [] if args.harbor_default else ["--ek", "auto_mounting=true"]
    agent = ["-a", "oracle"] if args.sparse_gib else ["-a", "nop"]
    with tempfile.TemporaryDirectory() as tmp:
        task = Path(tmp) / "bench-trial"
        demo = REPO / "environment" / "demo_tasks" / args.task / "task"
        subprocess.run(
            [
                sys.executable,
                "-m",
                "spu",
                "harbor",
                "export",
                str(demo),
                str(task),
                "--network",
                "none",
                "--image",
                args.image,
                *(["--oracle"] if args.sparse_gib else []),
            ],
            check=True,
            capture_output=True,
            cwd=REPO,
        )
        if args.sparse_gib:
            with (task / "solution" / "solve.sh").open("a", encoding="utf-8") as solve:
                solve.write(HOSTILE.format(gib=args.sparse_gib))
        trial_phases(task, Path(tmp) / "warm-up", agent, mode)
        runs = [trial_phases(task, Path(tmp) / f"jobs-{i}", agent, mode) for i in range(args.trials)]
    bare = statistics.median(bare_container(args.image) for _ in range(args.trials))
    median = {key: statistics.median(r[key] for r in runs) for key in runs[0]}
    overhead = median["trial"] - median["agent"]
    print(f"{'mode':>12}: {'Harbor default' if args.harbor_default else 'auto_mounting'}; agent {agent[1]}")
    for key in ("environment", "hand-off", "verifier", "trial"):
        print(f"{key:>12}: {median[key]:5.1f} s  (median of {args.trials})")
    print(f"{'trial disk':>12}: {median['disk']:5.1f} MiB on the host (du of the trial folder, median)")
    print(f"{'bare':>12}: {bare:5.1f} s  (docker run --rm IMAGE true, the baseline)")
    print(f"trial overhead beyond the agent: {overhead:.1f} s = {overhead / bare:.1f}x a bare container run")


if __name__ == "__main__":
    main()
