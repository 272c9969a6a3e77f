"""``spu view`` without ``--out``: the same page served on 127.0.0.1, read afresh on every request.

Reading the files again for each request means a reload shows a run that is still going. The server
binds the loopback address only and answers ``GET /?token=…`` (the page) with the token made at start
(``secrets.token_urlsafe``; the printed URL carries it), so another local user or a web page cannot read
the runs. A request whose ``Host`` is not ``127.0.0.1:PORT`` or ``localhost:PORT`` is refused with 421
before anything is read: a DNS-rebinding page (a name of the attacker's that resolves to 127.0.0.1) gets
nothing. A missing or wrong token is 403; any other path is 404.
"""

from __future__ import annotations

import hmac
import http.server
import secrets
import sys
import urllib.parse
from collections.abc import Callable
from typing import Any

HOST = "127.0.0.1"


class _Handler(http.server.BaseHTTPRequestHandler):
    render: Callable[[], str]
    token: str
    server_version = "spu-view"

    def do_GET(self) -> None:
        port = self.server.server_address[1]
        host = (self.headers.get("Host") or "").strip().lower()
        if host not in (f"{HOST}:{port}", f"localhost:{port}"):
            self._plain(421, "spu view answers only to http://127.0.0.1:PORT/ (this Host is not it)")
            return
        url = urllib.parse.urlsplit(self.path)
        if url.path not in ("/", "/index.html"):
            self._plain(404, "spu view serves one page, at /")
            return
        given = urllib.parse.parse_qs(url.query).get("token", [""])[0]
        if not hmac.compare_digest(given.encode(), type(self).token.encode()):
            self._plain(403, "open the URL spu view printed: it carries the page's token")
            return
        try:
            body = type(self).render().encode("utf-8")
        except Exception as exc:  # the folder went away meanwhile: a message, not a dead server
            self._plain(500, f"the page could not be built: {type(exc).__name__}: {exc}")
            return
        self._send(200, "text/html; charset=utf-8", body)

    def _plain(self, status: int, message: str) -> None:
        self._send(status, "text/plain; charset=utf-8", (message + "\n").encode("utf-8"))

    def _send(self, status: int, content_type: str, body: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        self.send_header("Referrer-Policy", "no-referrer")
        self.send_header("X-Content-Type-Options", "nosniff")
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:  # quiet: the command prints the URL only
        return


class _Server(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A browser that drops a connection (a preconnect it never used, a tab closed mid-page) is no error
        of the server: nothing is printed. Anything else is printed as the standard library does."""
        if isinstance(sys.exc_info()[1], ConnectionError):
            return
        super().handle_error(request, client_address)


def make_server(render: Callable[[], str], port: int = 0) -> http.server.ThreadingHTTPServer:
    """A server on 127.0.0.1:``port`` (0: a free port) answering with ``render()``; not yet started.

    Its token is ``server.token``; :func:`page_url` is the URL to print."""
    token = secrets.token_urlsafe(24)
    handler = type("ViewHandler", (_Handler,), {"render": staticmethod(render), "token": token})
    server = _Server((HOST, port), handler)
    server.token = token  # type: ignore[attr-defined]
    return server


def page_url(server: http.server.HTTPServer) -> str:
    """``http://127.0.0.1:PORT/?token=…``: the served page, with the token this start made."""
    return f"http://{HOST}:{server.server_address[1]}/?token={server.token}"  # type: ignore[attr-defined]
