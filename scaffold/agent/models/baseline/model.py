"""``BaselineModel``: a keyless model that plays the agent's part by a fixed script, through the tools.

Each :meth:`BaselineModel.query` answers one turn of the script (:meth:`BaselineModel.script`, a generator
that yields tool calls and receives their results from the conversation):

1. read ``contract.json`` and ``targets.csv`` with ``read_file`` (page by page; a page cut at the agent's
   ``tools.max_output_chars`` is read again in smaller pages), and parse them with the task format's own
   parsers;
2. compute the entry's value for every experiment: a molecular descriptor with the server's
   ``chem_descriptors``; a declared proxy with its tools and arguments from ``baselines.json``, one call per
   experiment and term, as ``spu baselines`` makes them; anything else with the screen's own code
   (:mod:`scaffold.agent.models.baseline.values`); long jobs are waited for with ``job_wait``;
3. rank every group by the values in the entry's direction (ties keep the presented order) and submit with
   ``submit_rankings(final=true)`` and a report: the entry, where its values came from, the tie rule, the
   card's expected score, and a table of the values.

What cannot be had ends the run as a model error (exit status ``model_error``) naming the cause: a tool
that fails (its error code, as ``[weights_missing]``), a tool this run does not offer, an entry the screen's
code no longer computes. The fallback ``rankings.json`` stays.
"""

from __future__ import annotations

import csv
import io
import json
import re
from collections.abc import Generator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from scaffold.agent.config import ModelSection
from scaffold.agent.models.base import ModelError, ModelTurn, ToolDef, Usage
from scaffold.agent.models.baseline.entries import Entry, EntryError, resolve_entry
from scaffold.agent.models.baseline.values import (
    column_cells,
    entry_column,
    local_values,
    molecule_request,
    ranked,
    settled,
)
from spu_common.task import Task

#: Lines asked of ``read_file`` per page at first (halved while a page comes back cut).
PAGE_LINES = 400
#: ``wait_s`` of each ``job_wait`` poll.
POLL_S = 60
_NUMBERED = re.compile(r" *(\d+)\t(.*)")
_MORE = re.compile(r"\[(\d+) more lines; continue with offset=(\d+)\]")
#: The note ``cut_middle`` (scaffold/agent/tools/output.py) leaves where it cut an output.
_CUT = "characters omitted from the middle"
_CODE = re.compile(r"\[([a-z_]+)\]")


@dataclass(frozen=True)
class Call:
    name: str
    arguments: dict[str, Any]


@dataclass(frozen=True)
class Reply:
    """A tool result as the model reads it in the conversation."""

    content: str
    is_error: bool

    def json(self, tool: str) -> dict[str, Any]:
        try:
            data = json.loads(self.content)
        except ValueError:
            cut = " (it was cut at tools.max_output_chars: raise it)" if _CUT in self.content else ""
            raise ModelError(f"the result of {tool} is not the JSON expected{cut}") from None
        if not isinstance(data, dict):
            raise ModelError(f"the result of {tool} is not a JSON object")
        return data


#: One turn of the script: the text said and the calls made.
Turn = tuple[str, list[Call]]
Script = Generator[Turn, list[Reply], None]


class BaselineModel:
    """``baseline:ENTRY`` (:mod:`scaffold.agent.models.baseline`); duck-types the HTTP models, costs
    nothing."""

    provider = "baseline"

    @classmethod
    def preflight(
        cls,
        model: str,
        config: ModelSection,
        *,
        base_url: str | None,
        task_id: str,
        task_dir: Path | None = None,
    ) -> str | None:
        """A card that lacks the entry, or no card (the message names what the card has)."""
        if task_dir is None:
            return "baseline:ENTRY needs the task directory, to find the task's card beside it"
        try:
            resolve_entry(model, Path(task_dir))
        except EntryError as exc:
            return str(exc)
        return None

    @classmethod
    def from_spec(
        cls,
        model: str,
        config: ModelSection,
        *,
        base_url: str | None = None,
        cache_key: str | None = None,
        paths: dict[str, str] | None = None,
    ) -> BaselineModel:
        """``model`` is the ENTRY; ``paths["TASK_DIR"]`` the task directory (its card is beside it)."""
        if not paths or not paths.get("TASK_DIR"):
            raise ValueError("baseline:ENTRY needs the run's paths (TASK_DIR): build it with make_model")
        task_dir = Path(paths["TASK_DIR"])
        return cls(model, resolve_entry(model, task_dir), task_dir)

    def __init__(self, spelling: str, entry: Entry, task_dir: Path) -> None:
        self.spelling = spelling
        self.entry = entry
        self.task_dir = task_dir
        self.offered: set[str] = set()
        self._script = self.script()
        self._calls: list[str] = []  # the ids of the last turn's calls
        self._count = 0

    @property
    def name(self) -> str:
        return f"baseline:{self.spelling}"

    def query(self, messages: list[dict[str, Any]], tools: list[ToolDef]) -> ModelTurn:
        self.offered = {t.name for t in tools}
        try:
            text, calls = self._script.send(_replies(messages, self._calls) if self._calls else None)
        except StopIteration:  # asked again after the final submission: say so, without a tool call
            text, calls = "The baseline has submitted its ranking.", []
        tool_calls = []
        for call in calls:
            self._count += 1
            tool_calls.append(
                {
                    "id": f"baseline-{self._count}",
                    "name": call.name,
                    "arguments": call.arguments,
                    "arguments_raw": json.dumps(call.arguments, ensure_ascii=False),
                    "error": None,
                }
            )
        self._calls = [c["id"] for c in tool_calls]
        message = {"role": "assistant", "content": text, "tool_calls": tool_calls, "provider": self.provider}
        return ModelTurn(message=message, usage=Usage(), stop_reason="baseline")

    def close(self) -> None:
        self._script.close()

    # -- the script ---------------------------------------------------------------------------------------

    def script(self) -> Script:
        entry = self.entry
        said = (
            f"Keyless baseline: every group ranked by {entry.name!r} ({entry.direction}), an entry of the "
            f"task's card. Reading the task."
        )
        contract, targets = yield from self.read(
            [self.task_dir / "contract.json", self.task_dir / "targets.csv"], said
        )
        task = _task(contract, targets, self.task_dir)
        if entry.kind == "proxy":
            values, source, groups = yield from self.proxy_values(task)
        else:
            values, source = yield from self.panel_values(task)
            groups = None
        orders = ranked(task, values, entry.direction, groups)
        rankings = [{"group_id": g, "order": order} for g, (order, _) in orders.items()]
        self.require("submit_rankings")
        report = _report(task, entry, source, values, orders)
        replies = yield (
            f"Submitting the ranking by {entry.name!r} ({entry.direction}).",
            [Call("submit_rankings", {"rankings": rankings, "report": report, "final": True})],
        )
        if replies[0].is_error:
            raise ModelError(f"submit_rankings refused the baseline's ranking: {replies[0].content}")

    def require(self, tool: str) -> None:
        if tool not in self.offered:
            raise ModelError(
                f"baseline:{self.spelling} needs the tool {tool}, which this run does not offer (check "
                "tools.builtin, tools.mcp.include/exclude, and the trajectory's mcp_unavailable event)"
            )

    def read(self, paths: list[Path], said: str) -> Generator[Turn, list[Reply], list[str]]:
        """The text of each file, read with ``read_file`` (module docstring), all files at once."""
        self.require("read_file")
        lines: list[list[str]] = [[] for _ in paths]
        pages = [PAGE_LINES for _ in paths]
        pending = list(range(len(paths)))
        while pending:
            calls = [
                Call("read_file", {"path": str(paths[i]), "offset": len(lines[i]) + 1, "limit": pages[i]})
                for i in pending
            ]
            replies = yield said, calls
            said = "Reading on."
            still = []
            for i, reply in zip(pending, replies, strict=True):
                if reply.is_error:
                    raise ModelError(f"read_file {paths[i]}: {reply.content}")
                page, more = _page(reply.content, len(lines[i]) + 1)
                if page is None:  # cut: the same lines again, fewer at a time
                    if pages[i] == 1:
                        raise ModelError(
                            f"{paths[i]}: line {len(lines[i]) + 1} is longer than read_file shows"
                        )
                    pages[i] = max(1, pages[i] // 2)
                    still.append(i)
                    continue
                lines[i] += page
                if more:
                    still.append(i)
            pending = still
        return ["".join(line + "\n" for line in found).removeprefix("\ufeff") for found in lines]

    def server(self, calls: list[Call], said: str) -> Generator[Turn, list[Reply], list[Reply]]:
        """The replies to ``calls``; a call answered ``{status: running}`` is waited for with ``job_wait``."""
        for call in calls:
            self.require(call.name)
        replies = list((yield said, calls))
        pending = {i: job for i, r in enumerate(replies) if (job := _running(r))}
        while pending:
            self.require("job_wait")
            waiting = list(pending)
            polled = yield (
                f"Waiting for {len(waiting)} job(s).",
                [Call("job_wait", {"job_id": pending[i], "wait_s": POLL_S}) for i in waiting],
            )
            for i, reply in zip(waiting, polled, strict=True):
                replies[i] = reply
                if job := _running(reply):
                    pending[i] = job
                else:
                    del pending[i]
        return replies

    def panel_values(self, task: Task) -> Generator[Turn, list[Reply], tuple[dict[str, float | None], str]]:
        """A screen entry's values: ``chem_descriptors`` for a molecular descriptor, else the screen's
        code."""
        name = self.entry.name
        column = entry_column(task, name)
        if column is None:
            raise ModelError(f"no column of targets.csv gives the entry {name!r}")
        request = molecule_request(task, column, name)
        if request is None:
            values = local_values(task, column, name)
            if values is None:
                raise ModelError(
                    f"the screen's code computes no entry {name!r} for this task: the card was made by "
                    "another version of the panel (rebuild it with spu task build)"
                )
            return values, f"the screen's own code (environment.prior_screen) on the column {column!r}"
        arguments, field = request
        cells = column_cells(task, column)
        molecules = list(dict.fromkeys(c for c in cells.values() if c))
        said = f"Computing {field} of {len(molecules)} molecules ({column!r}) with chem_descriptors."
        (reply,) = yield from self.server(
            [Call("chem_descriptors", {"molecules": molecules, **arguments})], said
        )
        if reply.is_error:
            raise ModelError(f"chem_descriptors failed: {reply.content}")
        data = reply.json("chem_descriptors")
        items = data.get("items") or []
        if data.get("items_truncated"):  # the whole table is in the CSV artifact
            (table,) = yield from self.read([Path(data["table_csv"])], "Reading the descriptor table.")
            items = [_csv_item(row, field) for row in csv.DictReader(io.StringIO(table))]
        found: dict[str, float | None] = {}
        for item in items:
            value = (item.get("descriptors") or {}).get(field) if item.get("ok") else None
            found[molecules[int(item["index"])]] = None if value is None else float(value)
        values = {e: settled(found.get(c)) if c else None for e, c in cells.items()}
        source = f"the server's chem_descriptors ({field}, {json.dumps(arguments)}) on the column {column!r}"
        return values, source

    def proxy_values(
        self, task: Task
    ) -> Generator[Turn, list[Reply], tuple[dict[str, float | None], str, list[str]]]:
        """A declared proxy's values: its tool calls per experiment and term, as ``spu baselines`` makes
        them (:mod:`environment.analysis.baselines`), combined as declared."""
        from environment.analysis.baselines import TASK_DIR, combine, fill_template, load_declaration, pick
        from environment.analysis.errors import AnalysisError

        try:
            declared = load_declaration(self.entry.declaration, task)
        except AnalysisError as exc:
            raise ModelError(f"the proxy's declaration: {exc}") from None
        proxy = next((p for p in declared if p["name"] == self.entry.name), None)
        if proxy is None:
            raise ModelError(f"{self.entry.declaration} no longer declares the proxy {self.entry.name!r}")
        terms = proxy["terms"]
        calls, plan = [], []
        task_dir = str(Path(task.root).resolve())
        for gid in proxy["groups"]:
            for row in task.rows_of(gid):
                filled = {TASK_DIR: task_dir, **row}
                for index, term in enumerate(terms):
                    calls.append(Call(term["tool"], fill_template(term["arguments"], filled)))
                    plan.append((row["experiment_id"], index))
        tools = ", ".join(dict.fromkeys(t["tool"] for t in terms))
        said = f"Computing the proxy with {len(calls)} calls of {tools}."
        replies = yield from self.server(calls, said)
        got: dict[str, dict[int, float]] = {}
        errors: list[str] = []
        for (eid, index), reply in zip(plan, replies, strict=True):
            if reply.is_error:
                errors.append(f"{eid}: {reply.content.strip()[:300]}")
                continue
            try:
                value = pick(reply.json(terms[index]["tool"]), terms[index]["value"])
            except KeyError as exc:
                errors.append(f"{eid}: no {terms[index]['value']!r} in the result (missing {exc.args[0]!r})")
                continue
            if isinstance(value, bool) or not isinstance(value, int | float):
                errors.append(f"{eid}: {terms[index]['value']!r} is {value!r}, not a number")
                continue
            got.setdefault(eid, {})[index] = float(value)
        if errors:
            codes = sorted({m.group(1) for e in errors if (m := _CODE.search(e))} or {"error"})
            raise ModelError(
                f"the proxy {self.entry.name!r} failed on {len(errors)} of {len(calls)} calls "
                f"({', '.join(f'[{c}]' for c in codes)}); first: {errors[0]}"
            )
        values: dict[str, float | None] = {}
        for eid, parts in got.items():
            try:
                values[eid] = combine(proxy.get("combine"), [parts[i] for i in range(len(terms))])
            except ZeroDivisionError:
                raise ModelError(
                    f"the proxy {self.entry.name!r}: the ratio's second term is 0 for {eid}"
                ) from None
        how = f", {proxy['combine']} of {len(terms)} terms" if proxy.get("combine") else ""
        source = (
            f"the declared proxy's calls of {tools} through the server ({self.entry.declaration.name}{how})"
        )
        return values, source, list(proxy["groups"])


def _replies(messages: list[dict[str, Any]], ids: list[str]) -> list[Reply]:
    """The results of the calls ``ids`` from the conversation, in the order the calls were made."""
    found = {m.get("tool_call_id"): m for m in messages if m.get("role") == "tool"}
    out = []
    for call_id in ids:
        message = found.get(call_id)
        if message is None:
            out.append(Reply("the agent returned no result for this call", True))
        else:
            out.append(Reply(str(message.get("content") or ""), bool(message.get("is_error"))))
    return out


def _page(content: str, offset: int) -> tuple[list[str] | None, bool]:
    """A ``read_file`` page's lines and whether more follow; None for a page cut in the middle (its lines
    are not numbered on from ``offset`` one by one)."""
    if _CUT in content:
        return None, False
    lines, more = [], False
    for raw in content.split("\n"):
        numbered = _NUMBERED.fullmatch(raw)
        if numbered and int(numbered.group(1)) == offset + len(lines):
            lines.append(numbered.group(2))
        elif _MORE.fullmatch(raw) and not more:
            more = True
        elif raw or lines:
            return None, False
    return lines, more


def _running(reply: Reply) -> str | None:
    """The job id of a ``{status: queued|running, job_id}`` answer, else None."""
    if reply.is_error:
        return None
    try:
        data = json.loads(reply.content)
    except ValueError:
        return None
    if isinstance(data, dict) and data.get("status") in ("queued", "running") and data.get("job_id"):
        return str(data["job_id"])
    return None


def _csv_item(row: dict[str, str], field: str) -> dict[str, Any]:
    """An item of a ``table_csv`` row (``index``, ``ok``, ``descriptors.FIELD`` columns)."""
    text = row.get(f"descriptors.{field}") or ""
    return {
        "index": row["index"],
        "ok": row.get("ok") == "True",
        "descriptors": {field: float(text) if text else None},
    }


def _task(contract: str, targets: str, root: Path) -> Task:
    """The task from its files' text, by the task format's own parsers."""
    from spu_common.task import TaskError, parse_contract, parse_targets

    try:
        fields = parse_contract(json.loads(contract), root.resolve())
        rows, columns, numeric = parse_targets(targets, fields["groups"])
    except (ValueError, TaskError) as exc:
        raise ModelError(f"the task files read do not parse: {exc}") from None
    return Task(**fields, targets=rows, target_columns=columns, numeric_columns=numeric)


def _report(
    task: Task,
    entry: Entry,
    source: str,
    values: dict[str, float | None],
    orders: dict[str, tuple[list[str], bool]],
) -> str:
    figure = (
        "none (the proxy failed when the card was made)"
        if entry.card_score is None
        else f"{entry.card_score:+.6g}"
    )
    tied = [g for g, (_, t) in orders.items() if t]
    lines = [
        f"# Keyless baseline: {entry.name} ({entry.direction})",
        "",
        f"Every group is ranked by **{entry.name}**, {entry.direction}, an entry of the task's card "
        f"(`{entry.card.name}`; `--model baseline:{entry.spelling}`). No language model and no web search "
        "took part: this is a reference point, not a prediction.",
        "",
        f"- values: {source}",
        "- ties: experiments with equal values keep the order the contract presents them in; a group where "
        "an experiment has no value keeps its presented order whole (the screen counts such a group as 0)",
        f"- the card's expected score over random tie-breaks: {figure}; this submission scores it exactly "
        "when no group rests on the tie-break"
        + (
            f" (here {len(tied)} of {len(orders)} groups do: {', '.join(tied)})"
            if tied
            else " (none does here)"
        ),
        "",
        "| group | rank | experiment | value |",
        "|---|---|---|---|",
    ]
    for group in task.groups:
        order, _ = orders[group.group_id]
        for rank, eid in enumerate(order, start=1):
            value = values.get(eid)
            shown = "none" if value is None else f"{value:.10g}"
            lines.append(f"| {group.group_id} | {rank} | {eid} | {shown} |")
    return "\n".join(lines) + "\n"
