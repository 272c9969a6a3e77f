"""Model adapters. ``make_model("PROVIDER:MODEL", config)`` picks one; all share ``query(messages,
tools)``."""

from __future__ import annotations

from typing import Any

from scaffold.agent.models.base import ModelError, ModelTurn, ToolDef, Usage

PROVIDERS = ("openai", "openai-responses", "anthropic", "replay")

__all__ = ["PROVIDERS", "ModelError", "ModelTurn", "ToolDef", "Usage", "make_model", "split_model_spec"]


def split_model_spec(spec: str) -> tuple[str, str]:
    provider, sep, model = spec.partition(":")
    if not sep or not model or provider not in PROVIDERS:
        raise ValueError(
            f"--model must be PROVIDER:MODEL with PROVIDER one of {', '.join(PROVIDERS)}; got {spec!r}"
        )
    return provider, model


def make_model(
    spec: str,
    config: dict[str, Any],
    *,
    base_url: str | None = None,
    cache_key: str | None = None,
    paths: dict[str, str] | None = None,
) -> Any:
    """An adapter for ``spec``; ``config`` is the ``model`` section of the agent config. ``paths``
    (TASK_DIR, OUT_DIR, WORK_DIR) are substituted into a replayed recording's tool arguments."""
    provider, name = split_model_spec(spec)
    if provider == "replay":
        from scaffold.agent.models.replay import ReplayModel

        return ReplayModel(name, substitutions=paths)
    if provider == "openai":
        from scaffold.agent.models.openai_chat import OpenAIChatModel as cls
    elif provider == "openai-responses":
        from scaffold.agent.models.openai_responses import OpenAIResponsesModel as cls
    else:
        from scaffold.agent.models.anthropic import AnthropicModel as cls
    return cls(name, config, base_url=base_url, cache_key=cache_key)
