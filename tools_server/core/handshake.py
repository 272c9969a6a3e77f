"""The answer to ``initialize``, given before the MCP SDK is imported.

MCP clients start ``spu serve`` for every session and wait for its answer to ``initialize``; Claude Code gives
up after a few seconds. Importing the SDK takes about half a second of CPU (mostly its protocol type
models), so over stdio the server answers an ``initialize`` from this module, which imports nothing but the
standard library, while the SDK loads. The same request is then handed to the SDK under :data:`REPLAY_ID`,
so its session state is exactly what it would have been; the SDK's own answer to that copy is compared
with the one already sent (:func:`same_answer`, a difference is logged) and dropped.

Correct by construction: this module answers only requests of one small, closed grammar (below) and leaves
every other request to the SDK, so it never answers success where the SDK would refuse. The grammar is
finite apart from the text of ``clientInfo``; ``tests/core/test_handshake.py`` walks all of it against the
SDK's own server (the pinned SDK range in ``pyproject.toml``) and proves the answers equal.

* ``params`` has exactly ``protocolVersion``, ``capabilities`` and ``clientInfo`` (no ``_meta``);
* ``protocolVersion`` is one of :data:`HANDSHAKE_VERSIONS` (the SDK then answers with the same version);
* ``capabilities`` holds only keys of :data:`CLIENT_CAPABILITY_SHAPES`, each with one of its shapes;
* ``clientInfo`` holds a string ``name`` and ``version`` and, optionally, a string ``title``.
"""

from __future__ import annotations

from typing import Any

from tools_server import __version__

INSTRUCTIONS = """\
Tools for predicting wet-lab outcomes: audited web search and fetch, cheminformatics (RDKit), xTB and DFT,
molecular dynamics, protein models and ranking helpers. Call system_info first. Compute tools run as jobs:
if a call answers {status: running, job_id}, poll it with job_wait. Results carry provenance; big outputs
are files under the server's work directory. Errors carry a stable code and a hint for recovery."""

SERVER_NAME = "spu"

#: Protocol revisions the SDK negotiates through ``initialize``, oldest to newest (``mcp_types.version``).
HANDSHAKE_VERSIONS = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")

#: What ``SpuServer`` declares: it lists and calls tools, and the list never changes during a session.
CAPABILITIES = {"tools": {"listChanged": False}}

#: The client capabilities answered here, each with the values it may take; anything else goes to the SDK.
CLIENT_CAPABILITY_SHAPES: dict[str, tuple[dict[str, Any], ...]] = {
    "roots": ({}, {"listChanged": True}, {"listChanged": False}),
    "sampling": ({},),
    "elicitation": ({}, {"form": {}}),
    "experimental": ({},),
}

#: The id under which a request answered here is handed on to the SDK; the SDK's reply to it is dropped.
REPLAY_ID = "spu-handshake-replay-7f3c9a"


def _is_client_info(info: Any) -> bool:
    return (
        isinstance(info, dict)
        and set(info) in ({"name", "version"}, {"name", "version", "title"})
        and all(type(value) is str for value in info.values())
    )


def _same_shape(value: Any, shape: Any) -> bool:
    """``value == shape`` with the types also equal (``1 == True`` must not pass as a flag)."""
    if type(value) is not type(shape):
        return False
    if isinstance(shape, dict):
        return set(value) == set(shape) and all(_same_shape(value[k], shape[k]) for k in shape)
    return value == shape


def _is_capabilities(capabilities: Any) -> bool:
    return isinstance(capabilities, dict) and all(
        key in CLIENT_CAPABILITY_SHAPES and any(_same_shape(value, s) for s in CLIENT_CAPABILITY_SHAPES[key])
        for key, value in capabilities.items()
    )


def initialize_result(message: dict[str, Any]) -> dict[str, Any] | None:
    """The ``result`` the SDK gives this checked JSON-RPC message when it is an ``initialize`` request of
    the grammar above; else None (the SDK answers it)."""
    if message.get("method") != "initialize" or type(message.get("id")) not in (str, int):
        return None
    params = message.get("params")
    if not isinstance(params, dict) or set(params) != {"protocolVersion", "capabilities", "clientInfo"}:
        return None
    requested = params["protocolVersion"]
    if type(requested) is not str or requested not in HANDSHAKE_VERSIONS:
        return None
    if not _is_capabilities(params["capabilities"]) or not _is_client_info(params["clientInfo"]):
        return None
    return {
        "capabilities": CAPABILITIES,
        "instructions": INSTRUCTIONS,
        "protocolVersion": requested,
        "serverInfo": {"name": SERVER_NAME, "version": __version__},
    }


def same_answer(sent: dict[str, Any], sdk_reply: dict[str, Any]) -> str | None:
    """None when the SDK's reply to the replayed request carries the result already sent, else what
    differs (logged as a warning: the SDK changed, and this module must follow it)."""
    if "result" not in sdk_reply:
        return f"the SDK refused the request: {sdk_reply.get('error')}"
    got = sdk_reply["result"]
    if got == sent:
        return None
    keys = sorted(k for k in set(got) | set(sent) if got.get(k) != sent.get(k))
    return "fields differ: " + ", ".join(f"{k} (sent {sent.get(k)!r}, SDK {got.get(k)!r})" for k in keys)
