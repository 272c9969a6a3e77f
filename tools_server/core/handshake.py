"""The answer to ``initialize``, given before the MCP SDK is imported.

MCP clients start ``spu serve`` for every session and wait for its answer to ``initialize``; Claude Code gives
up after a few seconds. Importing the SDK takes about a second of CPU (mostly its protocol type models), so
over stdio the server answers a well-formed ``initialize`` from this module, which imports nothing but the
standard library, while the SDK loads. The same request is then handed to the SDK under :data:`REPLAY_ID`,
so its session state is exactly what it would have been; the SDK's own answer to that copy is compared
with the one already sent (:func:`same_answer`) and dropped. A request this module is not sure about (odd
params, a 2026-era ``_meta`` envelope) is left to the SDK, as are all later requests.

What the SDK would answer is fixed by its version: the capabilities come from the handlers the server
registers, the protocol version is the one asked for when the SDK speaks it over the ``initialize``
handshake, else the newest such version. ``tests/core/test_handshake.py`` checks both against the SDK.
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

#: What ``SpuServer`` declares (it lists tools, and the SDK adds empty prompts and resources).
CAPABILITIES = {
    "prompts": {"listChanged": False},
    "resources": {"listChanged": False, "subscribe": False},
    "tools": {"listChanged": False},
}

#: The id under which a request answered here is handed on to the SDK; the SDK's reply to it is dropped.
REPLAY_ID = "spu-handshake-replay-7f3c9a"


def _is_name_and_version(info: Any) -> bool:
    return (
        isinstance(info, dict)
        and isinstance(info.get("name"), str)
        and isinstance(info.get("version"), str)
        and set(info) <= {"name", "version", "title"}
        and isinstance(info.get("title", ""), str)
    )


def initialize_result(message: dict[str, Any]) -> dict[str, Any] | None:
    """The ``result`` the SDK would give this checked JSON-RPC message, when it is an ``initialize``
    request this module can answer; else None (the SDK answers it)."""
    if message.get("method") != "initialize" or message.get("id") is None:
        return None
    params = message.get("params")
    if not isinstance(params, dict) or set(params) != {"protocolVersion", "capabilities", "clientInfo"}:
        return None
    requested = params["protocolVersion"]
    capabilities = params["capabilities"]
    if not isinstance(requested, str) or not isinstance(capabilities, dict):
        return None
    if not all(isinstance(value, dict) for value in capabilities.values()):
        return None
    if not _is_name_and_version(params["clientInfo"]):
        return None
    return {
        "capabilities": CAPABILITIES,
        "instructions": INSTRUCTIONS,
        "protocolVersion": requested if requested in HANDSHAKE_VERSIONS else HANDSHAKE_VERSIONS[-1],
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
