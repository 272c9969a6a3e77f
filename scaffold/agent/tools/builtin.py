"""Tools the agent has without the MCP server: bash, python, read_file, write_file, submit_rankings.

Commands run in the run's ``work/`` folder in their own process group; on timeout (or when the run is
interrupted) the whole group is killed, so no grandchild survives. Output goes to a temporary file, not
a pipe, so a command that prints gigabytes cannot fill the agent's memory; the model sees its head and tail.
The agent's model API keys are removed from the environment of the commands it runs.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from scaffold.agent.config import ToolsSection
from scaffold.agent.models import MODEL_KEY_ENV
from scaffold.agent.models.base import ToolDef
from scaffold.agent.rundir import RunDir
from scaffold.agent.tools.output import ToolResult, cut_middle

READ_LIMIT_LINES = 2000

DEFINITIONS: dict[str, ToolDef] = {
    "bash": ToolDef(
        "bash",
        "Run a bash command in your working directory and return its exit code and combined stdout/stderr "
        "(long output keeps its head and tail). The command is killed with everything it started after "
        "timeout_s seconds. Use it for files, pip-free shell work and quick checks; heavy chemistry and "
        "physics belong in the spu tools.",
        {
            "type": "object",
            "properties": {
                "command": {"type": "string", "description": "the bash command line"},
                "timeout_s": {
                    "type": "number",
                    "description": "seconds before the command is killed",
                    "minimum": 1,
                },
            },
            "required": ["command"],
        },
    ),
    "python": ToolDef(
        "python",
        "Run a Python script with the agent's interpreter (numpy, scipy, rdkit and pandas are installed) "
        "in your working directory. The script is saved under scripts/ for the record; print what you "
        "need. Returns the exit code and combined stdout/stderr (long output keeps head and tail).",
        {
            "type": "object",
            "properties": {
                "code": {"type": "string", "description": "the Python source to run"},
                "timeout_s": {
                    "type": "number",
                    "description": "seconds before the script is killed",
                    "minimum": 1,
                },
            },
            "required": ["code"],
        },
    ),
    "read_file": ToolDef(
        "read_file",
        "Read a text file (a task file, an artifact path returned by a tool, your own output). Relative "
        "paths are taken from your working directory. Returns numbered lines from offset (1-based), at most "
        f"limit lines (default {READ_LIMIT_LINES}).",
        {
            "type": "object",
            "properties": {
                "path": {"type": "string"},
                "offset": {"type": "integer", "minimum": 1, "description": "first line to return (1-based)"},
                "limit": {"type": "integer", "minimum": 1, "description": "how many lines to return"},
            },
            "required": ["path"],
        },
    ),
    "write_file": ToolDef(
        "write_file",
        "Write a text file inside the run's output directory (relative paths: your working directory). "
        "Use submit_rankings, not this tool, for the ranking.",
        {
            "type": "object",
            "properties": {"path": {"type": "string"}, "content": {"type": "string"}},
            "required": ["path", "content"],
        },
    ),
    "submit_rankings": ToolDef(
        "submit_rankings",
        "Submit a complete ranking: every group, each order listing every experiment id of the group once, "
        "from the LOWEST to the HIGHEST measured value. It is checked against the task contract; if valid it "
        "becomes rankings.json at once and is kept as a draft, otherwise nothing is written and the errors "
        "are returned. Submit a first complete draft early and revise it only on evidence. Pass report "
        "(markdown: "
        "method, evidence, uncertainty, any recollection of published results, any policy stop) with your "
        "submission; set final=true on your last submission to end the run.",
        {
            "type": "object",
            "properties": {
                "rankings": {
                    "type": "array",
                    "description": "one entry per group",
                    "items": {
                        "type": "object",
                        "properties": {
                            "group_id": {"type": "string"},
                            "order": {"type": "array", "items": {"type": "string"}},
                        },
                        "required": ["group_id", "order"],
                    },
                },
                "report": {"type": "string", "description": "report.md content (markdown)"},
                "final": {"type": "boolean", "description": "true to end the run after this submission"},
            },
            "required": ["rankings"],
        },
    ),
}


class BuiltinTools:
    def __init__(self, rundir: RunDir, config: ToolsSection) -> None:
        """``config``: the ``tools`` section (command timeout, output cap, the built-in tools offered)."""
        self.rundir = rundir
        self.timeout_s = config.command_timeout_s
        #: returns the run's remaining wall time (None: unlimited); commands never outlive the run's budget
        self.time_left: Callable[[], float | None] = lambda: None
        self.max_chars = config.max_output_chars
        wanted = list(config.builtin)
        unknown = sorted(set(wanted) - set(DEFINITIONS))
        if unknown:
            raise ValueError(f"unknown built-in tools {unknown}; choose from {sorted(DEFINITIONS)}")
        if "submit_rankings" not in wanted:
            wanted = [*wanted, "submit_rankings"]  # the run cannot do without it
        self.names = [n for n in DEFINITIONS if n in wanted]
        self._handlers: dict[str, Callable[[dict[str, Any]], ToolResult]] = {
            "bash": self.bash,
            "python": self.python,
            "read_file": self.read_file,
            "write_file": self.write_file,
            "submit_rankings": self.submit_rankings,
        }
        self._script_count = 0

    def definitions(self) -> list[ToolDef]:
        return [DEFINITIONS[n] for n in self.names]

    def call(self, name: str, args: dict[str, Any]) -> ToolResult:
        return self._handlers[name](args)

    # -- commands ---------------------------------------------------------------------------------------

    def bash(self, args: dict[str, Any]) -> ToolResult:
        command = args.get("command")
        if not isinstance(command, str) or not command.strip():
            return ToolResult("bash needs a non-empty 'command' string", is_error=True)
        return self._run(["bash", "-c", command], args.get("timeout_s"))

    def python(self, args: dict[str, Any]) -> ToolResult:
        code = args.get("code")
        if not isinstance(code, str) or not code.strip():
            return ToolResult("python needs a non-empty 'code' string", is_error=True)
        self._script_count += 1
        script = self.rundir.scripts / f"script-{self._script_count:03d}.py"
        script.write_text(code, encoding="utf-8")
        result = self._run([sys.executable, str(script)], args.get("timeout_s"))
        result.content = f"(saved as scripts/{script.name})\n" + result.content
        return result

    def _run(self, argv: list[str], timeout_s: Any) -> ToolResult:
        try:
            limit = min(float(timeout_s), self.timeout_s) if timeout_s is not None else self.timeout_s
            if (left := self.time_left()) is not None:
                limit = max(1.0, min(limit, left))
        except (TypeError, ValueError):
            return ToolResult(f"timeout_s must be a number of seconds, not {timeout_s!r}", is_error=True)
        env = {k: v for k, v in os.environ.items() if k not in MODEL_KEY_ENV}
        started = time.monotonic()
        with tempfile.TemporaryFile(mode="w+b") as sink:
            proc = subprocess.Popen(
                guarded(argv),
                cwd=self.rundir.work,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=sink,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                # setpriv (util-linux) asks the kernel itself; a preexec_fn is only the fallback, as
                # Python code between fork and exec can deadlock while other threads hold locks
                preexec_fn=None if SETPRIV else term_on_parent_death(os.getpid()),
            )
            timed_out = False
            try:
                proc.wait(timeout=limit)
            except subprocess.TimeoutExpired:
                timed_out = True
            finally:
                kill_group(proc)  # also on SIGTERM of the agent: nothing the command started survives
            sink.seek(0)
            raw = sink.read()
        output = cut_middle(raw.decode("utf-8", errors="replace"), self.max_chars)
        wall_s = time.monotonic() - started
        if timed_out:
            return ToolResult(
                f"killed after {limit:.0f} s (timeout); output so far:\n{output}",
                is_error=True,
                data={"timed_out": True, "wall_s": wall_s},
            )
        code = proc.returncode
        return ToolResult(
            f"exit code {code}\n{output}", is_error=code != 0, data={"exit_code": code, "wall_s": wall_s}
        )

    # -- files ------------------------------------------------------------------------------------------

    def _resolve(self, path: Any) -> Path:
        if not isinstance(path, str) or not path.strip():
            raise ValueError("'path' must be a non-empty string")
        p = Path(path).expanduser()
        return (p if p.is_absolute() else self.rundir.work / p).resolve()

    def read_file(self, args: dict[str, Any]) -> ToolResult:
        try:
            path = self._resolve(args.get("path"))
            offset = max(1, int(args.get("offset") or 1))
            limit = max(1, int(args.get("limit") or READ_LIMIT_LINES))
        except (TypeError, ValueError) as exc:
            return ToolResult(f"read_file: {exc}", is_error=True)
        if not path.is_file():
            return ToolResult(f"read_file: {path} does not exist or is not a file", is_error=True)
        with open(path, "rb") as handle:
            raw = handle.read(50_000_000)
        if b"\x00" in raw[:8192]:
            return ToolResult(
                f"read_file: {path} looks binary; inspect it with bash or python", is_error=True
            )
        lines = raw.decode("utf-8", errors="replace").splitlines()
        chunk = lines[offset - 1 : offset - 1 + limit]
        body = "\n".join(f"{offset + i:6d}\t{line}" for i, line in enumerate(chunk))
        more = len(lines) - (offset - 1 + len(chunk))
        tail = f"\n[{more} more lines; continue with offset={offset + len(chunk)}]" if more > 0 else ""
        return ToolResult(cut_middle(body, self.max_chars) + tail, data={"lines": len(lines)})

    def write_file(self, args: dict[str, Any]) -> ToolResult:
        content = args.get("content")
        if not isinstance(content, str):
            return ToolResult("write_file needs 'content' as a string", is_error=True)
        try:
            path = self._resolve(args.get("path"))
        except ValueError as exc:
            return ToolResult(f"write_file: {exc}", is_error=True)
        if not path.is_relative_to(self.rundir.root):
            return ToolResult(
                f"write_file: {path} is outside the run's output directory {self.rundir.root}", is_error=True
            )
        protected = {self.rundir.rankings, self.rundir.report, self.rundir.trajectory, self.rundir.atif}
        if path in protected or path.is_relative_to(self.rundir.drafts):
            return ToolResult(
                f"write_file: {path.name} is written by the agent itself; submit the ranking and "
                "the report with submit_rankings",
                is_error=True,
            )
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content, encoding="utf-8")
        return ToolResult(f"wrote {len(content)} characters to {path}")

    # -- the submission ---------------------------------------------------------------------------------

    def submit_rankings(self, args: dict[str, Any]) -> ToolResult:
        task = self.rundir.task
        rankings = args.get("rankings")
        if isinstance(rankings, str):  # some models send the array as a JSON string
            try:
                rankings = json.loads(rankings)
            except ValueError:
                return ToolResult(
                    "submit_rankings: 'rankings' must be an array of {group_id, order}", is_error=True
                )
        data = {"task_id": task.task_id, "task_version": task.task_version, "rankings": rankings}
        report, draft = self.rundir.accept_draft(data)
        if draft is None:
            errors = "\n".join(f"- {line}" for line in report.messages())
            return ToolResult(
                "The ranking was NOT accepted; rankings.json is unchanged. Fix these and submit again:\n"
                + errors,
                is_error=True,
                data={"valid": False, "errors": report.messages()},
            )
        if isinstance(args.get("report"), str) and args["report"].strip():
            self.rundir.model_report = args["report"]
        accepted = (
            f"Draft {self.rundir.n_drafts} accepted and saved as rankings.json (drafts/{draft.name}); "
            f"{len(report.orders)} groups."
        )
        notes = [accepted]
        if report.recovered:
            notes.append("Recovered schema departures: " + "; ".join(report.recovered))
        presented = [
            g.group_id
            for g in task.groups
            if len(g.experiment_ids) > 2 and report.orders[g.group_id] == list(g.experiment_ids)
        ]
        if presented:
            notes.append(
                f"Note: groups {presented} are in the presented order, which is random; rank them "
                "by evidence."
            )
        final = bool(args.get("final"))
        notes.append(
            "The run ends now (final=true)."
            if final
            else "Keep working if you have evidence to improve it; submit again with final=true to finish."
        )
        return ToolResult(
            "\n".join(notes), data={"valid": True, "draft": draft.name, "final": final}, final=final
        )


#: The command runs under a bash that, on SIGTERM, kills its whole process group (the command and everything
#: it started); the kernel sends that SIGTERM when the agent dies, even by SIGKILL (parent-death signal).
GUARD_SCRIPT = 'trap "trap - TERM; kill -KILL 0" TERM; "$@" & wait $!; status=$?; exit $status'
PR_SET_PDEATHSIG = 1


SETPRIV = shutil.which("setpriv")


def guarded(argv: list[str]) -> list[str]:
    """``argv`` run under the group-killing guard shell (see GUARD_SCRIPT), which gets SIGTERM when the
    agent dies: through ``setpriv --pdeathsig`` where it exists, else :func:`term_on_parent_death`."""
    guard = ["bash", "-c", GUARD_SCRIPT, "spu-agent-guard", *argv]
    return [SETPRIV, "--pdeathsig", "TERM", *guard] if SETPRIV else guard


def term_on_parent_death(parent_pid: int) -> Callable[[], None] | None:
    """A ``preexec_fn`` asking the kernel for SIGTERM when the agent dies (Linux ``prctl``; elsewhere the
    process group is still killed when the agent ends normally or on SIGTERM)."""
    if not sys.platform.startswith("linux"):
        return None
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)

    def set_pdeathsig() -> None:
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
        if os.getppid() != parent_pid:  # the agent died before prctl took effect
            os.kill(os.getpid(), signal.SIGTERM)

    return set_pdeathsig


def kill_group(proc: subprocess.Popen) -> None:
    """Kill the process group of ``proc`` (it was started in its own session) and reap it."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=5)
