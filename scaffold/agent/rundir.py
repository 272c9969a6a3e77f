"""The run's output directory, and the guarantee that it always holds a valid submission.

Layout (docs/agent.md)::

    <out>/rankings.json        the latest valid ranking (a fallback in presented order until a draft lands)
    <out>/report.md            the model's report plus a run record
    <out>/sources.json         the source record from the tool server's audit log
    <out>/drafts/draft-NNN.json  every accepted draft
    <out>/scripts/             code the agent ran with the python tool
    <out>/work                 the agent's working directory (bash, python, read_file, write_file)
    <out>/spu-work/            the tool server's SPU_WORKDIR (artifacts, jobs, audit log)
    <out>/trajectory.jsonl     every step, appended as it happens
    <out>/trajectory.json      the same run in Harbor's ATIF
    <out>/run.json             exit status, totals, where the submission came from
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from spu_common.audit_log import SOURCES_SCHEMA, write_sources
from spu_common.jsonfiles import atomic_write_text
from spu_common.submission import (
    ValidationReport,
    fallback_submission,
    submission_from_orders,
    validate_submission,
    write_submission_atomic,
)
from spu_common.task import Task

#: the kind of output folder a run is (spu_common.outputs): `spu agent run` replaces an earlier run of
#: this kind, `spu batch` redoes an unfinished one
RUN_KIND = "agent-run"


class RunFolderInUse(RuntimeError):
    """The output folder already holds a run; a second one would be appended to its trajectory."""


class RunDir:
    def __init__(self, out: str | Path, task: Task, *, server_workdir: str | Path | None = None) -> None:
        self.root = Path(out).absolute()
        self.task = task
        self.rankings = self.root / "rankings.json"
        self.report = self.root / "report.md"
        self.sources = self.root / "sources.json"
        self.drafts = self.root / "drafts"
        self.scripts = self.root / "scripts"
        self.work = self.root / "work"
        self.spu_work = Path(server_workdir).absolute() if server_workdir else self.root / "spu-work"
        self.trajectory = self.root / "trajectory.jsonl"
        self.atif = self.root / "trajectory.json"
        self.result = self.root / "run.json"
        self.model_report: str | None = None
        self.n_drafts = 0
        self.submission_source = "fallback"

    def create(self) -> None:
        """Make the folders and write the fallback ranking, before anything else can fail. A folder that
        already holds a run's trajectory is refused (:class:`RunFolderInUse`): two runs would mix in it
        (``spu agent run`` replaces an earlier run before it starts, spu_common.outputs)."""
        if self.trajectory.is_file() and self.trajectory.stat().st_size:
            raise RunFolderInUse(
                f"{self.root} already holds a run ({self.trajectory.name}): give an empty output folder"
            )
        for folder in (self.root, self.drafts, self.scripts, self.work, self.spu_work):
            folder.mkdir(parents=True, exist_ok=True)
        write_submission_atomic(self.rankings, fallback_submission(self.task))
        self.submission_source = "fallback"

    def accept_draft(self, data: Any) -> tuple[ValidationReport, Path | None]:
        """Validate ``data`` against the contract; if valid, keep it as a draft and as ``rankings.json``."""
        report = validate_submission(data, self.task, recover=True)
        if not report.valid:
            return report, None
        canonical = submission_from_orders(self.task, report.orders)
        self.n_drafts += 1
        draft = self.drafts / f"draft-{self.n_drafts:03d}.json"
        write_submission_atomic(draft, canonical)
        write_submission_atomic(self.rankings, canonical)
        self.submission_source = draft.relative_to(self.root).as_posix()
        return report, draft

    def latest_draft(self) -> Path | None:
        drafts = sorted(self.drafts.glob("draft-*.json"))
        return drafts[-1] if drafts else None

    def secure_submission(self) -> str:
        """Make sure ``rankings.json`` is valid (the agent's code could have overwritten it); say where it
        came from.

        Order of preference: the file as it stands if valid, the latest valid draft, the fallback.
        """
        if self.rankings.is_file() and validate_submission(self.rankings, self.task, recover=False).valid:
            return self.submission_source
        for draft in sorted(self.drafts.glob("draft-*.json"), reverse=True):
            if validate_submission(draft, self.task, recover=False).valid:
                write_submission_atomic(self.rankings, json.loads(draft.read_text(encoding="utf-8")))
                self.submission_source = draft.relative_to(self.root).as_posix()
                return self.submission_source
        write_submission_atomic(self.rankings, fallback_submission(self.task))
        self.submission_source = "fallback"
        return self.submission_source

    def write_report(self, run_record: dict[str, Any]) -> None:
        """``report.md``: the model's own report (if it wrote one) followed by the run record."""
        parts = []
        if self.model_report and self.model_report.strip():
            parts.append(self.model_report.strip())
        else:
            parts.append(
                f"# Report: {self.task.task_id}\n\nThe agent did not write a report. The submission is "
                f"`{self.submission_source}`"
                + (
                    " (the experiments in their presented order)."
                    if self.submission_source == "fallback"
                    else "."
                )
            )
        lines = ["## Run record", ""]
        for key, value in run_record.items():
            lines.append(f"- {key}: {value}")
        parts.append("\n".join(lines))
        atomic_write_text(self.report, "\n\n".join(parts) + "\n")

    def write_sources(self) -> dict[str, Any]:
        """``sources.json`` from the server's audit log; an empty record with a note when there is none."""
        log_path = self.spu_work / "audit" / "audit.jsonl"
        note = None
        if log_path.is_file():
            try:
                return write_sources(log_path, self.sources)
            except Exception as exc:
                note = f"the audit log {log_path.name} could not be read: {type(exc).__name__}: {exc}"
        data = {
            "schema": SOURCES_SCHEMA,
            "audit_log": None,
            "searches": [],
            "sources": [],
            "flags": [],
            "note": note or "no audited web call was made in this run (no audit log)",
        }
        atomic_write_text(self.sources, json.dumps(data, indent=2) + "\n")
        return data

    def write_result(self, result: dict[str, Any]) -> None:
        atomic_write_text(self.result, json.dumps(result, indent=2, ensure_ascii=False) + "\n")
