"""What the builder reports: spec problems (the build stops) and author warnings (the build goes on)."""

from __future__ import annotations

from dataclasses import dataclass

from spu_common.task import TaskError

SPEC_FILE = "spec.yaml"


@dataclass
class SpecProblem:
    """One problem of a spec: where it is (file, CSV line, field), what is wrong, how to fix it."""

    code: str
    file: str
    message: str
    row: int | None = None
    field: str | None = None
    hint: str = ""

    def __str__(self) -> str:
        where = self.file
        if self.row is not None:
            where += f" line {self.row}"
        if self.field:
            where += f", field {self.field!r}"
        text = f"{where}: {self.message} [{self.code}]"
        return text + (f" (hint: {self.hint})" if self.hint else "")


class SpecError(TaskError):
    """A spec that cannot be built; ``problems`` lists every problem found."""

    def __init__(self, problems: list[SpecProblem]):
        self.problems = list(problems)
        super().__init__("\n".join(str(p) for p in self.problems))


def spec_error(code: str, file: str, message: str, **kw) -> SpecError:
    """A :class:`SpecError` holding one problem."""
    return SpecError([SpecProblem(code, file, message, **kw)])


class Problems(list):
    """The problems found so far while reading a spec; ``add`` records one (``spec.yaml`` by default)."""

    def add(self, code: str, message: str, *, file: str = SPEC_FILE, **kw) -> None:
        self.append(SpecProblem(code, file, message, **kw))


@dataclass
class AuthorWarning:
    """Something an author should look at in a task that builds (it does not stop the build)."""

    code: str
    message: str
    group: str | None = None  # the author's group id
    built_group: str | None = None  # the group id in the built task

    def __str__(self) -> str:
        where = ""
        if self.group is not None:
            where = f"group {self.group!r}" + (f" (built as {self.built_group})" if self.built_group else "")
            where += ": "
        return f"[{self.code}] {where}{self.message}"
