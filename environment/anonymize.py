"""Turn a task built with readable experiment ids into one with random ids and a random presented order.

The builder writes a task whose experiment ids say what they are (``benzoic_4no2``) and answers keyed by
those ids; :func:`anonymize_task` writes a copy with short random hexadecimal ids (starting with a
letter, so no reader takes them for numbers), each group's experiments shuffled in ``contract.json`` and
``targets.csv``, input files named after an id renamed, and whole-token occurrences of old ids in text
files replaced. The answers are rewritten to the new ids and carry the mapping (``id_map``: new id to old
id), so the grader and the builder can trace every value; the mapping never enters the task directory.
Choose readable ids that are not ordinary words, since text files are rewritten token by token.
"""

from __future__ import annotations

import csv
import io
import json
import random
import re
import secrets
import shutil
from pathlib import Path
from typing import Any

from spu_common.jsonfiles import load_json_strict
from spu_common.task import TASK_FILES, TaskError, check_answers, load_answers, load_task

_HEX = "0123456789abcdef"


def new_ids(old_ids: list[str], rng: random.Random) -> dict[str, str]:
    length = 4 if len(old_ids) <= 2000 else 6
    taken = set(old_ids)
    mapping: dict[str, str] = {}
    for old in old_ids:
        while True:
            candidate = rng.choice("abcdef") + "".join(rng.choice(_HEX) for _ in range(length - 1))
            if candidate not in taken:
                break
        taken.add(candidate)
        mapping[old] = candidate
    return mapping


def _token_pattern(ids: list[str]) -> re.Pattern[str]:
    alternatives = "|".join(re.escape(i) for i in sorted(ids, key=len, reverse=True))
    return re.compile(rf"(?<![\w-])(?:{alternatives})(?![\w-])")


def mapping_path(destination: str | Path, answers: str | Path | None, answers_out: str | Path | None) -> Path:
    """Where the id mapping goes: ``answers_out``, else ``answers.json`` (with answers) or ``id_map.json``
    (without) beside ``destination``."""
    if answers_out is not None:
        return Path(answers_out)
    return Path(destination).parent / ("answers.json" if answers is not None else "id_map.json")


def anonymize_task(
    source: str | Path,
    destination: str | Path,
    *,
    answers: str | Path | None = None,
    answers_out: str | Path | None = None,
    seed: int | None = None,
    rewrite_text: bool = True,
) -> dict[str, Any]:
    """Write the anonymized copy of ``source`` to ``destination`` (which must not exist yet).

    ``answers``/``answers_out``: the readable answers and where to write the anonymized ones (default:
    ``answers.json`` beside ``destination``). Without answers, the mapping goes to ``id_map.json`` beside
    ``destination``. ``seed`` makes ids and order reproducible. Returns a summary with the mapping.
    """
    src = Path(source)
    dst = Path(destination)
    task = load_task(src)
    if dst.exists() and (not dst.is_dir() or any(dst.iterdir())):
        raise TaskError(f"{dst} already exists; choose a new directory for the anonymized task")
    if dst.resolve().is_relative_to(src.resolve()):
        raise TaskError("the anonymized task cannot be written inside the source task")
    rng = random.Random(seed if seed is not None else secrets.randbits(64))
    old_ids = list(dict.fromkeys(e for g in task.groups for e in g.experiment_ids))
    mapping = new_ids(old_ids, rng)
    readable_answers = None
    if answers is not None:
        readable_answers = load_answers(answers)
        check_answers(task, readable_answers)
        answers_target = mapping_path(dst, answers, answers_out)
        if answers_target.exists() and answers_target.resolve() == Path(answers).resolve():
            raise TaskError(
                f"{answers_target} would overwrite the readable answers; give another answers_out"
            )

    shutil.copytree(src, dst, dirs_exist_ok=True)
    pattern = _token_pattern(old_ids)
    _rename_inputs(dst, pattern, mapping)
    shuffled = _write_contract(src, dst, mapping, rng)
    _write_targets(src, dst, task, mapping, shuffled)
    replaced = _rewrite_text(dst, pattern, mapping) if rewrite_text else {}
    reverse = {new: old for old, new in mapping.items()}
    if readable_answers is not None:
        map_path = _write_answers(readable_answers, mapping, reverse, answers_target)
    else:
        map_path = mapping_path(dst, answers, answers_out)
        map_path.write_text(
            json.dumps({"task_id": task.task_id, "id_map": reverse}, indent=2) + "\n", encoding="utf-8"
        )
    load_task(dst)
    return {
        "task_dir": str(dst),
        "mapping_file": str(map_path),
        "id_map": reverse,
        "text_replacements": replaced,
    }


def _rename_inputs(dst: Path, pattern: re.Pattern[str], mapping: dict[str, str]) -> None:
    """Input files named after an experiment id take the new id (deepest paths first)."""
    for path in sorted(dst.rglob("*"), key=lambda p: len(p.parts), reverse=True):
        if path.is_file() and path.relative_to(dst).as_posix() not in TASK_FILES:
            new_name = pattern.sub(lambda m: mapping[m.group(0)], path.name)
            if new_name != path.name:
                path.rename(path.with_name(new_name))


def _write_contract(
    src: Path, dst: Path, mapping: dict[str, str], rng: random.Random
) -> dict[str, list[str]]:
    """The contract with new ids in a new shuffled order; returns that order per group."""
    contract = load_json_strict(src / "contract.json")
    shuffled: dict[str, list[str]] = {}
    for raw in contract["groups"]:
        ids = [mapping[str(e)] for e in raw["experiment_ids"]]
        rng.shuffle(ids)
        raw["experiment_ids"] = ids
        shuffled[str(raw["group_id"])] = ids
    (dst / "contract.json").write_text(
        json.dumps(contract, indent=2, ensure_ascii=False) + "\n", encoding="utf-8"
    )
    return shuffled


def _write_targets(
    src: Path, dst: Path, task: Any, mapping: dict[str, str], shuffled: dict[str, list[str]]
) -> None:
    reader = csv.DictReader(io.StringIO((src / "targets.csv").read_text(encoding="utf-8-sig")))
    columns = list(reader.fieldnames or [])
    rows = {(row["group_id"].strip(), mapping[row["experiment_id"].strip()]): row for row in reader}
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=columns, lineterminator="\n")
    writer.writeheader()
    for group in task.groups:
        for new_id in shuffled[group.group_id]:
            row = dict(rows[(group.group_id, new_id)])
            row["experiment_id"] = new_id
            writer.writerow(row)
    (dst / "targets.csv").write_text(out.getvalue(), encoding="utf-8")


def _rewrite_text(dst: Path, pattern: re.Pattern[str], mapping: dict[str, str]) -> dict[str, int]:
    """Old ids in the text files become new ids; returns the replacements per file."""
    replaced: dict[str, int] = {}
    for path in sorted(dst.rglob("*")):
        name = path.relative_to(dst).as_posix()
        if not path.is_file() or name in ("contract.json", "targets.csv"):
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
        new_text, count = pattern.subn(lambda m: mapping[m.group(0)], text)
        if count:
            path.write_text(new_text, encoding="utf-8")
            replaced[name] = count
    return replaced


def _write_answers(readable: Any, mapping: dict[str, str], reverse: dict[str, str], target: Path) -> Path:
    data = readable.model_dump()
    for group in data["groups"]:
        group["values"] = {mapping[e]: v for e, v in group["values"].items()}
        group["sources"] = {mapping.get(e, e): s for e, s in group.get("sources", {}).items()}
    data["id_map"] = reverse
    target.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return target
