"""``web_fetch``: one URL to readable text, paginated from a single download.

HTML becomes markdown (trafilatura, falling back to markdownify when trafilatura finds no main text),
PDF becomes text (pypdfium2, falling back to pypdf), JSON is pretty-printed, other text passes through.
The converted text is cached by URL under ``<workdir>/web-cache/`` for an hour, so asking for
``start_index=20000`` serves the next page of the same download without a new request.

robots.txt is fetched (through the audited client, so it is logged) once per origin and respected for
the user-agent token ``spu-scaffold``, following RFC 9309: a 4xx answer means no restrictions, a 5xx
answer means the whole site is disallowed. Operators can switch the check off with
``SPU_WEB_IGNORE_ROBOTS=1`` (the agent cannot); the audit log records it either way.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import re
import threading
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit
from urllib.robotparser import RobotFileParser

from pydantic import BaseModel, Field

from spu_common.jsonfiles import atomic_write_json
from tools_server.plugin import ToolError, storage_warning
from tools_server.web.net import CallNet

ROBOTS_AGENT = "spu-scaffold"
IGNORE_ROBOTS_ENV = "SPU_WEB_IGNORE_ROBOTS"
CACHE_TTL_S = 3600.0
_ROBOTS_TTL_S = 3600.0
_robots: dict[str, tuple[float, RobotFileParser]] = {}
_robots_lock = threading.Lock()


class FetchInput(BaseModel):
    url: str = Field(
        ..., min_length=1, max_length=4000, description="http(s) URL of a web page, PDF, JSON or text file."
    )
    start_index: int = Field(
        0, ge=0, description="Character offset to start from (use next_start_index to page on)."
    )
    max_length: int = Field(20000, ge=100, le=50000, description="Maximum characters of text to return.")
    raw: bool = Field(False, description="Return the page's HTML source instead of markdown.")


def _cache_file(workdir: Path, url: str, raw: bool) -> Path:
    key = hashlib.sha256(f"{'raw' if raw else 'text'}\n{url}".encode()).hexdigest()
    return workdir / "web-cache" / f"{key}.json"


def _load_cache(path: Path) -> dict[str, Any] | None:
    try:
        if time.time() - path.stat().st_mtime > CACHE_TTL_S:
            return None
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def _save_cache(path: Path, doc: dict[str, Any]) -> str | None:
    """Keep the converted page for the next pages of it; a warning when the write fails (the page is
    returned all the same, and fetched again for its next part)."""
    try:
        atomic_write_json(path, doc, indent=None, fsync=False)
    except OSError as exc:
        return storage_warning("the page", path, exc, "a later start_index fetches the page again")
    return None


def robots_allowed(net: CallNet, url: str) -> bool:
    """Whether robots.txt of the URL's origin lets ``spu-scaffold`` fetch it (fetched once per origin)."""
    parts = urlsplit(url)
    origin = f"{parts.scheme}://{parts.netloc}"
    with _robots_lock:
        cached = _robots.get(origin)
    if cached is None or time.monotonic() - cached[0] > _ROBOTS_TTL_S:
        parser = RobotFileParser()
        try:
            r = net.request(
                "GET", origin + "/robots.txt", provider="fetch", purpose="robots", max_bytes=512 * 1024
            )
        except ToolError as exc:
            if exc.code == "url_refused":
                raise
            r = None
        if r is None or r.status >= 500:
            parser.disallow_all = True
        elif r.status >= 400:
            parser.allow_all = True
        else:
            parser.parse(r.text().splitlines())
        with _robots_lock:
            _robots[origin] = (time.monotonic(), parser)
        cached = _robots[origin]
    return cached[1].can_fetch(ROBOTS_AGENT, url)


def _kind(content_type: str, body: bytes) -> str:
    head = body[:1024].lstrip().lower()
    if content_type == "application/pdf" or body.startswith(b"%PDF-"):
        return "pdf"
    if content_type in ("text/html", "application/xhtml+xml") or head.startswith(
        (b"<!doctype html", b"<html")
    ):
        return "html"
    if content_type == "application/json" or content_type.endswith("+json"):
        return "json"
    if content_type.startswith("text/") or content_type.endswith(("+xml", "/xml")) or not content_type:
        return "text"
    return "binary"


def html_title(page: str) -> str | None:
    m = re.search(r"<title[^>]*>(.*?)</title>", page, re.DOTALL | re.IGNORECASE)
    if not m:
        return None
    import html

    return re.sub(r"\s+", " ", html.unescape(m.group(1))).strip() or None


def html_to_markdown(page: str, url: str | None = None) -> tuple[str, str]:
    """Markdown of the page's main text and the converter used (``trafilatura`` or ``markdownify``)."""
    try:
        import trafilatura

        text = trafilatura.extract(
            page,
            url=url,
            output_format="markdown",
            include_links=True,
            include_tables=True,
            include_formatting=True,
            favor_recall=True,
        )
    except Exception:
        text = None
    if (text and len(text.strip()) >= 200) or (text and len(page) < 2000):
        return text.strip(), "trafilatura"
    return markdownify_page(page), "markdownify"


def markdownify_page(page: str) -> str:
    from markdownify import markdownify

    cleaned = re.sub(
        r"<(script|style|noscript|template)\b.*?</\1\s*>", "", page, flags=re.DOTALL | re.IGNORECASE
    )
    text = markdownify(cleaned, heading_style="ATX")
    return re.sub(r"\n{3,}", "\n\n", text).strip()


def pdf_to_text(body: bytes) -> tuple[str, str, int]:
    """Text of every page (pages separated by a marker line), the converter used, and the page count."""
    try:
        import pypdfium2 as pdfium

        pdf = pdfium.PdfDocument(body)
        try:
            pages = []
            for i in range(len(pdf)):
                page = pdf[i]
                textpage = page.get_textpage()
                pages.append(textpage.get_text_range())
                textpage.close()
                page.close()
        finally:
            pdf.close()
        converter = "pypdfium2"
    except Exception:
        try:
            from pypdf import PdfReader

            reader = PdfReader(io.BytesIO(body))
            pages = [p.extract_text() or "" for p in reader.pages]
        except Exception as exc:
            raise ToolError("http_error", f"the PDF could not be read: {exc}") from None
        converter = "pypdf"
    text = "".join(f"\n\n--- page {i} ---\n\n{t.strip()}" for i, t in enumerate(pages, start=1)).strip()
    return text.replace("\r\n", "\n"), converter, len(pages)


def _convert(r, raw: bool) -> dict[str, Any]:
    kind = _kind(r.content_type, r.content)
    doc: dict[str, Any] = {"title": None, "pages": None}
    if kind == "html":
        page = r.text()
        doc["title"] = html_title(page)
        if raw:
            doc["text"], doc["converter"] = page, "raw"
        else:
            doc["text"], doc["converter"] = html_to_markdown(page, r.final_url)
    elif kind == "pdf":
        doc["text"], doc["converter"], doc["pages"] = pdf_to_text(r.content)
    elif kind == "json":
        try:
            doc["text"] = json.dumps(json.loads(r.content), indent=1, ensure_ascii=False)
        except ValueError:
            doc["text"] = r.text()
        doc["converter"] = "json"
    elif kind == "text":
        doc["text"], doc["converter"] = r.text(), "text"
    else:
        raise ToolError(
            "http_error",
            f"{r.final_url} is {r.content_type or 'binary data'}, which web_fetch cannot turn into text.",
            hint="Fetch an HTML page, PDF, JSON or text file instead.",
        )
    return doc


def web_fetch(args: FetchInput, net: CallNet) -> dict[str, Any]:
    cache = _cache_file(net.workdir, args.url, args.raw)
    doc = _load_cache(cache)
    from_cache = doc is not None
    cache_warning = None
    if doc is None:
        net.check_url(args.url)
        ignore_robots = os.environ.get(IGNORE_ROBOTS_ENV, "").lower() in ("1", "true", "yes")
        if not ignore_robots and not robots_allowed(net, args.url):
            raise ToolError(
                "url_refused",
                f"robots.txt of {urlsplit(args.url).netloc} does not allow fetching this page.",
                hint="Find the information on another site or through a search or literature tool.",
                reason="robots_txt",
            )
        r = net.request(
            "GET",
            args.url,
            provider="fetch",
            purpose="fetch",
            headers={
                "Accept": "text/html,application/xhtml+xml,application/pdf,application/json,"
                "text/plain;q=0.9,*/*;q=0.5"
            },
        )
        if not 200 <= r.status < 300:
            raise ToolError(
                "http_error",
                f"{r.final_url} answered HTTP {r.status}.",
                status=r.status,
                hint="Check the URL; for 403/429 the site may block automated access.",
            )
        doc = {
            "url": args.url,
            "final_url": r.final_url,
            "status": r.status,
            "content_type": r.content_type or None,
            "bytes": len(r.content),
            "content_sha256": r.sha256,
            "robots_checked": not ignore_robots,
            **_convert(r, args.raw),
        }
        cache_warning = _save_cache(cache, doc)
    text: str = doc["text"]
    start = min(args.start_index, len(text))
    chunk = text[start : start + args.max_length]
    end = start + len(chunk)
    net.sources.append(
        {
            "url": doc["url"],
            "final_url": doc["final_url"],
            "status": doc["status"],
            "content_type": doc["content_type"],
            "bytes": doc["bytes"],
            "content_sha256": doc["content_sha256"],
            "title": doc["title"],
        }
    )
    return {
        "url": doc["url"],
        "final_url": doc["final_url"],
        "status": doc["status"],
        "content_type": doc["content_type"],
        "title": doc["title"],
        "converter": doc["converter"],
        "pages": doc["pages"],
        "bytes": doc["bytes"],
        "content_sha256": doc["content_sha256"],
        "from_cache": from_cache,
        "total_chars": len(text),
        "start_index": start,
        "returned_chars": len(chunk),
        "next_start_index": end if end < len(text) else None,
        "content": chunk,
        **({"warnings": [cache_warning]} if cache_warning else {}),
    }
