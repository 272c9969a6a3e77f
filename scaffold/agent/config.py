"""The agent's configuration: embedded YAML defaults, a user file merged over them, ``-c key=value`` on top.

:class:`AgentConfig` declares every key with its type and bounds; ``default_config.yaml`` holds every
default (the one place they live) and says what each means. A key the model does not declare is refused
with the nearest known key (``-c limits.stpe_limit=40``: did you mean ``limits.step_limit``?), wherever it
came from; values are checked against their types and bounds (an explicit ``0`` means "none" where the
YAML says so, and is refused where it would make no sense, never silently replaced by a default).
:func:`load_config` returns the validated :class:`AgentConfig`, which travels to every use site;
``model_dump()`` gives the plain dict a trajectory records. ``-c`` values are parsed as YAML (``-c
limits.step_limit=40`` gives an int, ``-c tools.builtin=[bash,python]`` a list, ``-c
model.prompt_cache_key=false`` a bool).
"""

from __future__ import annotations

import copy
import difflib
from importlib import resources
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from spu_common.yamlfiles import YamlRefused, loads_yaml_strict

DEFAULT_CONFIG_FILE = "default_config.yaml"


class ConfigError(ValueError):
    """A config file or an override that cannot be used; the message says which and why."""


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid")


Share = Annotated[float, Field(ge=0)]  # of a budget; above 1: never reached
PositiveInt = Annotated[int, Field(gt=0)]
PositiveFloat = Annotated[float, Field(gt=0)]
Count = Annotated[int, Field(ge=0)]  # a limit: 0 = none
Amount = Annotated[float, Field(ge=0)]  # a limit: 0 = none


class Limits(_Section):
    step_limit: Count
    wall_time_limit_s: Amount
    token_limit: Count
    cost_limit_usd: Amount
    draft_reminder_fraction: Share
    wrapup_reminder_fraction: Share
    max_nudges: Count
    max_format_errors: Count


class Retry(_Section):
    max_attempts: PositiveInt
    backoff_initial_s: Amount
    backoff_max_s: Amount
    retry_after_max_s: Amount


class ModelSection(_Section):
    temperature: float | None
    max_output_tokens: PositiveInt
    reasoning_effort: str | None
    thinking_budget_tokens: Count | None  # 0 or null: no extended thinking
    context_window_tokens: PositiveInt
    timeout_s: PositiveFloat
    api_key_env: str | None
    prompt_cache_key: bool | str | None
    anthropic_version: str
    extra_body: dict[str, Any]
    retry: Retry


class Price(_Section):
    """USD per million tokens; cache reads and writes cost the input price unless given."""

    input: float = Field(0.0, ge=0)
    output: float = Field(0.0, ge=0)
    cache_read: float | None = Field(None, ge=0)
    cache_write: float | None = Field(None, ge=0)

    @model_validator(mode="after")
    def _cache_prices(self) -> Price:
        if self.cache_read is None:
            self.cache_read = self.input
        if self.cache_write is None:
            self.cache_write = self.input
        return self


class McpSection(_Section):
    enabled: bool
    required: bool
    command: list[str] | str | None
    url: str | None
    workdir: str | None
    call_timeout_s: PositiveFloat
    include: list[str] | None
    exclude: list[str]
    compact_descriptions: bool | Literal["auto"]


class ToolsSection(_Section):
    mcp: McpSection
    builtin: list[str]
    command_timeout_s: PositiveFloat
    max_output_chars: PositiveInt


class ContextSection(_Section):
    trigger_fraction: Annotated[float, Field(gt=0, le=1)]
    target_fraction: Annotated[float, Field(gt=0, le=1)]
    keep_recent_turns: Count
    chars_per_token: PositiveFloat


class PromptsSection(_Section):
    dir: str | None


class EnsembleSection(_Section):
    size: PositiveInt


class AgentConfig(_Section):
    """The whole configuration. Every field is required here: its default is in ``default_config.yaml``
    (:func:`load_config` starts from it), so no default is written twice."""

    limits: Limits
    model: ModelSection
    prices: dict[str, Price]
    tools: ToolsSection
    context: ContextSection
    prompts: PromptsSection
    ensemble: EnsembleSection


def _section_class(annotation: Any) -> type[BaseModel] | None:
    section = isinstance(annotation, type) and issubclass(annotation, _Section) and annotation is not Price
    return annotation if section else None


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


def validate_config(config: dict[str, Any]) -> AgentConfig:
    """``config`` (the defaults merged with the user's keys) checked against :class:`AgentConfig`."""
    try:
        return AgentConfig.model_validate(config)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc'])}: {err['msg']}" for err in exc.errors()[:5]
        )
        raise ConfigError(f"invalid config: {problems}") from None


def load_config(file: str | Path | None = None, overrides: list[str] | tuple[str, ...] = ()) -> AgentConfig:
    """Defaults, then ``file`` (YAML), then each ``key=value`` override in order; unknown keys refused."""
    config = default_config()
    if file is not None:
        path = Path(file)
        try:
            data = loads_yaml_strict(path.read_text(encoding="utf-8")) or {}
        except OSError as exc:
            raise ConfigError(f"cannot read config file {path}: {exc.strerror}") from exc
        except UnicodeDecodeError as exc:
            raise ConfigError(f"config file {path} is not UTF-8 text (byte offset {exc.start})") from exc
        except (yaml.YAMLError, YamlRefused) as exc:
            raise ConfigError(f"config file {path} is not valid YAML: {' '.join(str(exc).split())}") from exc
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
