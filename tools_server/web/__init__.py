"""Audited web access: search, fetch, literature and database lookups, every attempt in the audit log."""

from tools_server.plugin import Domain, Engine
from tools_server.web.checks import CHECKS

DOMAIN = Domain(
    name="web",
    tool_modules=("tools_server.web.tools",),
    engines=(Engine("trafilatura", "trafilatura"), Engine("pypdfium2", "pypdfium2")),
    doctor_checks=CHECKS,
    error_codes={
        "url_refused": "Only public http(s) addresses are allowed.",
        "http_error": "Check the URL or try again later.",
        "provider_key_missing": "Set the provider's API key in the environment or choose another provider.",
        "rate_limited": "Wait a little and try again.",
        "audit_log_invalid": "Run `spu audit verify`; keep the damaged log and start a new one.",
        "policy_blocked": "The information policy forbids this; stop and record the step in your report.",
    },
)
