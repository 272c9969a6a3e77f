"""Anthropic Messages API.

Thinking blocks (with their signatures) and redacted thinking come back in ``raw`` and are passed back
verbatim, which the API requires when thinking is on and tools are used. Prompt caching uses four
``cache_control`` breakpoints: the last tool, the system prompt, the previous request's last message and
the newest message, so each request reads the cache the previous one wrote. The key comes from
``ANTHROPIC_API_KEY``.
"""

from __future__ import annotations

import json
from typing import Any

from scaffold.agent.models.base import HttpModel, ModelTurn, ToolDef, Usage

#: thinking budget in tokens for a reasoning_effort name (extended thinking needs a number)
EFFORT_BUDGET_TOKENS = {"minimal": 1024, "low": 4096, "medium": 10000, "high": 24000, "xhigh": 48000}
_CACHE = {"type": "ephemeral"}


class AnthropicModel(HttpModel):
    provider = "anthropic"
    response_shape = '{"content": [blocks], "stop_reason"}'
    default_base_url = "https://api.anthropic.com"
    api_key_env = "ANTHROPIC_API_KEY"

    def headers(self) -> dict[str, str]:
        out = {"anthropic-version": self.config.anthropic_version}
        key = self.api_key()
        if key:
            out["x-api-key"] = key
        return out

    def thinking_budget(self) -> int | None:
        if self.config.thinking_budget_tokens:  # 0 or null: none asked for by number
            return self.config.thinking_budget_tokens
        effort = self.config.reasoning_effort
        return EFFORT_BUDGET_TOKENS.get(effort) if effort else None

    def build_request(
        self, messages: list[dict[str, Any]], tools: list[ToolDef]
    ) -> tuple[str, dict[str, Any]]:
        cfg = self.config
        body: dict[str, Any] = {"model": self.model}
        if tools:
            body["tools"] = [
                {"name": t.name, "description": t.description, "input_schema": t.parameters} for t in tools
            ]
            body["tools"][-1]["cache_control"] = _CACHE
        system = [{"type": "text", "text": m["content"]} for m in messages if m["role"] == "system"]
        if system:
            system[-1]["cache_control"] = _CACHE
            body["system"] = system
        max_tokens = cfg.max_output_tokens
        budget = self.thinking_budget()
        if budget:
            body["thinking"] = {"type": "enabled", "budget_tokens": budget}
            max_tokens = max(max_tokens, budget + 4096)
        elif cfg.temperature is not None:
            body["temperature"] = cfg.temperature  # the API refuses a temperature together with thinking
        body["max_tokens"] = max_tokens
        body["messages"] = to_anthropic_messages(messages)
        return "/v1/messages", body

    def parse_response(self, data: dict[str, Any]) -> ModelTurn:
        content = data["content"]
        texts, calls, thinking = [], [], []
        for block in content:
            kind = block.get("type")
            if kind == "text":
                texts.append(block.get("text") or "")
            elif kind == "tool_use":
                args = block.get("input")
                ok = isinstance(args, dict)
                calls.append(
                    {
                        "id": block.get("id") or f"toolu_{len(calls)}",
                        "name": block.get("name") or "",
                        "arguments": args if ok else None,
                        "arguments_raw": json.dumps(args, ensure_ascii=False),
                        "error": None if ok else "the tool input must be a JSON object",
                    }
                )
            elif kind == "thinking":
                thinking.append(block.get("thinking") or "")
        message: dict[str, Any] = {
            "role": "assistant",
            "content": "\n".join(texts),
            "tool_calls": calls,
            "raw": content,
        }
        if thinking:
            message["reasoning"] = "\n".join(thinking)
        usage = data.get("usage") or {}
        return ModelTurn(
            message=message,
            usage=Usage(
                input_tokens=int(usage.get("input_tokens") or 0),
                output_tokens=int(usage.get("output_tokens") or 0),
                cache_read_tokens=int(usage.get("cache_read_input_tokens") or 0),
                cache_write_tokens=int(usage.get("cache_creation_input_tokens") or 0),
            ),
            stop_reason=data.get("stop_reason"),
        )


def to_anthropic_messages(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Neutral messages -> alternating user/assistant messages of content blocks, with cache breakpoints."""
    out: list[dict[str, Any]] = []
    for m in messages:
        role = m["role"]
        if role == "system":
            continue
        if role == "assistant":
            blocks = _assistant_blocks(m)
            out.append({"role": "assistant", "content": blocks})
            continue
        if role == "tool":
            block: dict[str, Any] = {
                "type": "tool_result",
                "tool_use_id": m["tool_call_id"],
                "content": m["content"],
            }
            if m.get("is_error"):
                block["is_error"] = True
        else:
            block = {"type": "text", "text": m["content"] or "(empty)"}
        if out and out[-1]["role"] == "user":
            out[-1]["content"].append(block)
        else:
            out.append({"role": "user", "content": [block]})
    # Breakpoints: the newest message, and the last message of the previous request (two user messages
    # back), where the previous request's cache entry ends.
    users = [i for i, msg in enumerate(out) if msg["role"] == "user"]
    for index in users[-2:]:
        last = dict(out[index]["content"][-1])
        last["cache_control"] = _CACHE
        out[index] = {"role": "user", "content": [*out[index]["content"][:-1], last]}
    return out


def _assistant_blocks(m: dict[str, Any]) -> list[dict[str, Any]]:
    if m.get("raw") and m.get("provider") == AnthropicModel.provider:
        return list(m["raw"])
    blocks: list[dict[str, Any]] = []
    if m.get("content"):
        blocks.append({"type": "text", "text": m["content"]})
    for c in m.get("tool_calls") or []:
        blocks.append(
            {"type": "tool_use", "id": c["id"], "name": c["name"], "input": c.get("arguments") or {}}
        )
    return blocks or [{"type": "text", "text": "(no output)"}]
