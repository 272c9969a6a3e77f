"""Keeping the conversation inside the model's context window.

When the next request would pass ``trigger_fraction`` of the window, the outputs of older tool calls
are replaced by a one-line note, oldest first, until the estimate falls to ``target_fraction`` (the gap
means this happens rarely, so prompt caches survive between elisions). Never elided: the system prompt,
the task message, reminders, the model's own messages (its reasoning and every draft it submitted),
``submit_rankings`` results, and the tool outputs of the last ``keep_recent_turns`` model turns.

Tokens are estimated from characters; once the provider has reported the real prompt size, the ratio
is calibrated from it.
"""

from __future__ import annotations

import json
from typing import Any

from scaffold.agent.config import ContextSection

KEEP_TOOLS = frozenset({"submit_rankings"})


def request_chars(messages: list[dict[str, Any]], tools: list[Any]) -> int:
    size = sum(len(m.get("content") or "") for m in messages)
    for m in messages:
        for call in m.get("tool_calls") or []:
            size += len(call.get("arguments_raw") or "") + len(call.get("name") or "")
        if m.get("reasoning"):
            size += len(m["reasoning"])
    size += sum(len(t.name) + len(t.description) + len(json.dumps(t.parameters)) for t in tools)
    return size


class ContextWindow:
    def __init__(self, config: ContextSection, window_tokens: int) -> None:
        self.window_tokens = window_tokens
        self.trigger_fraction = config.trigger_fraction
        self.target_fraction = config.target_fraction
        self.keep_recent_turns = config.keep_recent_turns
        self.chars_per_token = config.chars_per_token
        self.elided_total = 0

    def calibrate(self, chars: int, prompt_tokens: int) -> None:
        """Learn characters per token from a request of ``chars`` characters that cost ``prompt_tokens``."""
        if prompt_tokens > 100 and chars > 0:
            self.chars_per_token = chars / prompt_tokens

    def estimate_tokens(self, messages: list[dict[str, Any]], tools: list[Any]) -> int:
        return int(request_chars(messages, tools) / self.chars_per_token)

    def fit(self, messages: list[dict[str, Any]], tools: list[Any], *, overflowed: bool = False) -> int:
        """Elide old tool outputs in place if needed; return how many were elided.

        ``overflowed``: the provider refused the last request as too long, so the estimate was wrong; the
        ratio is tightened and at least one output is elided.
        """
        if overflowed:
            self.chars_per_token *= 0.8
        estimate = self.estimate_tokens(messages, tools)
        if not overflowed and estimate <= self.trigger_fraction * self.window_tokens:
            return 0
        target_chars = self.target_fraction * self.window_tokens * self.chars_per_token
        excess = request_chars(messages, tools) - target_chars
        elided = 0
        candidates = self._elidable(messages, self.keep_recent_turns)
        if overflowed and not candidates:
            candidates = self._elidable(messages, 1)  # the window is tiny: give up the recent-turn margin
        for index in candidates:
            if excess <= 0 and (elided or not overflowed):
                break
            message = messages[index]
            before = len(message["content"])
            message["content"] = (
                f"[elided to fit the context window: the {before}-character output of {message.get('name')} "
                "was removed; call the tool again if you need it]"
            )
            message["elided"] = True
            excess -= before - len(message["content"])
            elided += 1
        self.elided_total += elided
        return elided

    @staticmethod
    def _elidable(messages: list[dict[str, Any]], keep_recent_turns: int) -> list[int]:
        """Indices of tool outputs older than the last ``keep_recent_turns`` model turns, oldest first."""
        turns = [i for i, m in enumerate(messages) if m["role"] == "assistant"]
        if keep_recent_turns <= 0:
            boundary = len(messages)
        elif keep_recent_turns > len(turns):
            boundary = 0
        else:
            boundary = turns[-keep_recent_turns]
        return [
            i
            for i, m in enumerate(messages[:boundary])
            if m["role"] == "tool"
            and not m.get("elided")
            and m.get("name") not in KEEP_TOOLS
            and len(m["content"]) > 200
        ]
