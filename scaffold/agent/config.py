"""The agent's configuration: embedded YAML defaults, a user file merged over them, ``-c key=value`` on top.

:class:`AgentConfig` declares every key (``default_config.yaml`` holds the defaults and says what each
means). A key it does not declare is refused with the nearest known key (``-c limits.stpe_limit=40``:
did you mean ``limits.step_limit``?), wherever it came from; values are checked against their types.
The result is a plain nested dict so a config file, a trajectory record and ``-c`` all speak the same
language. ``-c`` values are parsed as YAML (``-c limits.step_limit=40`` gives an int, ``-c
tools.builtin=[bash,python]`` a list, ``-c model.prompt_cache_key=false`` a bool).
"""

from __future__ import annotations

import copy
import difflib
from importlib import resources
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, ValidationError, model_validator

DEFAULT_CONFIG_FILE = "default_config.yaml"


class ConfigError(ValueError):
    """A config file or an override that cannot be used; the message says which and why."""


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Limits(_Section):
    step_limit: int = 150
    wall_time_limit_s: float = 28800
    token_limit: int = 0
    cost_limit_usd: float = 25.0
    draft_reminder_fraction: float = 0.25
    wrapup_reminder_fraction: float = 0.85
    max_nudges: int = 3
    max_format_errors: int = 5


class Retry(_Section):
    max_attempts: int = 8
    backoff_initial_s: float = 2.0
    backoff_max_s: float = 120.0
    retry_after_max_s: float = 600.0


class ModelSection(_Section):
    temperature: float | None = None
    max_output_tokens: int = 16384
    reasoning_effort: str | None = None
    thinking_budget_tokens: int | None = None
    context_window_tokens: int = 128000
    timeout_s: float = 600
    api_key_env: str | None = None
    prompt_cache_key: bool | str | None = "auto"
    anthropic_version: str = "2023-06-01"
    extra_body: dict[str, Any] = {}
    retry: Retry = Retry()


class Price(_Section):
    """USD per million tokens; cache reads and writes cost the input price unless given."""

    input: float = 0.0
    output: float = 0.0
    cache_read: float | None = None
    cache_write: float | None = None

    @model_validator(mode="after")
    def _cache_prices(self) -> Price:
        if self.cache_read is None:
            self.cache_read = self.input
        if self.cache_write is None:
            self.cache_write = self.input
        return self


class McpSection(_Section):
    enabled: bool = True
    required: bool = False
    command: list[str] | str | None = None
    url: str | None = None
    workdir: str | None = None
    call_timeout_s: float = 900
    include: list[str] | None = None
    exclude: list[str] = []
    compact_descriptions: bool | Literal["auto"] = "auto"


class ToolsSection(_Section):
    mcp: McpSection = McpSection()
    builtin: list[str] = ["bash", "python", "read_file", "write_file", "submit_rankings"]
    command_timeout_s: float = 600
    max_output_chars: int = 20000


class ContextSection(_Section):
    trigger_fraction: float = 0.85
    target_fraction: float = 0.6
    keep_recent_turns: int = 6
    chars_per_token: float = 3.5


class PromptsSection(_Section):
    dir: str | None = None


class EnsembleSection(_Section):
    size: int = 1


class AgentConfig(_Section):
    limits: Limits = Limits()
    model: ModelSection = ModelSection()
    prices: dict[str, Price] = {}
    tools: ToolsSection = ToolsSection()
    context: ContextSection = ContextSection()
    prompts: PromptsSection = PromptsSection()
    ensemble: EnsembleSection = EnsembleSection()


def _section_class(annotation: Any) -> type[BaseModel] | None:
    return annotation if isinstance(annotation, type) and issubclass(annotation, BaseModel) else None


def known_keys(model: type[BaseModel] = AgentConfig, prefix: str = "") -> list[str]:
    """Every dotted key the config declares (sections and values)."""
    keys = []
    for name, field in model.model_fields.items():
        keys.append(prefix + name)
        section = _section_class(field.annotation)
        if section is not None:
            keys += known_keys(section, f"{prefix}{name}.")
    return keys


def check_key(parts: list[str], source: str) -> None:
    """Refuse a dotted key the config does not declare, naming the closest one. Keys below an open
    mapping (``prices.<model>``, ``model.extra_body``) are the user's own and pass."""
    model: type[BaseModel] | None = AgentConfig
    for depth, part in enumerate(parts):
        if model is None:  # below a value or an open mapping
            return
        field = model.model_fields.get(part)
        if field is None:
            key = ".".join(parts)
            known = known_keys()
            near = difflib.get_close_matches(key, known, n=1, cutoff=0.6) or difflib.get_close_matches(
                ".".join(parts[: depth + 1]), known, n=1, cutoff=0.6
            )
            hint = f" Did you mean {near[0]}?" if near else ""
            raise ConfigError(
                f"unknown config key {key} ({source}).{hint} Every key is listed in "
                f"scaffold/agent/{DEFAULT_CONFIG_FILE}."
            )
        model = _section_class(field.annotation)


def _check_tree(data: dict[str, Any], source: str, prefix: tuple[str, ...] = ()) -> None:
    for key, value in data.items():
        parts = [*prefix, str(key)]
        check_key(parts, source)
        if isinstance(value, dict) and _declares_section(parts):
            _check_tree(value, source, tuple(parts))


def _declares_section(parts: list[str]) -> bool:
    model: type[BaseModel] | None = AgentConfig
    for part in parts:
        field = model.model_fields.get(part) if model is not None else None
        model = _section_class(field.annotation) if field is not None else None
    return model is not None


def default_config() -> dict[str, Any]:
    text = resources.files("scaffold.agent").joinpath(DEFAULT_CONFIG_FILE).read_text(encoding="utf-8")
    return yaml.safe_load(text)


def merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    """A copy of ``base`` with ``over`` merged in: dicts recursively, everything else replaced."""
    out = copy.deepcopy(base)
    for key, value in over.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def parse_override(text: str) -> tuple[list[str], Any]:
    """``"model.temperature=0.2"`` -> (["model", "temperature"], 0.2)."""
    key, sep, raw = text.partition("=")
    key = key.strip()
    if not sep or not key or any(not part for part in key.split(".")):
        raise ConfigError(f"override {text!r} must look like dotted.key=value")
    try:
        value = yaml.safe_load(raw) if raw.strip() else ""
    except yaml.YAMLError as exc:
        raise ConfigError(f"override {text!r}: the value is not valid YAML ({exc})") from exc
    return key.split("."), value


def set_dotted(config: dict[str, Any], path: list[str], value: Any) -> None:
    node = config
    for part in path[:-1]:
        child = node.get(part)
        if child is None:
            child = node[part] = {}
        if not isinstance(child, dict):
            raise ConfigError(
                f"cannot set {'.'.join(path)}: {part} is a {type(child).__name__}, not a section"
            )
        node = child
    node[path[-1]] = value


def validate_config(config: dict[str, Any]) -> dict[str, Any]:
    """``config`` checked against :class:`AgentConfig`, every key present, as a plain dict."""
    try:
        return AgentConfig.model_validate(config).model_dump()
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc'])}: {err['msg']}" for err in exc.errors()[:5]
        )
        raise ConfigError(f"invalid config: {problems}") from None


def load_config(
    file: str | Path | None = None, overrides: list[str] | tuple[str, ...] = ()
) -> dict[str, Any]:
    """Defaults, then ``file`` (YAML), then each ``key=value`` override in order; unknown keys refused."""
    config = default_config()
    if file is not None:
        path = Path(file)
        try:
            data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
        except OSError as exc:
            raise ConfigError(f"cannot read config file {path}: {exc.strerror}") from exc
        except yaml.YAMLError as exc:
            raise ConfigError(f"config file {path} is not valid YAML: {exc}") from exc
        if not isinstance(data, dict):
            raise ConfigError(f"config file {path} must hold a mapping at the top level")
        _check_tree(data, f"in {path}")
        config = merge(config, data)
    for text in overrides:
        path_parts, value = parse_override(text)
        check_key(path_parts, f"from -c {text}")
        if isinstance(value, dict) and _declares_section(path_parts):
            _check_tree(value, f"from -c {text}", tuple(path_parts))
        set_dotted(config, path_parts, value)
    return validate_config(config)
