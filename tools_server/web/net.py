"""What an operation (search, fetch, lookup) gets to reach the web: the audited client bound to one call."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tools_server.plugin import ToolError

if TYPE_CHECKING:  # the client (httpx, httpcore) loads with the first web call, not with the registry
    from tools_server.web.client import AuditedClient, Fetched


def env_url(name: str, default: str) -> str:
    """A provider base URL: ``SPU_<NAME>_BASE_URL`` overrides the public endpoint (tests, mirrors)."""
    return (os.environ.get(f"SPU_{name.upper()}_BASE_URL") or default).rstrip("/")


@dataclass
class CallNet:
    """The audited client plus the tool name and call id every attempt is logged under."""

    client: AuditedClient
    tool: str
    call_id: str
    workdir: Path
    sources: list[dict[str, Any]] = field(default_factory=list)
    scan_extra: list[str | bytes] = field(default_factory=list)

    def request(self, method: str, url: str, *, provider: str, purpose: str = "lookup", **kw: Any) -> Fetched:
        response = self.client.request(
            method, url, provider=provider, purpose=purpose, tool=self.tool, call_id=self.call_id, **kw
        )
        self.scan_extra.extend([response.final_url, response.content])
        return response

    def check_url(self, url: str) -> None:
        """Refuse a URL the guard rejects before anything is sent (logged like any refusal)."""
        self.client.check_url(url, tool=self.tool, call_id=self.call_id)

    def get_json(self, url: str, *, provider: str, ok_404: bool = False, **kw: Any) -> Any:
        """GET and parse JSON; non-2xx statuses become ``http_error``/``rate_limited`` (404 -> None if
        ok_404)."""
        response = self.request("GET", url, provider=provider, **kw)
        if ok_404 and response.status == 404:
            return None
        raise_for_status(response, provider)
        return response.json()


def raise_for_status(response: Fetched, provider: str) -> None:
    status = response.status
    if 200 <= status < 300:
        return
    if status == 429 or (status == 503 and provider == "pubchem"):
        raise ToolError(
            "rate_limited",
            f"{provider} is throttling requests (HTTP {status}).",
            hint="Wait a minute before the next request to this provider.",
        )
    if status in (401, 403) and provider in ("brave", "tavily", "serper", "exa"):
        raise ToolError(
            "provider_key_missing",
            f"{provider} rejected the API key (HTTP {status}).",
            hint=f"Check {provider.upper()}_API_KEY or choose another provider with SPU_SEARCH_PROVIDER.",
        )
    from tools_server.web.client import redact_url

    raise ToolError(
        "http_error", f"{provider} answered HTTP {status} for {redact_url(response.final_url)}", status=status
    )
