"""OpenAI Responses API, stateless (``store: false``): every request carries the whole conversation.

Reasoning items come back encrypted (``include: ["reasoning.encrypted_content"]``) and are passed back
verbatim with the rest of the model's output items, which reasoning models need to keep their chain of
thought across tool calls. The system prompt goes in ``instructions``.
"""

from __future__ import annotations

import json
from typing import Any

from scaffold.agent.models.base import ModelTurn, ToolDef, Usage, parse_arguments
from scaffold.agent.models.openai_chat import OpenAIChatModel


class OpenAIResponsesModel(OpenAIChatModel):
    """Same endpoint family and key as Chat Completions; its own request and response shapes."""

    provider = "openai-responses"
    response_shape = '{"output": [items]}'

    def build_request(
        self, messages: list[dict[str, Any]], tools: list[ToolDef]
    ) -> tuple[str, dict[str, Any]]:
        cfg = self.config
        system = "\n\n".join(m["content"] for m in messages if m["role"] == "system")
        body: dict[str, Any] = {"model": self.model}
        if system:
            body["instructions"] = system
        if tools:
            body["tools"] = [
                {
                    "type": "function",
                    "name": t.name,
                    "description": t.description,
                    "parameters": t.parameters,
                    "strict": False,
                }
                for t in tools
            ]
        body["max_output_tokens"] = cfg.max_output_tokens
        if cfg.temperature is not None:
            body["temperature"] = cfg.temperature
        if cfg.reasoning_effort:
            body["reasoning"] = {"effort": cfg.reasoning_effort}
        body["store"] = False
        body["include"] = ["reasoning.encrypted_content"]
        if self.cache_key:
            body["prompt_cache_key"] = self.cache_key
        items: list[dict[str, Any]] = []
        for m in messages:
            if m["role"] != "system":
                items.extend(to_input_items(m))
        body["input"] = items
        return "/responses", body

    def parse_response(self, data: dict[str, Any]) -> ModelTurn:
        output = data.get("output")
        if not isinstance(output, list):
            raise TypeError("no output list in the response")
        texts: list[str] = []
        calls: list[dict[str, Any]] = []
        reasoning: list[str] = []
        for item in output:
            kind = item.get("type")
            if kind == "message":
                for part in item.get("content") or []:
                    if part.get("type") in ("output_text", "text"):
                        texts.append(part.get("text") or "")
                    elif part.get("type") == "refusal":
                        texts.append(part.get("refusal") or "")
            elif kind == "function_call":
                raw = item.get("arguments")
                args, error = parse_arguments(raw)
                calls.append(
                    {
                        "id": item.get("call_id") or item.get("id") or f"call_{len(calls)}",
                        "name": item.get("name") or "",
                        "arguments": args,
                        "arguments_raw": raw if isinstance(raw, str) else json.dumps(raw),
                        "error": error,
                    }
                )
            elif kind == "reasoning":
                for part in item.get("summary") or []:
                    if part.get("text"):
                        reasoning.append(part["text"])
        message: dict[str, Any] = {
            "role": "assistant",
            "content": "\n".join(texts),
            "tool_calls": calls,
            "raw": output,
        }
        if reasoning:
            message["reasoning"] = "\n".join(reasoning)
        usage = data.get("usage") or {}
        cached = int((usage.get("input_tokens_details") or {}).get("cached_tokens") or 0)
        stop = data.get("status")
        if stop == "incomplete":
            stop = (data.get("incomplete_details") or {}).get("reason") or "incomplete"
        return ModelTurn(
            message=message,
            usage=Usage(
                input_tokens=max(0, int(usage.get("input_tokens") or 0) - cached),
                output_tokens=int(usage.get("output_tokens") or 0),
                cache_read_tokens=cached,
                reasoning_tokens=int((usage.get("output_tokens_details") or {}).get("reasoning_tokens") or 0),
            ),
            stop_reason=stop,
        )


def to_input_items(m: dict[str, Any]) -> list[dict[str, Any]]:
    role = m["role"]
    if role == "tool":
        return [{"type": "function_call_output", "call_id": m["tool_call_id"], "output": m["content"]}]
    if role == "assistant":
        if m.get("raw") is not None and m.get("provider") == OpenAIResponsesModel.provider:
            return list(m["raw"])  # verbatim: reasoning items keep their encrypted content and ids
        items: list[dict[str, Any]] = []
        if m.get("content"):
            items.append({"role": "assistant", "content": m["content"]})
        for c in m.get("tool_calls") or []:
            items.append(
                {
                    "type": "function_call",
                    "call_id": c["id"],
                    "name": c["name"],
                    "arguments": c.get("arguments_raw") or json.dumps(c.get("arguments") or {}),
                }
            )
        return items
    return [{"role": role, "content": m["content"]}]
