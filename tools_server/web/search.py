"""Web search providers behind one interface.

Each adapter turns a query into the provider's documented request and its answer into
``{"title", "url", "snippet", "published"}`` items. The query string is sent unchanged, so operators the
provider understands (``site:``, ``-term``, quotes) pass through.

Provider choice: the tool's ``provider`` argument, else ``SPU_SEARCH_PROVIDER``, else ``duckduckgo``.
The keyless default is DuckDuckGo's HTML endpoint: it needs no account, which is what first use needs,
but it is a web page rather than an API and may answer with a bot check; configure Brave, Tavily,
Serper, Exa or a SearXNG instance for real runs. Keys: ``BRAVE_API_KEY``, ``TAVILY_API_KEY``,
``SERPER_API_KEY``, ``EXA_API_KEY``; SearXNG needs ``SEARXNG_URL`` (an instance with the ``json``
format enabled). Every base URL can be overridden with ``SPU_<PROVIDER>_BASE_URL``.
"""

from __future__ import annotations

import html
import os
import re
from collections.abc import Callable
from typing import Any, Literal
from urllib.parse import parse_qs, urlsplit

from pydantic import BaseModel, Field

from tools_server.plugin import ToolError
from tools_server.web.net import CallNet, env_url, raise_for_status

ProviderName = Literal["duckduckgo", "brave", "searxng", "tavily", "serper", "exa"]
PROVIDER_ENV = "SPU_SEARCH_PROVIDER"
DEFAULT_PROVIDER = "duckduckgo"


class SearchInput(BaseModel):
    query: str = Field(
        ...,
        min_length=1,
        max_length=500,
        description="Search query; operators such as site:example.org and -term pass through.",
    )
    max_results: int = Field(8, ge=1, le=20, description="How many results to return (1-20).")
    provider: ProviderName | None = Field(
        None, description="Search provider; leave empty for the configured one (SPU_SEARCH_PROVIDER)."
    )


def _item(title: Any, url: Any, snippet: Any = None, published: Any = None) -> dict[str, Any]:
    return {
        "title": _clean(title),
        "url": str(url or ""),
        "snippet": _clean(snippet)[:500] or None,
        "published": str(published) if published else None,
    }


def _clean(text: Any) -> str:
    if not text:
        return ""
    return re.sub(r"\s+", " ", html.unescape(re.sub(r"<[^>]+>", "", str(text)))).strip()


def _key(env: str, provider: str) -> str:
    value = os.environ.get(env, "").strip()
    if not value:
        raise ToolError(
            "provider_key_missing",
            f"The {provider} search provider needs {env}, which is not set.",
            hint=f"Set {env}, or choose another provider with SPU_SEARCH_PROVIDER (duckduckgo needs no key).",
        )
    return value


def _brave(net: CallNet, query: str, n: int) -> list[dict[str, Any]]:
    key = _key("BRAVE_API_KEY", "brave")
    base = env_url("brave", "https://api.search.brave.com/res/v1")
    r = net.request(
        "GET",
        f"{base}/web/search",
        provider="brave",
        purpose="search",
        params={"q": query, "count": n},
        headers={"X-Subscription-Token": key, "Accept": "application/json"},
    )
    raise_for_status(r, "brave")
    results = ((r.json() or {}).get("web") or {}).get("results") or []
    return [
        _item(x.get("title"), x.get("url"), x.get("description"), x.get("page_age") or x.get("age"))
        for x in results
    ]


def _searxng(net: CallNet, query: str, n: int) -> list[dict[str, Any]]:
    base = (os.environ.get("SEARXNG_URL") or os.environ.get("SPU_SEARXNG_BASE_URL") or "").rstrip("/")
    if not base:
        raise ToolError(
            "provider_key_missing",
            "The searxng provider needs SEARXNG_URL (the instance's address).",
            hint="Set SEARXNG_URL to a SearXNG instance with format=json enabled.",
        )
    r = net.request(
        "GET", f"{base}/search", provider="searxng", purpose="search", params={"q": query, "format": "json"}
    )
    if r.status == 403:
        raise ToolError(
            "http_error",
            "The SearXNG instance refuses format=json.",
            hint="Enable the json format under search.formats in the instance's settings.yml.",
        )
    raise_for_status(r, "searxng")
    results = (r.json() or {}).get("results") or []
    return [_item(x.get("title"), x.get("url"), x.get("content"), x.get("publishedDate")) for x in results]


def _tavily(net: CallNet, query: str, n: int) -> list[dict[str, Any]]:
    key = _key("TAVILY_API_KEY", "tavily")
    base = env_url("tavily", "https://api.tavily.com")
    r = net.request(
        "POST",
        f"{base}/search",
        provider="tavily",
        purpose="search",
        json={"query": query, "max_results": n, "search_depth": "basic"},
        headers={"Authorization": f"Bearer {key}"},
    )
    raise_for_status(r, "tavily")
    results = (r.json() or {}).get("results") or []
    return [_item(x.get("title"), x.get("url"), x.get("content"), x.get("published_date")) for x in results]


def _serper(net: CallNet, query: str, n: int) -> list[dict[str, Any]]:
    key = _key("SERPER_API_KEY", "serper")
    base = env_url("serper", "https://google.serper.dev")
    r = net.request(
        "POST",
        f"{base}/search",
        provider="serper",
        purpose="search",
        json={"q": query, "num": n},
        headers={"X-API-KEY": key},
    )
    raise_for_status(r, "serper")
    results = (r.json() or {}).get("organic") or []
    return [_item(x.get("title"), x.get("link"), x.get("snippet"), x.get("date")) for x in results]


def _exa(net: CallNet, query: str, n: int) -> list[dict[str, Any]]:
    key = _key("EXA_API_KEY", "exa")
    base = env_url("exa", "https://api.exa.ai")
    r = net.request(
        "POST",
        f"{base}/search",
        provider="exa",
        purpose="search",
        json={"query": query, "numResults": n, "contents": {"highlights": True}},
        headers={"x-api-key": key},
    )
    raise_for_status(r, "exa")
    results = (r.json() or {}).get("results") or []
    return [
        _item(
            x.get("title"),
            x.get("url"),
            " … ".join(x.get("highlights") or []) or x.get("summary") or (x.get("text") or "")[:500],
            x.get("publishedDate"),
        )
        for x in results
    ]


_DDG_RESULT = re.compile(
    r'<a[^>]+class="result__a"[^>]+href="([^"]+)"[^>]*>(.*?)</a>(.*?)(?=<a[^>]+class="result__a"|\Z)',
    re.DOTALL,
)
_DDG_SNIPPET = re.compile(r'class="result__snippet"[^>]*>(.*?)</(?:a|div|td)>', re.DOTALL)


def _ddg_target(href: str) -> str:
    href = html.unescape(href)
    if href.startswith("//"):
        href = "https:" + href
    parts = urlsplit(href)
    if parts.path.startswith("/l/"):
        target = parse_qs(parts.query).get("uddg")
        if target:
            return target[0]
    return href


def _duckduckgo(net: CallNet, query: str, n: int) -> list[dict[str, Any]]:
    base = env_url("duckduckgo", "https://html.duckduckgo.com")
    r = net.request("POST", f"{base}/html/", provider="duckduckgo", purpose="search", data={"q": query})
    raise_for_status(r, "duckduckgo")
    page = r.text()
    items = []
    for href, title, rest in _DDG_RESULT.findall(page):
        url = _ddg_target(href)
        if "duckduckgo.com/y.js" in url:  # advertisement
            continue
        snippet = _DDG_SNIPPET.search(rest)
        items.append(_item(title, url, snippet.group(1) if snippet else None))
    if not items and ("anomaly" in page or "challenge" in page):
        raise ToolError(
            "rate_limited",
            "DuckDuckGo answered with a bot check instead of results.",
            hint="Wait a minute, or configure an API provider (SPU_SEARCH_PROVIDER=brave, tavily, "
            "serper, exa or searxng).",
        )
    return items


PROVIDERS: dict[str, Callable[[CallNet, str, int], list[dict[str, Any]]]] = {
    "duckduckgo": _duckduckgo,
    "brave": _brave,
    "searxng": _searxng,
    "tavily": _tavily,
    "serper": _serper,
    "exa": _exa,
}


def configured_provider() -> str:
    name = (os.environ.get(PROVIDER_ENV) or DEFAULT_PROVIDER).strip().lower()
    if name not in PROVIDERS:
        raise ToolError(
            "invalid_input",
            f"SPU_SEARCH_PROVIDER={name!r} is not a known provider.",
            hint=f"Use one of {', '.join(PROVIDERS)}.",
        )
    return name


def web_search(args: SearchInput, net: CallNet) -> dict[str, Any]:
    provider = args.provider or configured_provider()
    items = [x for x in PROVIDERS[provider](net, args.query, args.max_results) if x["url"]][
        : args.max_results
    ]
    for rank, item in enumerate(items, start=1):
        item["rank"] = rank
    return {"provider": provider, "query": args.query, "n_results": len(items), "results": items}
