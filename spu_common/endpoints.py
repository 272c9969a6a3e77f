"""A model server's address (``--base-url``), checked before anything starts: an ``http``/``https`` URL
with a host, and, for a run, something listening there. A refused connection or a host name that does not
resolve is said at once, in one line; what may still pass (a slow server, a timeout) is left to the run's
retries.

Names under ``.invalid`` (RFC 6761) never resolve: they are refused without a lookup.
"""

from __future__ import annotations

import socket
from urllib.parse import urlsplit

SCHEMES = ("http", "https")
DEFAULT_PORTS = {"http": 80, "https": 443}
#: RFC 6761: a name in this domain never resolves, so none is looked up
RESERVED_DOMAIN = "invalid"
PROBE_TIMEOUT_S = 5.0


def base_url_problem(url: str) -> str | None:
    """What is wrong with ``url`` as a model server's base URL (scheme, host, port), or None."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        return f"not a URL ({exc}); give one like http://127.0.0.1:8000/v1"
    if parts.scheme not in SCHEMES:
        shown = f"the scheme {parts.scheme!r}" if parts.scheme else "no scheme"
        return f"has {shown}; give an http:// or https:// URL, like http://127.0.0.1:8000/v1"
    if not parts.hostname:
        return "names no host; give one like http://127.0.0.1:8000/v1"
    if port == 0:
        return "names port 0, where no server can listen"
    return None


def unreachable(url: str, timeout_s: float = PROBE_TIMEOUT_S) -> str | None:
    """Why no server can answer at ``url`` (its host does not resolve, or every address refuses the
    connection), or None when a connection opened or the attempt timed out (a busy server may still
    answer). ``url`` must have passed :func:`base_url_problem`."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    port = parts.port or DEFAULT_PORTS[parts.scheme]
    if host.rstrip(".").lower().rpartition(".")[2] == RESERVED_DOMAIN:
        return f"the host {host} is a reserved name that never resolves (RFC 6761)"
    try:
        addresses = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror as exc:
        return f"the host {host} does not resolve ({exc.strerror or exc})"
    reasons = []
    for family, kind, proto, _, address in addresses:
        with socket.socket(family, kind, proto) as sock:
            sock.settimeout(timeout_s)
            try:
                sock.connect(address)
            except TimeoutError:
                return None
            except ConnectionRefusedError:
                reasons.append(f"{address[0]} port {port}: connection refused")
            except OSError as exc:
                reasons.append(f"{address[0]} port {port}: {exc.strerror or exc}")
            else:
                return None
    return "nothing answers: " + "; ".join(dict.fromkeys(reasons)) if reasons else "no address to connect to"
