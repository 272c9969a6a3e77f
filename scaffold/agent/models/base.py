"""What every model adapter shares: the turn it returns, usage, the error classes, and HTTP with retries.

The loop speaks one neutral message format; each adapter translates it to its wire format:

* ``{"role": "system" | "user", "content": str}``
* ``{"role": "assistant", "content": str, "tool_calls": [ToolCall dicts], "raw": provider items}``
  where ``raw`` holds the provider's own output (reasoning items, thinking blocks with signatures) so it
  can be passed back verbatim; a tool call is ``{"id", "name", "arguments": dict | None,
  "arguments_raw": str, "error": str | None}`` (``error`` set when the arguments were not a JSON object)
* ``{"role": "tool", "tool_call_id", "name", "content": str, "is_error": bool}``

Errors are classified once, here: :class:`ContextOverflow`, :class:`AuthError` and :class:`QuotaError`
are never retried; 408/409/429/5xx/529, timeouts and transport errors are retried with exponential
backoff, honouring ``retry-after`` (and ``retry-after-ms``) up to a cap. An endpoint that has never
answered and refuses the connection, or whose host name does not resolve, is not retried (a wrong
``--base-url``, a server not started: retrying cost minutes); once it has answered, a refused connection is
retried like a timeout (a server restarting).
"""

from __future__ import annotations

import email.utils
import json
import logging
import os
import random
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import httpx

from scaffold.agent.config import ModelSection

log = logging.getLogger(__name__)

RETRY_STATUS = frozenset({408, 409, 429, 500, 502, 503, 504, 520, 522, 524, 529})
_OVERFLOW_MARKERS = (
    "context_length_exceeded",
    "context length",
    "context window",
    "maximum context",
    "prompt is too long",
    "too many tokens",
    "input is too long",
    "reduce the length",
    "string_above_max_length",
)
_QUOTA_MARKERS = ("insufficient_quota", "quota", "billing", "credit balance", "exceeded your current")


@dataclass
class Usage:
    """Tokens of one call. ``input_tokens`` excludes cache reads and writes, which are counted apart."""

    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    reasoning_tokens: int = 0

    @property
    def prompt_tokens(self) -> int:
        """Everything the model read: uncached input plus cache reads and writes."""
        return self.input_tokens + self.cache_read_tokens + self.cache_write_tokens

    def add(self, other: Usage) -> None:
        for name in (
            "input_tokens",
            "output_tokens",
            "cache_read_tokens",
            "cache_write_tokens",
            "reasoning_tokens",
        ):
            setattr(self, name, getattr(self, name) + getattr(other, name))

    def to_dict(self) -> dict[str, int]:
        return {
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "cache_read_tokens": self.cache_read_tokens,
            "cache_write_tokens": self.cache_write_tokens,
            "reasoning_tokens": self.reasoning_tokens,
        }


@dataclass
class ModelTurn:
    """One model call's result: the assistant message (neutral format), usage and why it stopped."""

    message: dict[str, Any]
    usage: Usage = field(default_factory=Usage)
    stop_reason: str | None = None
    attempts: int = 1
    latency_s: float = 0.0
    #: the failed attempts before this reply: ``{"attempt", "status", "error", "body", "wait_s"}``
    retries: list[dict[str, Any]] = field(default_factory=list)


@dataclass(frozen=True)
class ToolDef:
    """A tool as the model sees it: name, description, JSON schema of the arguments."""

    name: str
    description: str
    parameters: dict[str, Any]


class ModelError(Exception):
    """A model call failed for good. ``retryable`` errors were retried and ran out of attempts."""

    retryable = False

    def __init__(self, message: str, *, status: int | None = None, body: str = "") -> None:
        super().__init__(message)
        self.status = status
        self.body = body[:2000]


class RetryableError(ModelError):
    retryable = True

    def __init__(
        self, message: str, *, status: int | None = None, body: str = "", retry_after_s: float | None = None
    ):
        super().__init__(message, status=status, body=body)
        self.retry_after_s = retry_after_s


class AuthError(ModelError):
    """401/403: the key is missing, wrong, or not allowed this model."""


class QuotaError(ModelError):
    """The account is out of quota or credit; waiting will not help."""


class ContextOverflow(ModelError):
    """The request is longer than the model's window; the loop elides old tool outputs and tries again."""


def parse_retry_after(headers: httpx.Headers) -> float | None:
    """Seconds to wait from ``retry-after-ms``, ``retry-after`` (seconds or an HTTP date), or None."""
    ms = headers.get("retry-after-ms")
    if ms:
        try:
            return max(0.0, float(ms) / 1000.0)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def classify_http_error(response: httpx.Response) -> ModelError:
    """Map an error response to the exception class that decides whether to retry."""
    status = response.status_code
    body = response.text
    lowered = body.lower()
    message = _error_message(body) or f"HTTP {status}"
    if status in (401, 403):
        return AuthError(f"authentication failed ({status}): {message}", status=status, body=body)
    if any(marker in lowered for marker in _OVERFLOW_MARKERS) and status in (400, 413, 422, 429):
        return ContextOverflow(f"context window exceeded ({status}): {message}", status=status, body=body)
    if status == 413:
        return ContextOverflow(f"request too large (413): {message}", status=status, body=body)
    if status in (402,) or (status == 429 and any(marker in lowered for marker in _QUOTA_MARKERS)):
        return QuotaError(f"quota or billing problem ({status}): {message}", status=status, body=body)
    if status in RETRY_STATUS or status >= 500:
        return RetryableError(
            f"HTTP {status}: {message}",
            status=status,
            body=body,
            retry_after_s=parse_retry_after(response.headers),
        )
    return ModelError(f"request rejected ({status}): {message}", status=status, body=body)


def _error_message(body: str) -> str:
    try:
        data = json.loads(body)
    except ValueError:
        return body.strip()[:300]
    err = data.get("error") if isinstance(data, dict) else None
    if isinstance(err, dict):
        return str(err.get("message") or err.get("type") or err)[:300]
    if isinstance(err, str):
        return err[:300]
    return body.strip()[:300]


class HttpModel:
    """Base for the three wire formats: holds the client, the key and the retry policy.

    Subclasses implement ``build_request(messages, tools) -> (path, body)`` and
    ``parse_response(data) -> ModelTurn``; :meth:`query` does the rest.
    """

    provider = "?"
    default_base_url = ""
    api_key_env = ""

    def __init__(
        self, model: str, config: ModelSection, *, base_url: str | None = None, cache_key: str | None = None
    ):
        self.model = model
        self.config = config
        self.base_url = (base_url or self.default_base_url).rstrip("/")
        self.cache_key = cache_key
        retry = config.retry
        self.max_attempts = retry.max_attempts
        self.backoff_initial_s = retry.backoff_initial_s
        self.backoff_max_s = retry.backoff_max_s
        self.retry_after_max_s = retry.retry_after_max_s
        self.sleep: Callable[[float], None] = time.sleep
        self._client = httpx.Client(timeout=httpx.Timeout(config.timeout_s, connect=30.0))
        #: the last request body sent, for prefix-stability measurements and debugging
        self.last_request: dict[str, Any] | None = None
        #: whether the endpoint has answered at least once (a refused connection before that is final)
        self.answered = False

    @classmethod
    def from_spec(
        cls,
        model: str,
        config: ModelSection,
        *,
        base_url: str | None = None,
        cache_key: str | None = None,
        paths: dict[str, str] | None = None,
    ) -> HttpModel:
        return cls(model, config, base_url=base_url, cache_key=cache_key)

    @classmethod
    def preflight(cls, model: str, config: ModelSection, *, base_url: str | None, task_id: str) -> str | None:
        """The provider's own API without its key refuses every call (and every retry): say so first. A
        server of one's own (``--base-url``) may need no key."""
        key_env = config.api_key_env or cls.api_key_env
        if base_url is None and key_env and not os.environ.get(key_env):
            return (
                f"{key_env} is not set and no --base-url is given: {cls.default_base_url} refuses calls "
                f"without a key (set {key_env}, or give --base-url for a server of your own)"
            )
        if base_url is not None:  # a server of one's own: it must be a URL, and something must listen there
            from spu_common.endpoints import base_url_problem, unreachable

            problem = base_url_problem(base_url) or unreachable(base_url)
            if problem is not None:
                return f"--base-url {base_url}: {problem} (start the server, or correct the URL)"
        return None

    @property
    def name(self) -> str:
        return f"{self.provider}:{self.model}"

    def api_key(self) -> str | None:
        return os.environ.get(self.config.api_key_env or self.api_key_env) or None

    def headers(self) -> dict[str, str]:
        raise NotImplementedError

    def build_request(
        self, messages: list[dict[str, Any]], tools: list[ToolDef]
    ) -> tuple[str, dict[str, Any]]:
        raise NotImplementedError

    #: what a reply looks like, for the error when it does not
    response_shape = "a JSON object"

    def parse_response(self, data: dict[str, Any]) -> ModelTurn:
        raise NotImplementedError

    def query(self, messages: list[dict[str, Any]], tools: list[ToolDef]) -> ModelTurn:
        path, body = self.build_request(messages, tools)
        extra = self.config.extra_body
        if extra:
            body = {**body, **extra}
        self.last_request = body
        started = time.monotonic()
        retries: list[dict[str, Any]] = []
        data, attempts = self._post_with_retries(path, body, retries)
        try:
            turn = self.parse_response(data)
        except ModelError:
            raise
        except (KeyError, IndexError, TypeError, ValueError, AttributeError) as exc:  # a wrong shape
            raise ModelError(
                f"the reply of {self.base_url + path} is not a {self.provider} response: expected "
                f"{self.response_shape}, got {_shape_of(data)} ({type(exc).__name__}: {exc}). Check that "
                f"the provider prefix matches the server's API (one of {_provider_names()}).",
                body=json.dumps(data)[:2000],
            ) from exc
        turn.message["provider"] = self.provider
        turn.attempts = attempts
        turn.retries = retries
        turn.latency_s = time.monotonic() - started
        return turn

    def _post_with_retries(
        self, path: str, body: dict[str, Any], retries: list[dict[str, Any]]
    ) -> tuple[dict[str, Any], int]:
        """POST with retries; each failed attempt that is retried is appended to ``retries``."""
        url = self.base_url + path
        payload = json.dumps(body, ensure_ascii=False).encode("utf-8")
        headers = {"content-type": "application/json", **self.headers()}
        for attempt in range(1, self.max_attempts + 1):
            try:
                response = self._client.post(url, content=payload, headers=headers)
                self.answered = True
                if response.status_code >= 400:
                    raise classify_http_error(response)
                try:
                    data = response.json()
                except ValueError as exc:
                    raise RetryableError(f"the response was not JSON: {response.text[:200]!r}") from exc
                if not isinstance(data, dict):
                    raise RetryableError("the response was not a JSON object")
                if data.get("error"):  # some compatible servers answer 200 with an error body
                    raise ModelError(f"the server returned an error: {_error_message(json.dumps(data))}")
                return data, attempt
            except httpx.TransportError as exc:
                if not self.answered and (reason := _never_reached(exc)) is not None:
                    raise ModelError(
                        f"cannot reach {url}: {reason}; check --base-url and that the server is running"
                    ) from exc
                error: ModelError = RetryableError(f"{type(exc).__name__}: {exc}")
            except RetryableError as exc:
                error = exc
            if attempt == self.max_attempts:
                raise error
            wait_s = self._wait_before_retry(attempt, error)
            retries.append(
                {
                    "attempt": attempt,
                    "status": error.status,
                    "error": str(error),
                    "body": error.body,
                    "wait_s": round(wait_s, 3),
                }
            )
            log.warning(
                "%s: %s; retry %d/%d in %.1f s", self.name, error, attempt, self.max_attempts - 1, wait_s
            )
            self.sleep(wait_s)
        raise AssertionError("unreachable")

    def _wait_before_retry(self, attempt: int, error: ModelError) -> float:
        retry_after = getattr(error, "retry_after_s", None)
        if retry_after is not None:
            if retry_after > self.retry_after_max_s:
                raise ModelError(
                    f"the provider asked to wait {retry_after:.0f} s (more than retry_after_max_s="
                    f"{self.retry_after_max_s:.0f}): {error}",
                    status=error.status,
                )
            return retry_after
        backoff = min(self.backoff_max_s, self.backoff_initial_s * 2 ** (attempt - 1))
        return backoff * (0.5 + random.random() / 2)

    def close(self) -> None:
        self._client.close()


def _never_reached(exc: BaseException) -> str | None:
    """Why a request reached no server, when nothing can change that by waiting: the connection was
    refused, or the host name does not resolve (the cause httpx wraps); None for anything else."""
    seen = exc
    while seen is not None:
        if isinstance(seen, ConnectionRefusedError):
            return "the connection was refused (nothing listens there)"
        if isinstance(seen, socket.gaierror):
            return f"the host name does not resolve ({seen.strerror or seen})"
        seen = seen.__cause__ or seen.__context__
    return None


def _shape_of(data: Any) -> str:
    """A short description of a JSON value's shape: its top-level keys, or its type."""
    if isinstance(data, dict):
        return "an object with keys " + (", ".join(sorted(map(str, data))[:8]) or "(none)")
    return f"a JSON {type(data).__name__}"


def parse_arguments(raw: Any) -> tuple[dict[str, Any] | None, str | None]:
    """Tool-call arguments from a JSON string (or an already-parsed dict) -> (dict, error)."""
    if isinstance(raw, dict):
        return raw, None
    if raw is None or (isinstance(raw, str) and not raw.strip()):
        return {}, None
    try:
        value = json.loads(raw)
    except (TypeError, ValueError) as exc:
        return (
            None,
            f"the arguments are not valid JSON ({exc}); send one JSON object matching the tool's schema",
        )
    if not isinstance(value, dict):
        return None, f"the arguments must be a JSON object, not {type(value).__name__}"
    return value, None


def _provider_names() -> str:
    from scaffold.agent.models import provider_names  # the registry imports this module

    return provider_names()
