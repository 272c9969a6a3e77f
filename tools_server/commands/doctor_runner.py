"""Where ``spu doctor``'s engine checks run: each in a process of its own, started warm.

A check is Python code run as ``python -c`` would run it, in a process of its own session, with its output
captured and a time limit: a segfault, a ``STOP`` or a hang is that check's failure, never doctor's. Most of
a check's time is importing its engine, and several checks import the same heavy packages (PyTorch for the
machine-learned potentials and the protein models): a *zygote* imports the modules that two or more checks
import (read from their code), then forks one child per check, so each child starts with them loaded.
A check that imports none of them runs in a fresh interpreter, at once. A module the zygote cannot import
is left for the checks to import (and report) themselves; a zygote that dies (an import that crashes the
interpreter) sends its checks to fresh interpreters. A forked child is as isolated as a fresh one: its own
session and process group, its own output files, killed whole at its time limit.

GPU checks always run in fresh interpreters: CUDA must be initialised in the process that uses it.
"""

from __future__ import annotations

import ast
import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import IO

#: The zygote: imports the modules named in argv[1] (skipping those that fail), says ``ready``, then forks
#: a child per request line ``{"id", "code", "env", "stdout", "stderr"}`` and reports ``{"id", "pid"}`` and
#: later ``{"id", "status"}`` (the raw wait status) on its stdout. It ends when its stdin closes.
_ZYGOTE = r"""
import json, os, select, sys, traceback
loaded = []
for name in json.loads(sys.argv[1]):
    try:
        __import__(name)
        loaded.append(name)
    except Exception:
        pass
channel = os.fdopen(os.dup(1), "w", buffering=1)
def say(**message):
    channel.write(json.dumps(message) + "\n")
say(ready=loaded)
children = {}
buffer = b""
stdin = sys.stdin.fileno()
open_input = True
while open_input or children:
    readable, _, _ = select.select([stdin] if open_input else [], [], [], 0.05)
    if readable:
        chunk = os.read(stdin, 1 << 16)
        if not chunk:
            open_input = False
        buffer += chunk
        while b"\n" in buffer:
            line, buffer = buffer.split(b"\n", 1)
            request = json.loads(line)
            pid = os.fork()
            if pid == 0:
                status = 1
                try:
                    os.setsid()
                    os.close(channel.fileno())  # the zygote's replies are not the check's to hold open
                    devnull = os.open(os.devnull, os.O_RDONLY)
                    os.dup2(devnull, 0)
                    os.close(devnull)
                    for fd, path in ((1, request["stdout"]), (2, request["stderr"])):
                        target = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
                        os.dup2(target, fd)
                        os.close(target)
                    sys.stdout = os.fdopen(1, "w", buffering=1)
                    sys.stderr = os.fdopen(2, "w", buffering=1)
                    sys.stdin = os.fdopen(0)
                    os.environ.clear()
                    os.environ.update(request["env"])
                    sys.argv = ["-c"]
                    try:
                        exec(compile(request["code"], "<string>", "exec"), {"__name__": "__main__"})
                        status = 0
                    except SystemExit as exc:
                        if exc.code is None or isinstance(exc.code, int):
                            status = exc.code or 0
                        else:
                            print(exc.code, file=sys.stderr)
                    except BaseException:
                        traceback.print_exc()
                finally:
                    try:
                        sys.stdout.flush()
                        sys.stderr.flush()
                    finally:
                        os._exit(status)
            children[pid] = request["id"]
            say(id=request["id"], pid=pid)
    while children:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            break
        if pid == 0:
            break
        say(id=children.pop(pid), status=status)
"""


@dataclass
class Finished:
    """A check's process at its end: ``returncode`` as :class:`subprocess.Popen` gives it (negative: the
    signal that ended it), or None when it ran past its time limit and was killed."""

    returncode: int | None
    stdout: str
    stderr: str


def imports_of(code: str) -> set[str]:
    """The modules a check's code imports (``import a.b``, ``from a.b import c``: ``a.b``)."""
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return set()
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


def shared_imports(codes: Iterable[str], least: int = 2) -> list[str]:
    """The modules that at least ``least`` of the checks' codes import, most used first."""
    counts: Counter[str] = Counter()
    for code in codes:
        counts.update(imports_of(code))
    return [name for name, n in counts.most_common() if n >= least]


#: fresh interpreters and forked children running now (killed, with their groups, on Ctrl-C)
_RUNNING: set[int] = set()
_RUNNING_LOCK = threading.Lock()


def kill_all() -> None:
    """Kill every check process running now, each with its process group."""
    with _RUNNING_LOCK:
        for pid in list(_RUNNING):
            _kill_group(pid)


def _kill_group(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


def run_fresh(code: str, env: dict[str, str], timeout_s: float) -> Finished:
    """Run ``code`` with ``python -c`` in a session of its own."""
    proc = subprocess.Popen(
        [sys.executable, "-c", code],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
    )
    with _RUNNING_LOCK:
        _RUNNING.add(proc.pid)
    try:
        stdout, stderr = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        _kill_group(proc.pid)
        stdout, stderr = proc.communicate()
        return Finished(None, stdout, stderr)
    finally:
        with _RUNNING_LOCK:
            _RUNNING.discard(proc.pid)
    return Finished(proc.returncode, stdout, stderr)


class ZygoteGone(RuntimeError):
    """The zygote ended (or never became ready): run the check in a fresh interpreter."""


class Zygote:
    """One warm process that forks the checks (see the module docstring). Thread-safe: checks run from
    doctor's thread pool call :meth:`run` at once."""

    def __init__(self, preload: list[str], env: dict[str, str]) -> None:
        self.preload = preload
        self._proc = subprocess.Popen(
            [sys.executable, "-c", _ZYGOTE, json.dumps(preload)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=env,
            start_new_session=True,
        )
        self._lock = threading.Lock()
        self._next_id = 0
        self._waiting: dict[int, dict] = {}
        self._events: dict[int, threading.Event] = {}
        self._ready = threading.Event()
        self._gone = False
        self.loaded: list[str] = []
        self._tmp = tempfile.TemporaryDirectory(prefix="spu-doctor-")
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self._proc.stdout is not None
        for raw in self._proc.stdout:
            try:
                message = json.loads(raw)
            except ValueError:
                continue
            if "ready" in message:
                self.loaded = list(message["ready"])
                self._ready.set()
                continue
            with self._lock:
                entry = self._waiting.setdefault(message["id"], {})
                entry.update(message)
                event = self._events.get(message["id"])
            if event is not None:
                event.set()
        with self._lock:
            self._gone = True
            events = list(self._events.values())
        self._ready.set()
        for event in events:
            event.set()

    def run(self, code: str, env: dict[str, str], timeout_s: float) -> Finished:
        """Run ``code`` in a child forked from the zygote; :class:`ZygoteGone` when the zygote cannot."""
        self._ready.wait()
        with self._lock:
            if self._gone:
                raise ZygoteGone("the zygote ended")
            ident = self._next_id
            self._next_id += 1
            event = self._events[ident] = threading.Event()
        out = Path(self._tmp.name) / f"{ident}.out"
        err = Path(self._tmp.name) / f"{ident}.err"
        request = {"id": ident, "code": code, "env": env, "stdout": str(out), "stderr": str(err)}
        try:
            self._send(json.dumps(request) + "\n")
            pid = self._wait_for(ident, event, "pid", None)
            assert pid is not None
            with _RUNNING_LOCK:
                _RUNNING.add(pid)
            try:
                status = self._wait_for(ident, event, "status", timeout_s)
                if status is None:  # past its time limit
                    _kill_group(pid)
                    self._wait_for(ident, event, "status", None)
            except ZygoteGone:
                _kill_group(pid)  # no one is left to wait for it: it runs again in a fresh interpreter
                raise
            finally:
                with _RUNNING_LOCK:
                    _RUNNING.discard(pid)
            return Finished(
                None if status is None else os.waitstatus_to_exitcode(status), _text(out), _text(err)
            )
        finally:
            with self._lock:
                self._events.pop(ident, None)
                self._waiting.pop(ident, None)
            for path in (out, err):
                with contextlib.suppress(OSError):
                    path.unlink()

    def _send(self, line: str) -> None:
        stdin: IO[bytes] | None = self._proc.stdin
        try:
            with self._lock:
                assert stdin is not None
                stdin.write(line.encode())
                stdin.flush()
        except (OSError, ValueError):
            raise ZygoteGone("the zygote ended") from None

    def _wait_for(self, ident: int, event: threading.Event, key: str, timeout_s: float | None) -> int | None:
        """The zygote's ``key`` for request ``ident``; None past ``timeout_s``; :class:`ZygoteGone`."""
        import time

        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        while True:
            with self._lock:
                entry = self._waiting.get(ident, {})
                if key in entry:
                    return int(entry[key])
                if self._gone:
                    raise ZygoteGone("the zygote ended")
                event.clear()
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                return None
            event.wait(left)

    def close(self) -> None:
        """End the zygote (its children are waited for or were killed) and remove its files."""
        with contextlib.suppress(OSError, ValueError):
            if self._proc.stdin is not None:
                self._proc.stdin.close()
        try:
            self._proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            _kill_group(self._proc.pid)
            self._proc.wait()
        self._tmp.cleanup()


def _text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""
