"""OpenAI Chat Completions, and every server that speaks it (vLLM, llama.cpp, OpenRouter, DeepSeek ...).

``base_url`` selects the server (``https://api.openai.com/v1`` by default); the key comes from
``OPENAI_API_KEY`` (or ``model.api_key_env``). Servers that return ``reasoning_content`` (DeepSeek, vLLM
reasoning parsers) have it kept in the trajectory but not sent back: most compatible servers reject
unknown message fields, and the ones that read it back document it as optional.
"""

from __future__ import annotations

import json
from typing import Any

from scaffold.agent.models.base import HttpModel, ModelTurn, ToolDef, Usage, parse_arguments


class OpenAIChatModel(HttpModel):
    provider = "openai"
    response_shape = '{"choices": [{"message": {"content", "tool_calls"}}]}'
    default_base_url = "https://api.openai.com/v1"
    api_key_env = "OPENAI_API_KEY"

    def headers(self) -> dict[str, str]:
        key = self.api_key()
        return {"authorization": f"Bearer {key}"} if key else {}

    def build_request(
        self, messages: list[dict[str, Any]], tools: list[ToolDef]
    ) -> tuple[str, dict[str, Any]]:
        # Key order puts what never changes first; ``messages`` only grows, so each request's bytes
        # start with the previous request's (what prefix caches key on).
        body: dict[str, Any] = {"model": self.model}
        if tools:
            body["tools"] = [
                {
                    "type": "function",
                    "function": {"name": t.name, "description": t.description, "parameters": t.parameters},
                }
                for t in tools
            ]
        cfg = self.config
        body[self._max_tokens_field()] = cfg.max_output_tokens
        if cfg.temperature is not None:
            body["temperature"] = cfg.temperature
        if cfg.reasoning_effort:
            body["reasoning_effort"] = cfg.reasoning_effort
        if self.cache_key:
            body["prompt_cache_key"] = self.cache_key
        body["messages"] = [to_chat_message(m) for m in messages]
        return "/chat/completions", body

    def _max_tokens_field(self) -> str:
        # OpenAI's reasoning models refuse max_tokens; most other servers know only max_tokens.
        return "max_completion_tokens" if "api.openai.com" in self.base_url else "max_tokens"

    def parse_response(self, data: dict[str, Any]) -> ModelTurn:
        choice = data["choices"][0]
        msg = choice.get("message") or {}
        calls = []
        for i, call in enumerate(msg.get("tool_calls") or []):
            fn = call.get("function") or {}
            raw = fn.get("arguments")
            args, error = parse_arguments(raw)
            calls.append(
                {
                    "id": call.get("id") or f"call_{i}",
                    "name": fn.get("name") or "",
                    "arguments": args,
                    "arguments_raw": raw if isinstance(raw, str) else _dumps(raw),
                    "error": error,
                }
            )
        message: dict[str, Any] = {
            "role": "assistant",
            "content": msg.get("content") or "",
            "tool_calls": calls,
        }
        reasoning = msg.get("reasoning_content") or msg.get("reasoning")
        if reasoning:
            message["reasoning"] = reasoning
        usage = data.get("usage") or {}
        cached = ((usage.get("prompt_tokens_details") or {}).get("cached_tokens")) or 0
        details = usage.get("completion_tokens_details") or {}
        return ModelTurn(
            message=message,
            usage=Usage(
                input_tokens=max(0, int(usage.get("prompt_tokens") or 0) - int(cached)),
                output_tokens=int(usage.get("completion_tokens") or 0),
                cache_read_tokens=int(cached),
                reasoning_tokens=int(details.get("reasoning_tokens") or 0),
            ),
            stop_reason=choice.get("finish_reason"),
        )


def to_chat_message(m: dict[str, Any]) -> dict[str, Any]:
    role = m["role"]
    if role == "tool":
        return {"role": "tool", "tool_call_id": m["tool_call_id"], "content": m["content"]}
    if role == "assistant":
        out: dict[str, Any] = {"role": "assistant", "content": m.get("content") or None}
        if m.get("tool_calls"):
            out["tool_calls"] = [
                {
                    "id": c["id"],
                    "type": "function",
                    "function": {
                        "name": c["name"],
                        "arguments": c.get("arguments_raw") or _dumps(c.get("arguments")),
                    },
                }
                for c in m["tool_calls"]
            ]
        elif out["content"] is None:
            out["content"] = ""
        return out
    return {"role": role, "content": m["content"]}


def _dumps(value: Any) -> str:
    return json.dumps(value if value is not None else {}, ensure_ascii=False)
