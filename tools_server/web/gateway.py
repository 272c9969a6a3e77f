"""The audited gateway: run one web operation, screen its output, record the call.

One :class:`Gateway` owns the audit log, the audited client and (when a policy is set) the detector. The
embedded MCP server and the audit service (``spu audit serve``) both call :meth:`Gateway.call`; the only
difference is which process holds the gateway, and therefore the policy.

For every call, in order: refuse it if the policy is ``enforce`` and an exposure was already recorded
(``policy_blocked``, recorded too); run the operation, whose every HTTP attempt the client logs; scan the
arguments, the result, every URL and final URL, and every raw body for the policy's identifiers; if
anything matched, withhold the result and return the stop notice instead; append the ``call`` record
(fsynced) and only then return.
"""

from __future__ import annotations

import contextlib
import json
import mmap
import os
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from spu_common.audit_log import utc_now
from spu_common.jsonfiles import atomic_write_json
from tools_server.plugin import ToolError
from tools_server.web import fetch, scholarly, search
from tools_server.web.audit import AuditLog
from tools_server.web.client import AuditedClient
from tools_server.web.detector import FLAG_MESSAGE, Detector
from tools_server.web.net import CallNet
from tools_server.web.policy import Policy

#: The longest a web call waits, in all, for the audit log's lock: under the web tools' time limits
#: (120 s and more), so a held lock ends the call with ``timeout`` before its client gives up.
CALL_DEADLINE_S = 100.0


@dataclass(frozen=True)
class Operation:
    input_model: type[BaseModel]
    run: Callable[[Any, CallNet], dict[str, Any]]
    provider: Callable[[Any], str | None]


OPERATIONS: dict[str, Operation] = {
    "web_search": Operation(
        search.SearchInput, search.web_search, lambda a: a.provider or search.configured_provider()
    ),
    "web_fetch": Operation(fetch.FetchInput, fetch.web_fetch, lambda a: "fetch"),
    "literature_search": Operation(
        scholarly.LiteratureInput, scholarly.literature_search, lambda a: a.source
    ),
    "pubchem_lookup": Operation(scholarly.PubChemInput, scholarly.pubchem_lookup, lambda a: "pubchem"),
    "uniprot_lookup": Operation(scholarly.UniProtInput, scholarly.uniprot_lookup, lambda a: "uniprot"),
    "pdb_lookup": Operation(scholarly.PDBInput, scholarly.pdb_lookup, lambda a: "rcsb"),
}


def stop_notice(tool: str) -> dict[str, Any]:
    """What a flagged call returns in place of its result: no content, no identifiers."""
    return {
        "withheld": True,
        "policy": {"flagged": True, "action": "stop_and_record", "message": FLAG_MESSAGE},
        "tool": tool,
    }


class Gateway:
    """Audit log + client + policy. Thread-safe; share one per process."""

    def __init__(
        self,
        log_path: str | Path,
        *,
        policy: Policy | None = None,
        workdir: str | Path | None = None,
        client: AuditedClient | None = None,
        key: bytes | None = None,
        call_deadline_s: float = CALL_DEADLINE_S,
    ) -> None:
        self.audit = AuditLog(log_path, key=key)
        self.call_deadline_s = call_deadline_s
        self.policy = policy if policy is not None and not policy.empty else None
        self.detector = Detector(self.policy) if self.policy else None
        self.workdir = Path(workdir) if workdir else self.audit.path.parent
        self.client = client or AuditedClient(self.audit)
        if self.client.audit is None:
            self.client.audit = self.audit
        self._lock = threading.Lock()
        enforce = self.policy is not None and self.policy.mode == "enforce"
        self._exposed = enforce and (exposure_path(self.audit.path).exists() or _any_flag(self.audit.path))

    @property
    def exposed(self) -> bool:
        return self._exposed

    def call(self, tool: str, args: dict[str, Any], call_id: str | None = None) -> dict[str, Any]:
        """Run ``tool`` with ``args``; raises :class:`ToolError`; the call is on disk before returning.

        Waiting for the audit log's lock counts against :attr:`call_deadline_s`: a process holding the lock
        gets this call a ``timeout`` error by then, never a stalled call."""
        with self.audit.deadline(time.monotonic() + self.call_deadline_s):
            return self._call(tool, args, call_id)

    def _call(self, tool: str, args: dict[str, Any], call_id: str | None) -> dict[str, Any]:
        op = OPERATIONS.get(tool)
        if op is None:
            raise ToolError("unknown_tool", f"{tool!r} is not a web tool.")
        call_id = call_id or uuid.uuid4().hex[:16]
        self.audit.check()  # a log that no longer matches its seal: refuse before any connection
        try:
            parsed = op.input_model.model_validate(args)
        except ValidationError as exc:
            self._record(tool, call_id, args, error="invalid_input")
            raise ToolError(
                "invalid_input", f"invalid arguments for {tool}: {exc.errors(include_url=False)}"
            ) from None
        clean_args = parsed.model_dump(mode="json")
        if self._exposed:
            self._record(tool, call_id, clean_args, error="policy_blocked")
            raise ToolError(
                "policy_blocked",
                "The information policy blocks further web access in this run: "
                "an earlier result exposed the source study.",
                hint="Stop using web tools, and record in your report the step that exposed it.",
            )
        net = CallNet(self.client, tool, call_id, self.workdir)
        started = time.monotonic()
        provider = None
        try:
            provider = op.provider(parsed)
            result = op.run(parsed, net)
        except ToolError as exc:
            flags = self._scan(clean_args, *net.scan_extra)
            self._record(
                tool,
                call_id,
                clean_args,
                provider=provider,
                error=exc.code,
                flags=flags,
                latency_ms=_ms(started),
            )
            if flags:
                return self._flagged(tool)
            raise
        flags = self._scan(clean_args, result, *net.scan_extra)
        self._record(
            tool,
            call_id,
            clean_args,
            provider=provider,
            flags=flags,
            n_results=result.get("n_results"),
            sources=net.sources,
            latency_ms=_ms(started),
        )
        if flags:
            return self._flagged(tool)
        return result

    def _flagged(self, tool: str) -> dict[str, Any]:
        if self.policy is not None and self.policy.mode == "enforce":
            self._exposed = True
            _mark_exposed(self.audit.path, tool)
        return stop_notice(tool)

    def _scan(self, *items: Any) -> list[str]:
        if self.detector is None:
            return []
        texts = [x if isinstance(x, (str, bytes)) else json.dumps(x, ensure_ascii=False) for x in items if x]
        return self.detector.scan(*texts)

    def _record(self, tool: str, call_id: str, args: dict[str, Any], **fields: Any) -> None:
        self.audit.append(
            {
                "kind": "call",
                "tool": tool,
                "call_id": call_id,
                "args": args,
                **{k: v for k, v in fields.items() if v not in (None, [], {})},
            }
        )


def exposure_path(log: Path) -> Path:
    """The enforce-mode exposure marker beside the log: once written, web calls stay blocked even when
    the flagged records are deleted from the log (which the seal check refuses anyway)."""
    return log.with_name(log.name + ".exposed")


def _mark_exposed(log: Path, tool: str) -> None:
    path = exposure_path(log)
    if not path.exists():
        atomic_write_json(path, {"exposed": True, "tool": tool, "ts": utc_now()})


def _any_flag(log: Path) -> bool:
    """Whether the log records a flagged call. Only the lines holding ``"flags":`` are parsed (a byte search
    over the file, a fraction of a second per GB: a flagged record always holds it, canonical JSON never
    escapes it), so an enforce-mode start on a long log does not parse every record."""
    try:
        fh = open(log, "rb")  # noqa: SIM115 - closed below, with the map
    except FileNotFoundError:
        return False
    with fh:
        if os.fstat(fh.fileno()).st_size == 0:
            return False
        with mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as data:
            at = data.find(b'"flags":')
            while at >= 0:
                start = data.rfind(b"\n", 0, at) + 1
                end = data.find(b"\n", at)
                end = len(data) if end < 0 else end
                with contextlib.suppress(ValueError):
                    record = json.loads(data[start:end])
                    if isinstance(record, dict) and record.get("kind") == "call" and record.get("flags"):
                        return True
                at = data.find(b'"flags":', end)
    return False


def _ms(started: float) -> float:
    return round((time.monotonic() - started) * 1000, 1)
