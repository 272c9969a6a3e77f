"""``spu baselines --write-readme``: the suite README's tables, and each task README's, from the cards.

A README keeps its prose; only blocks between ``<!-- generated: NAME (spu baselines --write-readme) -->``
and ``<!-- end generated: NAME -->`` are rewritten. The suite README (``TASK_DIR/README.md``) has the blocks
``baselines`` (one row per task and a summary) and ``proxies``; a task's README (beside its answers) has
``measured``. Every figure comes from the task's ``card.json`` (:mod:`environment.taskbuild.card`).
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path
from typing import Any

from environment.analysis.errors import AnalysisError
from spu_common.jsonfiles import atomic_write_text


def _begin(name: str) -> str:
    return f"<!-- generated: {name} (spu baselines --write-readme) -->"


def _end(name: str) -> str:
    return f"<!-- end generated: {name} -->"


def replace_block(text: str, name: str, content: str, where: Path) -> str:
    """``text`` with the generated block ``name`` holding ``content``; a README without it is an error."""
    pattern = re.compile(re.escape(_begin(name)) + r".*?" + re.escape(_end(name)), re.DOTALL)
    if not pattern.search(text):
        raise AnalysisError(
            "readme_block_missing",
            f"{where} has no generated block {name!r}",
            f"Add the lines {_begin(name)} and {_end(name)} where the table belongs.",
        )
    return pattern.sub(lambda _: f"{_begin(name)}\n{content.rstrip()}\n{_end(name)}", text, count=1)


def _chance(card: dict[str, Any]) -> str:
    return f"{card['chance']['threshold']:.3f} ({card['chance']['method']})"


def _best(card: dict[str, Any]) -> str:
    best = card["screen"]["best"]
    if not best:
        return "nothing to screen"
    first = best[0]
    if abs(first["expected_score"]) < 1e-12:
        return f"all {card['screen']['entries']} entries tie within every group: +0.000"
    return f"{first['name']}, {first['direction']}: {first['expected_score']:+.3f}"


def _p_value(card: dict[str, Any]) -> str:
    screen = card["screen"]
    if screen["p_value"] is None:
        return "-"
    low, high = screen["p_interval"]
    return f"{screen['p_value']:.3f} [{low:.3f}, {high:.3f}]"


def _verdict(card: dict[str, Any]) -> str:
    verdict = card["screen"]["verdict"]
    return {"prior-solvable": "**prior-solvable**", "undecided": "**undecided**"}.get(verdict, "no")


def _presented(card: dict[str, Any]) -> str:
    order = card["presented_order"]
    text = f"{order['score']:+.3f}"
    if order["above_chance"] or order["reversed_above_chance"]:
        which = "presented order" if order["above_chance"] else "its reverse"
        text += f" (**{which} above chance**" + (", allowed by override)" if order["allowed"] else ")")
    return text


def _design(card: dict[str, Any]) -> str:
    screened = card.get("design_screen")
    if not screened or screened.get("prior_rate") is None:
        return "-"
    drawn = screened["draws"] - screened["failed_draws"]
    return f"{screened['prior_rate']:.0%} of {drawn} draws (shuffled {screened['shuffled_prior_rate']:.0%})"


def _selection(card: dict[str, Any]) -> str:
    selection = card.get("selection")
    if not selection:
        return "-"
    return f"{selection['kept']} kept of {selection['tried']} tried"


def _power(card: dict[str, Any]) -> str:
    power = card["power"]
    return f"{power['power']:.2f}"


def _single_run(card: dict[str, Any]) -> str:
    """The power of one run; "-" on a card written before it was measured."""
    single = card["power"].get("power_single_run")
    return "-" if single is None else f"{single:.2f}"


def _runs_needed(card: dict[str, Any]) -> str:
    if "runs_for_80pct_power" not in card["power"]:
        return "-"  # a card written before it was measured
    needed = card["power"]["runs_for_80pct_power"]
    return str(needed) if needed is not None else "more than 50"


def _best_proxy(card: dict[str, Any]) -> tuple[str, str, str]:
    """(proxy and direction, its score, above chance) of the card's best measured proxy."""
    proxies = card.get("proxies") or []
    if not proxies:
        return "none applies (no proxy declared beside the answers)", "", ""
    scored = [p for p in proxies if p.get("score") is not None]
    if not scored:
        proxy = proxies[0]
        reason = f"failed: {proxy['error']}" if proxy.get("error") else "not measured"
        return f"{proxy['name']}, {proxy['direction']}", reason, ""
    proxy = max(scored, key=lambda p: p["score"])
    above = "yes" if proxy["above_chance"] else ("reversed" if proxy["reversed_above_chance"] else "no")
    return f"{proxy['name']}, {proxy['direction']}", f"{proxy['score']:+.3f}", above


def _best_score(card: dict[str, Any]) -> str:
    best = card["screen"]["best"]
    return f"{best[0]['expected_score']:+.3f}" if best else "-"


def _tool_solvable(card: dict[str, Any]) -> str:
    """Whether the card's best measured proxy solves the task by the panel's standard, with its p-value."""
    scored = [p for p in card.get("proxies") or [] if p.get("score") is not None]
    if not scored:
        return ""
    proxy = max(scored, key=lambda p: p["score"])
    if proxy.get("p_value") is None:
        return "not judged"
    low, high = proxy["p_interval"]
    verdict = "**yes**" if proxy["tool_solvable"] else "no"
    return f"{verdict} ({proxy['p_value']:.3f} [{low:.3f}, {high:.3f}])"


def suite_blocks(cards: list[dict[str, Any]]) -> dict[str, str]:
    """The suite README's generated blocks from the cards (sorted by task id)."""
    cards = sorted(cards, key=lambda c: c["task_id"])
    head = (
        "| id | groups (experiments) | chance threshold | power | power, one run | runs for 80% | 80% power "
        "from | best trivial descriptor (expected score) | family-wise p [interval] | prior-solvable | "
        "presented order | design prior rate | selection |\n" + "|---" * 13 + "|"
    )
    rows = [
        f"| `{c['task_id']}` | {len(c['groups'])} ({c['experiments']}) | {_chance(c)} | {_power(c)} | "
        f"{_single_run(c)} | {_runs_needed(c)} | "
        f"{c['power']['effect_for_80pct_power']:+.3f} | {_best(c)} | {_p_value(c)} | {_verdict(c)} | "
        f"{_presented(c)} | {_design(c)} | {_selection(c)} |"
        for c in cards
    ]
    verdicts = Counter(c["screen"]["verdict"] for c in cards)
    by_domain = Counter(c["domain"] for c in cards)
    solvable_by_domain = Counter(c["domain"] for c in cards if c["screen"]["verdict"] == "prior-solvable")
    powered = sum(c["power"]["power"] >= 0.8 for c in cards)
    leaks = [
        c["task_id"]
        for c in cards
        if c["presented_order"]["above_chance"] or c["presented_order"]["reversed_above_chance"]
    ]
    runs, effect = (cards[0]["power"]["runs"], cards[0]["power"]["effect"]) if cards else (5, 0.3)
    summary = (
        f"Today {verdicts['prior-solvable']} of the {len(cards)} tasks are prior-solvable under the "
        f"family-wise test ({verdicts['undecided']} undecided). Per field: "
        + ", ".join(f"{d} {by_domain[d]} ({solvable_by_domain[d]} prior-solvable)" for d in sorted(by_domain))
        + f". {powered} of {len(cards)} tasks have 80% power for a method of expected score {effect:g} "
        f"over {runs} runs."
        + (
            f" Presented order or its reverse above chance: {', '.join(f'`{t}`' for t in leaks)}."
            if leaks
            else " No presented order, nor its reverse, is above chance."
        )
    )
    proxy_head = (
        "| id | best declared physics or model proxy, direction | expected score | chance threshold | "
        "above chance | best trivial descriptor | tool-solvable (family-wise p) |\n" + "|---" * 7 + "|"
    )
    proxy_rows = []
    for c in cards:
        name, score, above = _best_proxy(c)
        proxy_rows.append(
            f"| `{c['task_id']}` | {name} | {score} | {c['chance']['threshold']:.3f} | {above} | "
            f"{_best_score(c)} | {_tool_solvable(c)} |"
        )
    tool_solvable = [
        c["task_id"] for c in cards if any(p.get("tool_solvable") for p in c.get("proxies") or [])
    ]
    proxy_summary = (
        f"{len(tool_solvable)} of the {len(cards)} tasks are tool-solvable: a declared proxy, run through "
        "the server, scores above chance and above the best trivial descriptor, with a family-wise p below "
        "0.05 (the panel with the proxies as more entries)"
        + (f": {', '.join(f'`{t}`' for t in tool_solvable)}." if tool_solvable else ".")
    )
    return {
        "baselines": "\n".join([head, *rows, "", summary]),
        "proxies": "\n".join([proxy_head, *proxy_rows, "", proxy_summary]),
    }


def task_block(card: dict[str, Any]) -> str:
    """A task README's generated ``measured`` table from its card."""
    chance, power, screen = card["chance"], card["power"], card["screen"]
    threshold = _chance(card)
    if "sampled_interval" in chance:  # a sample of random submissions: with its sampling interval
        low, high = chance["sampled_interval"]
        threshold += f" from {chance['draws']:,} seeded draws, 95% interval [{low:.3f}, {high:.3f}]"
    name, score, above = _best_proxy(card)
    proxy = name if not score else f"{name}: {score}" + (f" (above chance: {above})" if above else "")
    rows = [
        ("chance threshold (95th percentile of random submissions)", threshold),
        ("attainable maximum", f"{chance['attainable_max']:.3f}"),
        (
            f"power: mean of {power['runs']} runs of a method with expected score {power['effect']:g} "
            "above chance",
            f"{power['power']:.2f} (80% power from {power['effect_for_80pct_power']:+.3f})",
        ),
        ("power of one run of that method", _single_run(card)),
        ("runs whose mean has 80% power for that method", _runs_needed(card)),
        ("best trivial descriptor (expected score over tie-breaks)", _best(card)),
        (
            f"family-wise screen: p over {screen['draws']:,} shuffles [99.9% interval], "
            f"{screen['distinct_entries']} distinct of {screen['entries']} entries",
            _p_value(card),
        ),
        (
            "prior-solvable (family-wise p below 0.05)",
            {"prior-solvable": "**yes**", "undecided": "**undecided**"}.get(screen["verdict"], "no"),
        ),
        ("presented order", _presented(card)),
        ("design prior rate (`--design-screen`)", _design(card)),
        ("selection", f"{_selection(card)}: {card['selection']['rule']}" if card.get("selection") else "-"),
        ("best declared physics or model proxy", proxy),
        (
            "tool-solvable: above chance and the best trivial descriptor, family-wise p",
            _tool_solvable(card) or "-",
        ),
    ]
    return "\n".join(["| measure | value |", "|---|---|", *(f"| {k} | {v} |" for k, v in rows)])


def write_readmes(suite_readme: Path | None, task_readmes: list[tuple[Path, dict[str, Any]]]) -> list[Path]:
    """Rewrite the generated blocks; every README is checked before any is written. Returns those written."""
    new: dict[Path, str] = {}
    for path, card in task_readmes:
        new[path] = replace_block(_read(path, ["measured"]), "measured", task_block(card), path)
    if suite_readme is not None:
        blocks = suite_blocks([card for _, card in task_readmes])
        text = _read(suite_readme, list(blocks))
        for name, content in blocks.items():
            text = replace_block(text, name, content, suite_readme)
        new[suite_readme] = text
    for path, text in new.items():
        atomic_write_text(path, text)
    return list(new)


def check_readmes(suite_readme: Path | None, task_folders: list[Path]) -> None:
    """Before anything is computed: every task folder (the folder of its answers) holds its card and a
    README with the block ``measured``, and the suite README holds the suite's blocks; else the
    :class:`AnalysisError` :func:`write_readmes` would raise at the end, with what to do."""
    from environment.taskbuild.card import CARD_FILE, read_card

    cards = []
    for folder in task_folders:
        card = read_card(folder / CARD_FILE)
        if card is None:
            raise AnalysisError(
                "card_missing",
                f"{folder / CARD_FILE} does not exist",
                f"Build the task with spu task build SPEC -o {folder} to write its card.",
            )
        cards.append(card)
        replace_block(_read(folder / "README.md", ["measured"]), "measured", "", folder / "README.md")
    if suite_readme is not None:
        names = list(suite_blocks(cards))
        text = _read(suite_readme, names)
        for name in names:
            replace_block(text, name, "", suite_readme)


def _read(path: Path, blocks: list[str]) -> str:
    """A README's text; a missing one names the generated ``blocks`` it must hold."""
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        lines = "; ".join(f"{_begin(name)} then {_end(name)}" for name in blocks)
        raise AnalysisError(
            "readme_missing",
            f"{path} does not exist (a task fresh from spu task build has no README)",
            f"Create it with the lines of its generated blocks where the tables belong: {lines}.",
        ) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise AnalysisError("readme_unreadable", f"{path}: {getattr(exc, 'strerror', None) or exc}") from None
