"""A task's card: what the benchmark claims about one task, generated, never written by hand.

``spu task build`` writes ``OUT/card.json`` beside ``OUT/answers.json`` (never inside ``OUT/task/``: it names
the members' keys and the screen's findings). It holds the groups and their members, the chance threshold
(``exact`` or ``sampled``), power (with one run, and the runs that reach 80%), the presented order's score
and whether ``--allow-presented-order`` let it through, the trivial-descriptor screen's best entries with
its family-wise verdict and p-value, the spec's design and selection record, the design's prior rate
(``--design-screen N``), and the proxies declared in ``OUT/baselines.json`` with their scores (measured by
``spu baselines``, which writes them into the card), each with ``tool_solvable`` and its family-wise
``p_value`` (the panel's standard), and, where there is one, the recall risk (:func:`recall_risk`: names of
public records the task shows). A rebuild keeps the design screen and the proxies' scores of the card it
replaces while what they were measured on is unchanged (the design's digest; the declaration's and the
answers' bytes). Every number is printed at ``SIGNIFICANT_DIGITS`` (:func:`printed`).
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from environment.taskbuild.problems import SpecProblem
from environment.taskbuild.render import Rendered
from environment.taskbuild.spec import Spec

SCHEMA = "spu.card/1"
CARD_FILE = "card.json"
DECLARATION_FILE = "baselines.json"
#: Screen entries kept in a card, best first.
TOP_ENTRIES = 5
#: Significant digits of every number a card prints (and so of the READMEs generated from cards).
SIGNIFICANT_DIGITS = 6


@dataclass
class Assessment:
    """A rendered task measured: the loaded task and answers, its chance figures and its screen."""

    task: Any
    answers: Any
    chance: dict[str, Any]
    screen: dict[str, Any]


def assess(rendered: Rendered) -> Assessment:
    """Chance, power and the screen of a task built in memory (default draws and seeds)."""
    from environment.chance import chance_threshold
    from environment.prior_screen import screen, task_from_files

    task, answers = task_from_files(rendered.files, rendered.answers)
    chance = chance_threshold(task, answers)
    return Assessment(task, answers, chance, screen(task, answers, chance["chance_threshold"]))


def presented_order_problem(assessment: Assessment) -> SpecProblem | None:
    """The builder's refusal: the presented order, or its reverse, is above the chance threshold."""
    chance = assessment.chance
    presented = chance["presented_order_score"]
    for label, score, above in (
        ("presented order", presented, chance["presented_order_above_chance"]),
        ("reversed presented order", -presented, chance["reversed_presented_order_above_chance"]),
    ):
        if above:
            return SpecProblem(
                "presented-order",
                "spec.yaml",
                f"the {label} scores {score:+.3f}, above the chance threshold "
                f"{chance['chance_threshold']:.3f} ({chance['chance_method']}): submitting it unchanged "
                "beats random ranking",
                field="task_version",
                hint="raise task_version to draw another order, or pass --allow-presented-order "
                "(recorded in the card) for a deliberate choice",
            )
    return None


def proxies_digest(declaration: Path, answers: bytes) -> str | None:
    """A hash of a proxy declaration and the answers its scores were measured on (None: no declaration)."""
    if not declaration.is_file():
        return None
    return hashlib.sha256(declaration.read_bytes() + b"\0" + answers).hexdigest()


def _declared(declaration: Path) -> list[dict[str, Any]]:
    try:
        data = json.loads(declaration.read_text(encoding="utf-8"))
        proxies = data["proxies"]
    except (OSError, ValueError, KeyError, TypeError):
        return []  # spu baselines reports a broken declaration; the card only lists readable ones
    out = []
    for proxy in proxies if isinstance(proxies, list) else []:
        if isinstance(proxy, dict):
            terms = proxy.get("terms") or [proxy]
            tools = [t.get("tool") for t in terms if isinstance(t, dict)]
            out.append(
                {
                    "name": proxy.get("name"),
                    "tool": "+".join(dict.fromkeys(str(t) for t in tools)),
                    "direction": proxy.get("direction"),
                    "groups": proxy.get("groups"),
                    "score": None,
                    "reversed_score": None,
                    "above_chance": None,
                    "reversed_above_chance": None,
                    "tool_solvable": None,
                    "p_value": None,
                    "p_interval": None,
                    "values": None,
                    "error": None,
                }
            )
    return out


def _error_summary(errors: list[str] | None) -> str | None:
    """The errors of a failed proxy as their codes and count (``weights_missing on 11 experiments``): the
    full messages name paths of the machine that ran them, which a committed card must not."""
    if not errors:
        return None
    codes = sorted({m.group(1) for e in errors if (m := re.search(r"\[([a-z_]+)\]", e))} or {"error"})
    return f"{', '.join(codes)} on {len(errors)} experiment{'s' if len(errors) != 1 else ''}"


def with_proxy_scores(
    card: dict[str, Any], measured: list[dict[str, Any]], digest: str | None
) -> dict[str, Any]:
    """The card with the proxies' scores ``spu baselines`` measured (its ``proxies`` result entries): score,
    reverse, chance, the panel's standard (``tool_solvable``, ``p_value``, ``p_interval``,
    ``best_panel_score``) and each experiment's ``values`` (by built id, as the tool returned them), so the
    score and the verdict can be recomputed from the card."""
    keys = ("score", "reversed_score", "above_chance", "reversed_above_chance")
    keys += ("tool_solvable", "p_value", "p_interval", "best_panel_score")
    by_name = {m["name"]: m for m in measured}
    proxies = []
    for proxy in card["proxies"]:
        found = by_name.get(proxy["name"], {})
        values = {e: v for g in found.get("groups") or [] for e, v in (g.get("values") or {}).items()}
        proxies.append(
            {
                **proxy,
                **{k: found.get(k) for k in keys},
                "values": values if found.get("score") is not None else None,
                "error": _error_summary(found.get("errors")),
            }
        )
    return {**card, "proxies": proxies, "proxies_digest": digest}


def recall_risk(rendered: Rendered, assessment: Assessment) -> dict[str, Any] | None:
    """Whether the agent-visible text names public records: the keys or source identifiers by which the
    source data set names the task's experiments that the task shows among its conditions (a variant in the
    protein's published numbering). A model may recall those records' values; the contamination audit's
    blinding, with these names masked, measures how much it does (docs/contamination.md). None: none shown."""
    from environment.leakscan.marks import task_marks

    shown = task_marks(json.loads(rendered.answers), assessment.task).shown
    if not shown:
        return None
    return {
        "names_shown": len(shown),
        "examples": shown[:TOP_ENTRIES],
        "why": "the task shows the source data set's own names of its experiments among their conditions: "
        "a model may recall the published values by them",
        "audit": "spu contamination audit of the predictions against the published values, and spu "
        "contamination blind with these names masked (--mask NAME; docs/contamination.md)",
    }


def _entry(entry: dict[str, Any]) -> dict[str, Any]:
    return {k: entry[k] for k in ("name", "direction", "expected_score", "above_chance")}


def make_card(
    spec: Spec,
    rendered: Rendered,
    assessment: Assessment,
    *,
    allow_presented_order: bool,
    out_dir: Path,
    design_screen: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The card of a build into ``out_dir`` (module docstring); an existing card there lends its design
    screen and proxies' scores when they still apply."""
    previous = read_card(out_dir / CARD_FILE) or {}
    chance = assessment.chance
    proxies, proxies_hash = _carried_proxies(previous, out_dir / DECLARATION_FILE, rendered.answers)
    risk = recall_risk(rendered, assessment)
    return {
        "schema": SCHEMA,
        "task_id": spec.task_id,
        "task_version": spec.task_version,
        "title": spec.title,
        "domain": spec.domain,
        "experiments": len(rendered.id_map),
        "groups": _groups(rendered, chance),
        "chance": _chance(chance),
        "power": _power(chance),
        "presented_order": _presented_order(chance, allow_presented_order),
        "screen": _screen(assessment.screen),
        "design": spec.design.to_dict() if spec.design is not None else None,
        "selection": spec.selection,
        "design_screen": design_screen or _carried_design_screen(spec, previous),
        "proxies": proxies,
        "proxies_digest": proxies_hash,
        **({"recall_risk": risk} if risk else {}),
        "built_by": "spu task build",
    }


def _carried_design_screen(spec: Spec, previous: dict[str, Any]) -> dict[str, Any] | None:
    """The previous card's design screen while the design and its pool are unchanged."""
    from environment.taskbuild.design import design_digest

    if spec.design is None:
        return None
    kept = previous.get("design_screen") or {}
    return kept if kept.get("digest") == design_digest(spec.design, spec.rows, spec.task_id) else None


def _carried_proxies(
    previous: dict[str, Any], declaration: Path, answers: bytes
) -> tuple[list[dict[str, Any]], str | None]:
    """The declared proxies, with the previous card's scores while the declaration and the answers are
    unchanged (and that digest; None when nothing measured is carried)."""
    digest = proxies_digest(declaration, answers)
    if digest is None:
        return [], None
    if previous.get("proxies_digest") == digest:
        return previous.get("proxies", _declared(declaration)), digest
    return _declared(declaration), None


def _groups(rendered: Rendered, chance: dict[str, Any]) -> list[dict[str, Any]]:
    contract = json.loads(rendered.files["contract.json"])
    return [
        {
            "group_id": built["group_id"],
            "spec_group": rendered.group_map[built["group_id"]],
            "endpoint": built["endpoint"],
            "unit": built.get("unit", ""),
            "weight": built["weight"],
            "n": len(built["experiment_ids"]),
            "members": {e: rendered.id_map[e] for e in built["experiment_ids"]},
            "chance_threshold": stat["chance_threshold"],
        }
        for built, stat in zip(contract["groups"], chance["groups"], strict=True)
    ]


def _chance(chance: dict[str, Any]) -> dict[str, Any]:
    """The threshold and its method; the sampled threshold only where it is the threshold (with its
    sampling interval): beside an exact one it is noise."""
    out = {"threshold": chance["chance_threshold"], "method": chance["chance_method"]}
    if chance["chance_method"] == "sampled":
        out["sampled_interval"] = chance["sampled_threshold_interval"]
    out |= {"draws": chance["draws"], "seed": chance["seed"]}
    return {**out, "attainable_max": chance["attainable_max"]}


def _power(chance: dict[str, Any]) -> dict[str, Any]:
    return {
        "runs": chance["power_runs"],
        "effect": chance["power_effect"],
        "power": chance["power"],
        "power_single_run": chance["power_single_run"],
        "runs_for_80pct_power": chance["runs_for_80pct_power"],
        "effect_for_80pct_power": chance["effect_for_80pct_power"],
        "mean_threshold": chance["power_threshold"],
        "method": chance["power_method"],
    }


def _presented_order(chance: dict[str, Any], allow_presented_order: bool) -> dict[str, Any]:
    above = chance["presented_order_above_chance"] or chance["reversed_presented_order_above_chance"]
    return {
        "score": chance["presented_order_score"],
        "above_chance": chance["presented_order_above_chance"],
        "reversed_above_chance": chance["reversed_presented_order_above_chance"],
        "allowed": bool(allow_presented_order and above),
    }


def _screen(screened: dict[str, Any]) -> dict[str, Any]:
    return {
        "verdict": screened["prior_verdict"],
        "p_value": screened["prior_p_value"],
        "p_interval": screened["prior_p_interval"],
        "draws": screened["prior_draws"],
        "seed": screened["prior_seed"],
        "entries": screened["panel_entries"],
        "distinct_entries": screened["distinct_entries"],
        "best": [_entry(e) for e in screened["entries"][:TOP_ENTRIES]],
        "notes": screened["notes"],
    }


def read_card(path: Path) -> dict[str, Any] | None:
    """The card at ``path``, or None when there is none (or it is not a card of this schema)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) and data.get("schema") == SCHEMA else None


def printed(value: Any, digits: int = SIGNIFICANT_DIGITS) -> Any:
    """``value`` with every float rounded to ``digits`` significant digits (recursively), as a card is
    written: a figure that differs in its last bits between machines (the order of a floating-point sum,
    another BLAS) prints the same. Idempotent; non-finite floats and other values are unchanged."""
    if isinstance(value, float):
        return float(f"{value:.{digits}g}") if math.isfinite(value) else value
    if isinstance(value, dict):
        return {k: printed(v, digits) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [printed(v, digits) for v in value]
    return value


def dump_card(card: dict[str, Any]) -> bytes:
    """The card's bytes: indented UTF-8 JSON, every float at ``SIGNIFICANT_DIGITS`` (:func:`printed`)."""
    return (json.dumps(printed(card), indent=2, ensure_ascii=False) + "\n").encode("utf-8")
