"""The one audited HTTP client through which all web traffic of the tool server goes.

* Every connection goes through :class:`~tools_server.web.guard.GuardedBackend` (resolve once, check every
  address, connect to the checked address); redirects are followed here, one hop at a time, and each
  hop's URL is checked again before it is requested.
* Caps: response size after decompression (``max_bytes``), compressed size, total time per attempt
  (``timeout_s``, also enforced while a slow server drips its body), number of redirects. Only
  ``gzip``/``deflate``/``identity`` are accepted, and decompression is bounded chunk by chunk, so a
  gzip bomb stops at the cap instead of filling memory.
* ``trust_env`` is off: proxies, ``.netrc`` and ``SSL_CERT_FILE`` from the environment are ignored.
* Per-provider rate limits (minimum spacing of requests) and concurrency caps, and retries with jittered
  exponential backoff on connection errors, 429, 500, 502, 503 (PubChem's throttling answer) and 504,
  honouring ``Retry-After`` (seconds or an HTTP date) up to ``backoff_max_s``.
* Every attempt, including retries and redirect hops, is appended to the audit log (kind ``attempt``)
  before its connection is opened, and its outcome (kind ``http``: status, bytes, digest, or the error)
  before the request's result is returned; a refused address is recorded before anything is sent.
"""

from __future__ import annotations

import contextlib
import email.utils
import hashlib
import random
import socket
import ssl
import threading
import time
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import httpcore
import httpx

from tools_server.plugin import ToolError
from tools_server.web.audit import AuditLog
from tools_server.web.guard import AddressRefused, Guard, GuardedBackend

USER_AGENT = "spu-scaffold/0.1 (audited research tool; +https://github.com/spu-scaffold)"
RETRY_STATUSES = frozenset({429, 500, 502, 503, 504})
_SECRET_PARAMS = frozenset({"api_key", "apikey", "key", "token", "access_token", "x-api-key", "auth"})


@dataclass(frozen=True)
class ProviderLimit:
    """At most ``rate_per_s`` requests per second and ``concurrency`` requests in flight."""

    rate_per_s: float | None
    concurrency: int


#: Published limits where a provider states one (PubChem 5/s, NCBI 3/s without a key, arXiv one request
#: every 3 s, Brave's free plan 1/s); conservative values elsewhere.
DEFAULT_LIMITS: dict[str, ProviderLimit] = {
    "pubchem": ProviderLimit(5, 2),
    "ncbi": ProviderLimit(3, 2),
    "arxiv": ProviderLimit(1 / 3, 1),
    "europepmc": ProviderLimit(10, 4),
    "crossref": ProviderLimit(10, 4),
    "openalex": ProviderLimit(10, 4),
    "uniprot": ProviderLimit(10, 4),
    "rcsb": ProviderLimit(10, 4),
    "brave": ProviderLimit(1, 1),
    "tavily": ProviderLimit(5, 2),
    "serper": ProviderLimit(5, 2),
    "exa": ProviderLimit(5, 2),
    "searxng": ProviderLimit(2, 2),
    "duckduckgo": ProviderLimit(1, 1),
    "fetch": ProviderLimit(None, 8),
}


@dataclass
class Fetched:
    """A completed response: body decompressed and capped, plus what the audit log recorded."""

    url: str
    final_url: str
    status: int
    headers: dict[str, str]
    content: bytes
    elapsed_s: float
    redirects: list[str] = field(default_factory=list)

    @property
    def content_type(self) -> str:
        return self.headers.get("content-type", "").split(";")[0].strip().lower()

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.content).hexdigest()

    @property
    def charset(self) -> str | None:
        for part in self.headers.get("content-type", "").split(";")[1:]:
            key, _, value = part.strip().partition("=")
            if key.lower() == "charset" and value:
                return value.strip('"')
        return None

    def text(self) -> str:
        try:
            return self.content.decode(self.charset or "utf-8", errors="replace")
        except LookupError:
            return self.content.decode("utf-8", errors="replace")

    def json(self) -> Any:
        import json

        try:
            return json.loads(self.content)
        except ValueError:
            raise ToolError("http_error", f"{self.final_url} did not return valid JSON") from None


def redact_url(url: str) -> str:
    """The URL with secret query parameters (api_key, token …) replaced by ``REDACTED``; a URL that
    cannot be parsed loses its query (which may hold a secret) and is cut to 500 characters."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return url.split("?", 1)[0][:500]
    if not parts.query:
        return url
    query = [(k, "REDACTED" if k.lower() in _SECRET_PARAMS else v) for k, v in parse_qsl(parts.query, True)]
    return urlunsplit(parts._replace(query=urlencode(query)))


class _Gate:
    def __init__(self, limit: ProviderLimit) -> None:
        self.interval = 1.0 / limit.rate_per_s if limit.rate_per_s else 0.0
        self.slots = threading.BoundedSemaphore(limit.concurrency)
        self.lock = threading.Lock()
        self.next_at = 0.0

    @contextmanager
    def slot(self, deadline: float) -> Iterator[None]:
        if not self.slots.acquire(timeout=max(0.0, deadline - time.monotonic())):
            raise ToolError("rate_limited", "Too many requests to this provider are in flight.")
        try:
            with self.lock:
                now = time.monotonic()
                start = max(now, self.next_at)
                self.next_at = start + self.interval
            if start > now:
                time.sleep(start - now)
            yield
        finally:
            self.slots.release()


class _BodyTooLarge(Exception):
    pass


class _BoundedDecoder:
    """Decompress ``gzip``/``deflate`` layers without ever producing more than ``limit`` bytes."""

    def __init__(self, encodings: list[str], limit: int) -> None:
        self.limit = limit
        self.layers: list[Any] = []
        for enc in reversed(encodings):
            if enc in ("gzip", "x-gzip", "deflate"):
                self.layers.append(zlib.decompressobj(47))  # auto-detect gzip or zlib header
            elif enc not in ("identity", ""):
                raise ToolError("http_error", f"the server used an unsupported content encoding {enc!r}")
        self.produced = 0
        self._raw_deflate = [False] * len(self.layers)

    def _inflate(self, i: int, data: bytes) -> bytes:
        d = self.layers[i]
        try:
            out = d.decompress(data, self.limit + 1)
        except zlib.error:
            if self._raw_deflate[i] or d.total_in:  # only retry raw deflate at the start
                raise ToolError("http_error", "the response body is not valid compressed data") from None
            self._raw_deflate[i] = True
            self.layers[i] = d = zlib.decompressobj(-15)
            return self._inflate(i, data)
        if d.unconsumed_tail:
            raise _BodyTooLarge
        return out

    def feed(self, data: bytes) -> bytes:
        for i in range(len(self.layers)):
            data = self._inflate(i, data)
        self.produced += len(data)
        if self.produced > self.limit:
            raise _BodyTooLarge
        return data


class AuditedClient:
    """Synchronous client used by every web tool. Thread-safe; one per process is enough."""

    def __init__(
        self,
        audit: AuditLog | None,
        guard: Guard | None = None,
        *,
        max_bytes: int = 20 * 1024 * 1024,
        timeout_s: float = 30.0,
        call_timeout_s: float = 150.0,
        connect_timeout_s: float = 10.0,
        max_redirects: int = 5,
        max_retries: int = 3,
        backoff_base_s: float = 1.0,
        backoff_max_s: float = 30.0,
        limits: dict[str, ProviderLimit] | None = None,
        user_agent: str = USER_AGENT,
    ) -> None:
        self.audit = audit
        self.guard = guard or Guard.from_env()
        self.max_bytes = max_bytes
        self.timeout_s = timeout_s
        self.call_timeout_s = call_timeout_s
        self.connect_timeout_s = connect_timeout_s
        self.max_redirects = max_redirects
        self.max_retries = max_retries
        self.backoff_base_s = backoff_base_s
        self.backoff_max_s = backoff_max_s
        self._limits = {**DEFAULT_LIMITS, **(limits or {})}
        self._gates: dict[str, _Gate] = {}
        self._gates_lock = threading.Lock()
        self._http = httpx.Client(
            transport=_guarded_transport(self.guard),
            trust_env=False,
            follow_redirects=False,
            timeout=httpx.Timeout(timeout_s, connect=connect_timeout_s),
            headers={"User-Agent": user_agent, "Accept-Encoding": "gzip, deflate"},
            event_hooks={"response": [_hide_location]},
        )

    def close(self) -> None:
        self._http.close()

    def _gate(self, provider: str) -> _Gate:
        with self._gates_lock:
            gate = self._gates.get(provider)
            if gate is None:
                gate = self._gates[provider] = _Gate(self._limits.get(provider, DEFAULT_LIMITS["fetch"]))
            return gate

    def _log(self, record: dict[str, Any]) -> None:
        if self.audit is not None:
            self.audit.append({"kind": "http", **record})

    def _log_attempt(self, method: str, record: dict[str, Any]) -> None:
        if self.audit is not None:
            self.audit.append({"kind": "attempt", "method": method, **record})

    def request(
        self,
        method: str,
        url: str,
        *,
        provider: str = "fetch",
        purpose: str = "fetch",
        tool: str | None = None,
        call_id: str | None = None,
        params: dict[str, Any] | None = None,
        json: Any = None,
        data: dict[str, Any] | None = None,
        headers: dict[str, str] | None = None,
        max_bytes: int | None = None,
    ) -> Fetched:
        """Send one logical request (following redirects, retrying); return the final response.

        Raises :class:`ToolError` with ``url_refused``, ``timeout``, ``too_large``, ``rate_limited`` or
        ``http_error``. Non-2xx final statuses are returned, not raised: the caller knows what they mean.
        """
        if params:
            url = str(httpx.URL(url, params={k: v for k, v in params.items() if v is not None}))
        base = {"tool": tool, "call_id": call_id, "provider": provider, "purpose": purpose, "method": method}
        limit = max_bytes or self.max_bytes
        started = time.monotonic()
        call_deadline = started + self.call_timeout_s
        redirects: list[str] = []
        current = url
        for hop in range(self.max_redirects + 1):
            self._check(current, base, hop)
            response = self._send_with_retries(
                method, current, base, hop, json, data, headers, limit, call_deadline
            )
            location = (
                response.headers.get("location") if response.status in (301, 302, 303, 307, 308) else None
            )
            if location is None:
                response.url = url
                response.redirects = redirects
                response.elapsed_s = time.monotonic() - started
                return response
            try:
                nxt = str(httpx.URL(current).join(location))
            except Exception:
                # a target httpx cannot even parse: refused, logged, never retried
                self._log(
                    {
                        **base,
                        "url": redact_url(location[:500]),
                        "hop": hop + 1,
                        "error": "url_refused",
                        "reason": "unparseable_redirect",
                    }
                )
                raise ToolError(
                    "url_refused", f"{redact_url(current)} redirects to an address that cannot be parsed"
                ) from None
            redirects.append(nxt)
            if response.status in (301, 302, 303) and method != "HEAD":
                method, json, data = "GET", None, None
            current = nxt
        self._log(
            {**base, "url": redact_url(current), "hop": self.max_redirects + 1, "error": "too_many_redirects"}
        )
        raise ToolError(
            "http_error", f"more than {self.max_redirects} redirects starting at {redact_url(url)}"
        )

    def check_url(self, url: str, *, tool: str | None = None, call_id: str | None = None) -> None:
        """Refuse (``url_refused``, logged) a URL the guard rejects without resolving it."""
        self._check(
            url,
            {"tool": tool, "call_id": call_id, "provider": "fetch", "purpose": "check", "method": None},
            0,
        )

    def _check(self, url: str, base: dict[str, Any], hop: int) -> None:
        try:
            self.guard.check_url(url)
        except AddressRefused as exc:
            self._log(
                {**base, "url": redact_url(url), "hop": hop, "error": "url_refused", "reason": exc.reason}
            )
            raise ToolError("url_refused", f"Refused {redact_url(url)}: {exc}") from None

    def _send_with_retries(
        self, method, url, base, hop, json, data, headers, limit, call_deadline
    ) -> Fetched:
        gate = self._gate(base["provider"])
        attempt = 0
        while True:
            attempt += 1
            if time.monotonic() >= call_deadline:
                raise ToolError(
                    "timeout", f"{redact_url(url)}: the call ran out of its {self.call_timeout_s:.0f} s"
                )
            deadline = min(time.monotonic() + self.timeout_s, call_deadline)
            record: dict[str, Any] = {**base, "url": redact_url(url), "hop": hop, "attempt": attempt}
            t0 = time.monotonic()
            retry_after: float | None = None
            fetched: Fetched | None = None
            try:
                with gate.slot(deadline):
                    # on the record before any connection is opened; the outcome follows as kind "http"
                    self._log_attempt(method, record)
                    fetched = self._send_once(method, url, json, data, headers, limit, deadline, record)
            except ToolError as exc:
                record.update(error=exc.code, latency_ms=round((time.monotonic() - t0) * 1000, 1))
                self._log(record)
                retryable = exc.details.get("retryable", False)
                if not retryable or attempt > self.max_retries:
                    exc.details.pop("retryable", None)
                    raise
            else:
                record.update(
                    status=fetched.status,
                    bytes=len(fetched.content),
                    content_sha256=fetched.sha256,
                    content_type=fetched.content_type or None,
                    latency_ms=round((time.monotonic() - t0) * 1000, 1),
                )
                if fetched.status in (301, 302, 303, 307, 308):
                    record["location"] = redact_url(fetched.headers.get("location", ""))
                self._log(record)
                if fetched.status not in RETRY_STATUSES or attempt > self.max_retries:
                    return fetched
                retry_after = _parse_retry_after(fetched.headers.get("retry-after"))
                if retry_after is not None and retry_after > self.backoff_max_s:
                    return fetched
            backoff = min(self.backoff_max_s, self.backoff_base_s * 2 ** (attempt - 1))
            delay = retry_after if retry_after is not None else random.uniform(0.5 * backoff, backoff)
            if time.monotonic() + delay >= call_deadline:
                if fetched is not None:
                    return fetched
                raise ToolError(
                    "timeout", f"{redact_url(url)}: no time left for another attempt in this call"
                )
            time.sleep(delay)

    def _send_once(self, method, url, json, data, headers, limit, deadline, record) -> Fetched:
        remaining = max(0.05, deadline - time.monotonic())
        timeout = httpx.Timeout(remaining, connect=min(self.connect_timeout_s, remaining))
        try:
            request = self._http.build_request(
                method, url, json=json, data=data, headers=headers, timeout=timeout
            )
            response = self._http.send(request, stream=True)
        except AddressRefused as exc:
            record["reason"] = exc.reason
            raise ToolError("url_refused", f"Refused {redact_url(url)}: {exc}") from None
        except (httpx.UnsupportedProtocol, httpx.InvalidURL) as exc:
            record["reason"] = "unparseable_url"
            raise ToolError("url_refused", f"Refused {redact_url(url)}: {exc}") from None
        except httpx.TimeoutException:
            raise ToolError("timeout", f"{redact_url(url)} did not answer in time", retryable=True) from None
        except httpx.TransportError as exc:
            raise ToolError(
                "http_error", f"could not reach {redact_url(url)}: {exc}", retryable=True
            ) from None
        watchdog = _Watchdog(response, deadline)
        try:
            stream = response.extensions.get("network_stream")
            if stream is not None:
                peer = stream.get_extra_info("server_addr")
                if peer:
                    record["peer"] = str(peer[0])
            declared = response.headers.get("content-length")
            if declared and declared.isdigit() and int(declared) > limit:
                raise ToolError(
                    "too_large",
                    f"{redact_url(url)} declares {int(declared)} bytes, over the limit of {limit}",
                    hint="Fetch a smaller document or a specific page.",
                )
            encodings = [e.strip().lower() for e in response.headers.get("content-encoding", "").split(",")]
            decoder = _BoundedDecoder([e for e in encodings if e], limit)
            chunks: list[bytes] = []
            raw_total = 0
            try:
                for chunk in response.iter_raw():
                    raw_total += len(chunk)
                    if raw_total > limit:
                        raise _BodyTooLarge
                    chunks.append(decoder.feed(chunk))
                    if time.monotonic() > deadline:
                        raise ToolError(
                            "timeout",
                            f"{redact_url(url)} sent its body too slowly (over {self.timeout_s:.0f} s)",
                            retryable=True,
                        )
            except _BodyTooLarge:
                record["reason"] = "body_over_limit"
                raise ToolError(
                    "too_large",
                    f"the response from {redact_url(url)} is larger than {limit} bytes after decompression",
                    hint="Fetch a smaller document or a specific page.",
                ) from None
            except httpx.TimeoutException:
                raise ToolError("timeout", f"{redact_url(url)} stopped sending", retryable=True) from None
            except (httpx.TransportError, httpcore.NetworkError) as exc:
                if watchdog.fired:
                    raise ToolError(
                        "timeout",
                        f"{redact_url(url)} sent its body too slowly (over {self.timeout_s:.0f} s)",
                        retryable=True,
                    ) from None
                raise ToolError(
                    "http_error", f"the connection to {redact_url(url)} broke: {exc}", retryable=True
                ) from None
            if watchdog.fired:
                raise ToolError(
                    "timeout",
                    f"{redact_url(url)} sent its body too slowly (over {self.timeout_s:.0f} s)",
                    retryable=True,
                )
            return Fetched(
                url=url,
                final_url=url,
                status=response.status_code,
                headers=_headers_of(response),
                content=b"".join(chunks),
                elapsed_s=0.0,
            )
        finally:
            watchdog.cancel()
            response.close()


def _hide_location(response: httpx.Response) -> None:
    """Keep a redirect's Location away from httpx, which would parse it to build the next request (and
    fail on a target it cannot parse, after the server answered but before the attempt is logged); the
    client follows redirects itself, one audited hop at a time."""
    location = response.headers.get("location")
    if location is not None:
        response.extensions["spu_location"] = location
        del response.headers["location"]


def _headers_of(response: httpx.Response) -> dict[str, str]:
    headers = {k.lower(): v for k, v in response.headers.items()}
    if (location := response.extensions.get("spu_location")) is not None:
        headers["location"] = location
    return headers


class _Watchdog:
    """Shuts the response's socket down at ``deadline``: a server dripping one byte just inside the read
    timeout cannot hold an attempt past its deadline (a blocked ``recv`` wakes on shutdown)."""

    def __init__(self, response: httpx.Response, deadline: float) -> None:
        self.fired = False
        self._sock = None
        stream = response.extensions.get("network_stream")
        if stream is not None:
            with contextlib.suppress(Exception):
                self._sock = stream.get_extra_info("socket")
        self._timer = threading.Timer(max(0.0, deadline - time.monotonic()), self._fire)
        self._timer.daemon = True
        self._timer.start()

    def _fire(self) -> None:
        self.fired = True
        if self._sock is not None:
            with contextlib.suppress(OSError):
                self._sock.shutdown(socket.SHUT_RDWR)

    def cancel(self) -> None:
        self._timer.cancel()


def _parse_retry_after(value: str | None) -> float | None:
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def _guarded_transport(guard: Guard) -> httpx.HTTPTransport:
    transport = httpx.HTTPTransport(trust_env=False)
    transport._pool = httpcore.ConnectionPool(  # the only way to give httpx a network backend
        ssl_context=_ssl_context(),
        max_connections=64,
        max_keepalive_connections=16,
        keepalive_expiry=30.0,
        network_backend=GuardedBackend(guard),
    )
    return transport


def _ssl_context() -> ssl.SSLContext:
    try:
        import certifi

        return ssl.create_default_context(cafile=certifi.where())
    except ImportError:
        return ssl.create_default_context()
