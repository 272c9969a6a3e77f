"""Model adapters, one per wire format, found by name in :data:`PROVIDERS`.

``--model PROVIDER:MODEL`` names an entry of :data:`PROVIDERS` (``openai:gpt-4.1``) or, for an adapter
of your own, an import path ``package.module:Class`` followed by ``:MODEL``
(``my_models.local:MyModel:my-model``). Every adapter satisfies :class:`Model`; ``make_model`` builds one.
"""

from __future__ import annotations

import importlib
import inspect
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:  # base imports httpx; the registry stays light for `spu --help`
    from pathlib import Path

    from scaffold.agent.config import ModelSection
    from scaffold.agent.models.base import ModelTurn, ToolDef

#: provider name -> the adapter class that speaks its wire format (``module:Class``). The one list:
#: the CLI's help, the errors, the docs and Harbor's agent are checked against it.
PROVIDERS: dict[str, str] = {
    "openai": "scaffold.agent.models.openai_chat:OpenAIChatModel",
    "openai-responses": "scaffold.agent.models.openai_responses:OpenAIResponsesModel",
    "anthropic": "scaffold.agent.models.anthropic:AnthropicModel",
    "replay": "scaffold.agent.models.replay:ReplayModel",
    "baseline": "scaffold.agent.models.baseline:BaselineModel",
}

#: variables holding model API keys (each adapter's ``api_key_env`` and the OpenAI-compatible services
#: reached through ``openai:``): removed from the environment of everything the model drives (bash,
#: python, the MCP server). A test checks every registered adapter's variable is here.
MODEL_KEY_ENV = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "OPENROUTER_API_KEY", "DEEPSEEK_API_KEY")

__all__ = [
    "MODEL_KEY_ENV",
    "PROVIDERS",
    "Model",
    "ModelSpec",
    "adapter_class",
    "check_model",
    "make_model",
    "provider_names",
]


@runtime_checkable
class Model(Protocol):
    """What the loop needs of a model adapter."""

    provider: str

    @property
    def name(self) -> str: ...

    @classmethod
    def from_spec(
        cls,
        model: str,
        config: ModelSection,
        *,
        base_url: str | None = None,
        cache_key: str | None = None,
        paths: dict[str, str] | None = None,
    ) -> Model:
        """The adapter for ``model``; ``config`` is the ``model`` section of the validated agent config
        (:class:`~scaffold.agent.config.ModelSection`: ``config.max_output_tokens`` ...); ``paths``
        (TASK_DIR, OUT_DIR, WORK_DIR) are this run's folders."""
        ...

    def query(self, messages: list[dict[str, Any]], tools: list[ToolDef]) -> ModelTurn: ...

    def close(self) -> None: ...


def provider_names() -> str:
    """``openai, openai-responses, anthropic, replay, baseline`` (for help texts and errors)."""
    return ", ".join(PROVIDERS)


@dataclass(frozen=True)
class ModelSpec:
    """``PROVIDER:MODEL`` parsed: ``provider`` is a key of :data:`PROVIDERS` or ``module:Class``."""

    provider: str
    model: str

    @classmethod
    def parse(cls, spec: str) -> ModelSpec:
        head, sep, rest = spec.partition(":")
        if head not in PROVIDERS and ":" in rest:  # an import path: module.path:Class:MODEL
            cls_name, sep, rest = rest.partition(":")
            head = f"{head}:{cls_name}" if cls_name else ""
        if not sep or not rest or not head or (head not in PROVIDERS and ":" not in head):
            raise ValueError(
                f"--model must be PROVIDER:MODEL with PROVIDER one of {provider_names()} "
                f"(or an import path module:Class); got {spec!r}"
            )
        return cls(head, rest)

    def __str__(self) -> str:
        return f"{self.provider}:{self.model}"


def adapter_class(provider: str) -> type[Model]:
    """The class for a provider name or an import path ``module:Class``."""
    target = PROVIDERS.get(provider, provider)
    module_name, _, class_name = target.partition(":")
    try:
        found = getattr(importlib.import_module(module_name), class_name)
    except (ImportError, AttributeError) as exc:
        raise ValueError(f"model provider {provider!r}: cannot import {target} ({exc})") from None
    if not callable(getattr(found, "from_spec", None)) or not callable(getattr(found, "query", None)):
        raise ValueError(
            f"model provider {provider!r}: {target} is not a model adapter (it needs from_spec() and "
            "query(); see scaffold.agent.models.Model)"
        )
    return found


def check_model(
    spec: ModelSpec,
    config: ModelSection,
    *,
    base_url: str | None,
    task_id: str,
    task_dir: Path | None = None,
) -> None:
    """Raise ``ValueError`` (one line: what cannot work and what to do) when ``spec`` cannot run task
    ``task_id`` in ``task_dir``: called by ``spu agent run`` and ``spu batch`` before any run starts.
    ``config`` is the ``model`` section of the agent config. An adapter says what it needs through an
    optional classmethod ``preflight(model, config, *, base_url, task_id) -> str | None`` (the problem, or
    None); one that also takes ``task_dir`` gets the task directory (the ``baseline`` model reads the
    task's card beside it). A ``base_url`` that is not an http(s) URL with a host is refused for every
    model."""
    if base_url is not None:
        from spu_common.endpoints import base_url_problem

        if (problem := base_url_problem(base_url)) is not None:
            raise ValueError(f"--base-url {base_url!r}: {problem}")
    preflight = getattr(adapter_class(spec.provider), "preflight", None)
    if not callable(preflight):
        return
    where = {"task_dir": task_dir} if "task_dir" in inspect.signature(preflight).parameters else {}
    problem = preflight(spec.model, config, base_url=base_url, task_id=task_id, **where)
    if problem:
        raise ValueError(f"--model {spec}: {problem}")


def make_model(
    spec: str | ModelSpec,
    config: ModelSection,
    *,
    base_url: str | None = None,
    cache_key: str | None = None,
    paths: dict[str, str] | None = None,
) -> Model:
    """An adapter for ``spec``; ``config`` is the ``model`` section of the agent config. ``paths``
    (TASK_DIR, OUT_DIR, WORK_DIR) are substituted into a replayed recording's tool arguments."""
    parsed = spec if isinstance(spec, ModelSpec) else ModelSpec.parse(spec)
    return adapter_class(parsed.provider).from_spec(
        parsed.model, config, base_url=base_url, cache_key=cache_key, paths=paths
    )
