"""Lists in docs/ that mirror code, checked against the code both ways: error codes (the core's and every
domain's), job statuses, the server's environment variables, and the domains."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

from tools_server.core.errors import ERROR_CODES
from tools_server.core.jobs.model import JOB_STATUSES, PENDING_STATUSES
from tools_server.core.registry import load_registry

REPO = Path(__file__).resolve().parents[2]
SERVER_DOC = (REPO / "docs" / "server.md").read_text(encoding="utf-8")
#: variables the server reads: quoted names, and f-string patterns such as SPU_{name.upper()}_BASE_URL
VAR = re.compile(r"[\"'](SPU_[A-Z0-9_]+)[\"']")
VAR_PATTERN = re.compile(r"f[\"'](SPU_)\{[^}]+\}(_[A-Z0-9_]+)[\"']")


def section(doc: str, title: str) -> str:
    return doc.split(f"\n{title}\n", 1)[1].split("\n## ", 1)[0]


def first_column(text: str) -> list[str]:
    return re.findall(r"^\| `([^`]+)` \|", text, flags=re.M)


def test_error_codes_in_the_docs_are_the_registry_s():
    load_registry()  # every domain declares its codes
    documented = first_column(section(SERVER_DOC, "## Errors"))
    assert len(documented) == len(set(documented))
    assert set(documented) == set(ERROR_CODES), (
        f"undocumented: {sorted(set(ERROR_CODES) - set(documented))}; "
        f"documented but not declared: {sorted(set(documented) - set(ERROR_CODES))}"
    )


def test_job_statuses_in_the_docs_are_the_code_s():
    calls = section(SERVER_DOC, "## Calls, jobs and results")
    table = calls.split("| job status | meaning |", 1)[1].split("\n\n", 1)[0]
    assert tuple(first_column(table)) == JOB_STATUSES
    pending = re.findall(r'^\| `"status": "([a-z]+)"` \|', calls, flags=re.M)
    assert tuple(pending) == PENDING_STATUSES
    # every status the job code assigns is declared
    assigned = set()
    for path in (REPO / "tools_server" / "core" / "jobs").rglob("*.py"):
        for line in re.findall(r"job\.status = (.*)", path.read_text(encoding="utf-8")):
            assigned |= set(re.findall(r"\"([a-z]+)\"(?!\))", line))  # not .get("code")
    assert assigned and assigned <= set(JOB_STATUSES), assigned


def _read_by_the_server() -> tuple[set[str], set[str]]:
    names, patterns = set(), set()
    for path in [*(REPO / "tools_server").rglob("*.py"), *(REPO / "spu").rglob("*.py")]:
        text = path.read_text(encoding="utf-8")
        names |= set(VAR.findall(text))
        patterns |= {a + "<PROVIDER>" + b for a, b in VAR_PATTERN.findall(text)}
    return names, patterns


def test_environment_variables_in_the_docs_are_the_ones_the_server_reads():
    files = section(SERVER_DOC, "## Files")
    documented = set(re.findall(r"`(SPU_[A-Z0-9_<>]+)(?:=[^`]*)?`", files))
    names, patterns = _read_by_the_server()
    assert {"SPU_SEARXNG_BASE_URL", "SPU_CPU_WORKER_CUDA"} <= names
    assert not names - documented, f"read by the server, not in docs/server.md: {sorted(names - documented)}"
    assert patterns <= documented
    unread = documented - names - patterns
    assert not unread, f"documented, read nowhere: {sorted(unread)}"


def test_no_hint_names_a_variable_no_code_reads():
    names, _ = _read_by_the_server()
    load_registry()
    for code, hint in ERROR_CODES.items():
        for var in re.findall(r"SPU_[A-Z0-9_]+", hint):
            assert var in names, (code, var)
    for path in (REPO / "tools_server").rglob("*.py"):
        for var in re.findall(r"(?<![\w{])(SPU_[A-Z][A-Z0-9_]*[A-Z0-9])\b", path.read_text(encoding="utf-8")):
            assert var in names, (path.name, var)


def test_every_page_that_lists_domains_names_all_nine():
    entry_points = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["entry-points"][
        "spu.tools"
    ]
    domains = set(entry_points)
    assert len(domains) == 9
    for path in [REPO / "README.md", *(REPO / "docs").glob("*.md")]:
        text = path.read_text(encoding="utf-8")
        # a list of domains: a paragraph about domains naming four or more (`chem`, `chem/`,
        # `tools_server/chem`)
        for paragraph in text.split("\n\n"):
            listed = set(re.findall(r"`(?:tools_server/)?([a-z]+)/?`", paragraph)) & domains
            if "domain" in paragraph and len(listed) >= 4:
                assert listed == domains, (
                    f"{path.name} lists {sorted(listed)}: missing {sorted(domains - listed)}"
                )


def test_the_readme_links_every_docs_page():
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    index = readme[readme.rindex("[server](docs/server.md)") :]
    linked = set(re.findall(r"\]\(docs/([\w-]+\.md)\)", index))
    pages = {p.name for p in (REPO / "docs").glob("*.md")}
    assert linked == pages, (sorted(pages - linked), sorted(linked - pages))
