"""``spu view`` without ``--out``: the same page served on 127.0.0.1, read afresh on every request.

Reading the files again for each request means a reload shows a run that is still going. The server
binds the loopback address only and answers ``GET /`` (the page); anything else is 404.
"""

from __future__ import annotations

import http.server
from collections.abc import Callable
from typing import Any

HOST = "127.0.0.1"


class _Handler(http.server.BaseHTTPRequestHandler):
    render: Callable[[], str]
    server_version = "spu-view"

    def do_GET(self) -> None:
        path = self.path.split("?", 1)[0]
        if path not in ("/", "/index.html"):
            self.send_error(404, "spu view serves one page, at /")
            return
        try:
            body = type(self).render().encode("utf-8")
        except Exception as exc:  # a broken file must give a message, not a dead server
            self.send_error(500, f"the page could not be built: {type(exc).__name__}: {exc}")
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:  # quiet: the command prints the URL only
        return


def make_server(render: Callable[[], str], port: int = 0) -> http.server.ThreadingHTTPServer:
    """A server on 127.0.0.1:``port`` (0: a free port) answering with ``render()``; not yet started."""
    handler = type("ViewHandler", (_Handler,), {"render": staticmethod(render)})
    server = http.server.ThreadingHTTPServer((HOST, port), handler)
    server.daemon_threads = True
    return server
