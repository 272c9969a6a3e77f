"""The agent's configuration: embedded YAML defaults, a user file merged over them, ``-c key=value`` on top.

Values are plain nested dicts so a config file, a trajectory record and ``-c`` all speak the same
language. ``-c`` values are parsed as YAML (``-c limits.step_limit=40`` gives an int, ``-c
tools.builtin=[bash,python]`` a list, ``-c model.prompt_cache_key=false`` a bool).
"""

from __future__ import annotations

import copy
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

DEFAULT_CONFIG_FILE = "default_config.yaml"


class ConfigError(ValueError):
    """A config file or an override that cannot be used; the message says which and why."""


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


def load_config(
    file: str | Path | None = None, overrides: list[str] | tuple[str, ...] = ()
) -> dict[str, Any]:
    """Defaults, then ``file`` (YAML), then each ``key=value`` override in order."""
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
        config = merge(config, data)
    for text in overrides:
        path_parts, value = parse_override(text)
        set_dotted(config, path_parts, value)
    return config
