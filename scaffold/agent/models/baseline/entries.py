"""What ``baseline:ENTRY`` ranks by: an entry of the task's card, found before the run starts.

The card is ``card.json`` beside the task directory (``TASK/../card.json``, where ``spu task build`` writes
it, beside ``answers.json``). ``ENTRY`` names one of its entries as the card does:

* ``best``: the card's best screen entry (the first of ``screen.best``), in its direction;
* ``NAME DIRECTION``: a screen entry the card lists, as ``spu baselines`` prints it
  (``smiles: Crippen logP ascending``); ``NAME`` alone when the card lists it in one direction only. The
  reverse of a listed entry is accepted too: its expected score is the listed one negated;
* ``proxy:NAME``: a tool proxy the card declares (its ``proxies``, declared in ``baselines.json`` beside
  the card), in its declared direction; ``proxy`` alone when the card declares exactly one.

Anything else is an :class:`EntryError` naming the entries the card has.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

DIRECTIONS = ("ascending", "descending")
PROXY_PREFIX = "proxy:"


class EntryError(ValueError):
    """``ENTRY`` names nothing the task's card has (or there is no card); the message lists what it has."""


@dataclass(frozen=True)
class Entry:
    """One resolved entry: a screen entry (``kind`` ``panel``) or a declared proxy (``proxy``).

    ``card_score`` is the card's expected score over random tie-breaks for this entry in this direction
    (None where the card has none: a proxy that failed when the card was made).
    """

    spelling: str
    kind: str
    name: str
    direction: str
    card_score: float | None
    card: Path

    @property
    def declaration(self) -> Path:
        """``baselines.json`` beside the card: the declared proxies' tools, arguments and values."""
        from environment.analysis.baselines import DECLARATION_FILE

        return self.card.parent / DECLARATION_FILE


def card_path(task_dir: Path) -> Path:
    """Where the card of the task in ``task_dir`` is: beside the task directory."""
    from environment.taskbuild.card import CARD_FILE

    return Path(task_dir).absolute().parent / CARD_FILE


def resolve_entry(spelling: str, task_dir: Path) -> Entry:
    """The entry ``spelling`` names on the card of the task in ``task_dir`` (module docstring)."""
    from environment.taskbuild.card import read_card

    path = card_path(task_dir)
    card = read_card(path)
    if card is None:
        raise EntryError(
            f"baseline:{spelling} ranks by an entry of the task's card, and there is no card at {path} "
            "(spu task build writes card.json beside the task directory)"
        )
    listed = [e for e in (card.get("screen") or {}).get("best") or [] if isinstance(e, dict)]
    proxies = [p for p in card.get("proxies") or [] if isinstance(p, dict)]
    text = spelling.strip()
    if text == "best":
        if not listed:
            raise EntryError(f"the card {path} lists no screen entry, so there is no best entry")
        return _panel(spelling, listed[0]["name"], listed[0]["direction"], listed, path)
    if text == "proxy" or text.startswith(PROXY_PREFIX):
        return _proxy(spelling, text.removeprefix("proxy").removeprefix(":").strip(), proxies, listed, path)
    names = {e["name"] for e in listed}
    name, direction = text, None
    head, _, tail = text.rpartition(" ")
    if text not in names and tail in DIRECTIONS and head:
        name, direction = head, tail
    found = [e for e in listed if e["name"] == name]
    if not found:
        raise EntryError(f"the card {path} lists no entry {name!r}; {_offer(listed, proxies)}")
    if direction is None:
        if len({e["direction"] for e in found}) > 1:
            raise EntryError(
                f"the card {path} lists {name!r} in both directions: say {name + ' ascending'!r} or "
                f"{name + ' descending'!r}"
            )
        direction = found[0]["direction"]
    return _panel(spelling, name, direction, listed, path)


def _panel(spelling: str, name: str, direction: str, listed: list[dict[str, Any]], path: Path) -> Entry:
    same = [e for e in listed if e["name"] == name and e["direction"] == direction]
    if same:
        score = float(same[0]["expected_score"])
    else:  # the reverse of a listed entry: the expectation is linear in the submitted ranks
        score = -float(next(e for e in listed if e["name"] == name)["expected_score"])
    return Entry(spelling, "panel", name, direction, score, path)


def _proxy(
    spelling: str, name: str, proxies: list[dict[str, Any]], listed: list[dict[str, Any]], path: Path
) -> Entry:
    if not proxies:
        raise EntryError(f"the card {path} declares no tool proxy; {_offer(listed, proxies)}")
    if not name:
        if len(proxies) > 1:
            raise EntryError(f"the card {path} declares {len(proxies)} proxies: {_offer([], proxies)}")
        found = proxies[0]
    else:
        matches = [p for p in proxies if p.get("name") == name]
        if not matches:
            raise EntryError(f"the card {path} declares no proxy {name!r}; {_offer(listed, proxies)}")
        found = matches[0]
    direction = found.get("direction")
    if direction not in DIRECTIONS:
        raise EntryError(f"the card {path} gives proxy {found.get('name')!r} no direction")
    score = found.get("score")
    return Entry(
        spelling, "proxy", str(found["name"]), direction, None if score is None else float(score), path
    )


def _offer(listed: list[dict[str, Any]], proxies: list[dict[str, Any]]) -> str:
    """The spellings the card offers, for an error message."""
    spellings = [f"{e['name']} {e['direction']}" for e in listed]
    spellings += [f"{PROXY_PREFIX}{p.get('name')}" for p in proxies]
    best = f"best (= {spellings[0]!r}), " if listed else ""
    return "it has: " + best + ", ".join(repr(s) for s in spellings) if spellings else "it has none"
