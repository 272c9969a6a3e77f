"""Each tool call labelled with an activity, and code with the domain it computes in (rules, no model).

Categories (stable names, in the order plots stack them):

* ``inputs``: reading files (``read_file``, Claude Code's ``Read``/``Glob``/``Grep``/``LS``, ``cat``/``head``
  in a shell command);
* ``literature``: web and literature search and reading (``web_search``, ``web_fetch``,
  ``literature_search``, ``WebSearch``, ``WebFetch``);
* ``database``: scholarly and chemical databases (``pubchem_lookup``, ``uniprot_lookup``, ``pdb_lookup``,
  and code that calls their web APIs);
* ``computation``: a domain tool of the server, or code that imports a domain library; ``domain`` says
  which (``chem``, ``quantum``, ``md``, ``protein``, ``ml``);
* ``code``: other code and shell commands (``bash``, ``python``, ``Bash``, Codex's ``shell``/``exec_command``,
  writing a ``.py`` file);
* ``drafting``: writing or checking the submission (``submit_rankings``, ``ranking_*``, writing
  ``rankings.json`` or ``report.md`` by a file tool or from code);
* ``system``: hardware and job bookkeeping (``system_info``, ``jobs``, ``job_wait``, ``nvidia-smi``,
  ``TodoWrite``);
* ``other``: anything else.

GPU: a call *used the GPU* when the server's provenance in its result names a CUDA/GPU device (and the
result was not served from the cache), or its code
moves work to CUDA (``.cuda()``, ``device="cuda"``, ``gpu4pyscf``, ``Platform.getPlatformByName("CUDA")``)
and the call did not fail; a call that only asks about the GPU (``nvidia-smi``, ``system_info``,
``torch.cuda.is_available``) is a *probe*.
"""

from __future__ import annotations

import json
import re
from typing import Any

from environment.analysis.trajectories import ToolCall

CATEGORIES = ("inputs", "literature", "database", "computation", "code", "drafting", "system", "other")

_TOOL_CATEGORY: dict[str, tuple[str, str]] = {
    # the spu server
    "web_search": ("literature", ""),
    "web_fetch": ("literature", ""),
    "literature_search": ("literature", ""),
    "pubchem_lookup": ("database", ""),
    "uniprot_lookup": ("database", ""),
    "pdb_lookup": ("database", ""),
    "chem_parse": ("computation", "chem"),
    "chem_descriptors": ("computation", "chem"),
    "chem_similarity": ("computation", "chem"),
    "chem_substructure": ("computation", "chem"),
    "chem_conformers": ("computation", "chem"),
    "chem_depict": ("computation", "chem"),
    "xtb_run": ("computation", "quantum"),
    "xtb_conformers": ("computation", "quantum"),
    "dft_run": ("computation", "quantum"),
    "md_run": ("computation", "md"),
    "md_analyze": ("computation", "md"),
    "protein_properties": ("computation", "protein"),
    "sequence_align": ("computation", "protein"),
    "antibody_number": ("computation", "protein"),
    "protein_embed": ("computation", "protein"),
    "protein_variant_scores": ("computation", "protein"),
    "protein_fold": ("computation", "protein"),
    "ranking_check": ("drafting", ""),
    "ranking_aggregate": ("drafting", ""),
    "ranking_compare": ("drafting", ""),
    "submit_rankings": ("drafting", ""),
    "system_info": ("system", ""),
    "jobs": ("system", ""),
    "job_wait": ("system", ""),
    "job_cancel": ("system", ""),
    # the reference agent's built-ins
    "read_file": ("inputs", ""),
    # Claude Code
    "read": ("inputs", ""),
    "glob": ("inputs", ""),
    "grep": ("inputs", ""),
    "ls": ("inputs", ""),
    "notebookread": ("inputs", ""),
    "websearch": ("literature", ""),
    "webfetch": ("literature", ""),
    "todowrite": ("system", ""),
    "todoread": ("system", ""),
    "bashoutput": ("system", ""),
    "killshell": ("system", ""),
    # Codex
    "web_search_call": ("literature", ""),
    "view_image": ("inputs", ""),
    "update_plan": ("system", ""),
}

#: Tools that run code or a shell command: classified by what the code does.
CODE_TOOLS = {
    "bash",
    "python",
    "shell",
    "exec_command",
    "local_shell",
    "container.exec",
    "run_python",
    "execute_code",
    "notebookedit",
}
#: Tools that write a file: classified by the file they write.
WRITE_TOOLS = {"write_file", "write", "edit", "multiedit", "apply_patch", "str_replace_based_edit_tool"}

_DOMAIN_PATTERNS: list[tuple[str, re.Pattern[str]]] = [
    (
        "quantum",
        re.compile(
            r"\b(xtb|tblite|pyscf|gpu4pyscf|psi4|orca|gaussian|dftd[34]|semiempirical)\b", re.IGNORECASE
        ),
    ),
    ("md", re.compile(r"\b(openmm|gromacs|gmx|lammps|mdtraj|MDAnalysis|openff|ase\.md)\b")),
    ("protein", re.compile(r"\b(Bio\.|biopython|esm|esmfold|anarci|pdbfixer|prody)\b", re.IGNORECASE)),
    ("chem", re.compile(r"\b(rdkit|openbabel|pybel|mordred|datamol|Chem\.MolFromSmiles)\b", re.IGNORECASE)),
    ("ml", re.compile(r"\b(sklearn|scikit-learn|xgboost|lightgbm|torch|tensorflow|jax)\b")),
]
_DATABASE_URL = re.compile(
    r"(pubchem\.ncbi|rest\.uniprot|rcsb\.org|ebi\.ac\.uk/chembl|eutils\.ncbi)", re.IGNORECASE
)
_LITERATURE_CODE = re.compile(r"(curl|wget|requests\.get|urllib|httpx)\b.*https?://", re.IGNORECASE)
_SUBMISSION_FILE = re.compile(r"(rankings\.json|report\.md)")
_SUBMISSION_WRITE = re.compile(
    r"(>\s*\S*rankings\.json|rankings\.json['\"]?\s*,\s*['\"]w|open\([^)]*rankings\.json[^)]*['\"]w"
    r"|json\.dump\(|write_text\([^)]*\)|cp\s+\S+\s+\S*rankings\.json|tee\s+\S*rankings\.json)",
    re.IGNORECASE,
)
_READ_COMMAND = re.compile(r"^\s*(cat|head|tail|less|ls|find|wc|grep|sed -n|column|csvlook)\b")
_GPU_PROBE = re.compile(
    r"(nvidia-smi|cuda\.is_available|cuda\.device_count|torch\.cuda\.get_device)", re.IGNORECASE
)
_GPU_USE = re.compile(
    r"(\.cuda\(\)|\.to\(['\"]cuda|device\s*=\s*['\"]cuda|gpu4pyscf|getPlatformByName\(['\"]CUDA|cupy\.)",
    re.IGNORECASE,
)
_CACHE_HIT = re.compile(r"\"cache\"\s*:\s*\"hit\"")
_GPU_DEVICE = re.compile(r"\"device\"\s*:\s*\"(cuda|gpu)", re.IGNORECASE)


_MONTE_CARLO = re.compile(
    r"(np\.random|numpy\.random|default_rng|random\.(gauss|uniform|random|choice|shuffle)|monte.?carlo|bootstrap)",
    re.IGNORECASE,
)


def method_families(call: ToolCall, category: str, domain: str) -> set[str]:
    """Method families a call used: its computation domain, and ``monte_carlo`` for code that samples."""
    families = {domain} if domain else set()
    if call.name.lower() in CODE_TOOLS | WRITE_TOOLS and _MONTE_CARLO.search(code_text(call.arguments)):
        families.add("monte_carlo")
    return families


def code_text(arguments: Any) -> str:
    """The code or command a call ran, as one string (arguments flattened)."""
    if isinstance(arguments, str):
        return arguments
    if isinstance(arguments, dict):
        for key in ("code", "command", "cmd", "script", "input", "content", "source"):
            value = arguments.get(key)
            if isinstance(value, list):
                value = " ".join(str(v) for v in value)
            if isinstance(value, str) and value:
                return value
        return json.dumps(arguments, ensure_ascii=False)
    return "" if arguments is None else json.dumps(arguments, ensure_ascii=False)


def _target_path(arguments: Any) -> str:
    if isinstance(arguments, dict):
        for key in ("path", "file_path", "filename", "file"):
            if isinstance(arguments.get(key), str):
                return arguments[key]
    return ""


def code_domain(text: str) -> str:
    """The domain a piece of code computes in (first match in the order quantum, md, protein, chem, ml)."""
    for domain, pattern in _DOMAIN_PATTERNS:
        if pattern.search(text):
            return domain
    return ""


def classify(call: ToolCall) -> tuple[str, str]:
    """``(category, domain)`` of one call; ``domain`` is empty outside ``computation``."""
    name = call.name
    key = name.lower()
    if name in _TOOL_CATEGORY:
        return _TOOL_CATEGORY[name]
    if key in _TOOL_CATEGORY:
        return _TOOL_CATEGORY[key]
    if key in WRITE_TOOLS:
        path = _target_path(call.arguments)
        text = code_text(call.arguments)
        if _SUBMISSION_FILE.search(path) or (not path and _SUBMISSION_FILE.search(text[:2000])):
            return "drafting", ""
        if path.endswith(".py") or key == "apply_patch":
            domain = code_domain(text)
            return ("computation", domain) if domain else ("code", "")
        return "code", ""
    if key in CODE_TOOLS:
        text = code_text(call.arguments)
        if _GPU_PROBE.search(text) and len(text) < 200:
            return "system", ""
        if _SUBMISSION_FILE.search(text) and _SUBMISSION_WRITE.search(text):
            return "drafting", ""
        domain = code_domain(text)
        if domain:
            return "computation", domain
        if _DATABASE_URL.search(text):
            return "database", ""
        if _LITERATURE_CODE.search(text):
            return "literature", ""
        if _READ_COMMAND.match(text):
            return "inputs", ""
        return "code", ""
    if "search" in key or "fetch" in key or "browse" in key:
        return "literature", ""
    return "other", ""


def gpu_use(call: ToolCall) -> str:
    """``"use"``, ``"probe"`` or ``""`` for one call (module docstring)."""
    if call.is_error:
        return "probe" if _GPU_PROBE.search(code_text(call.arguments)) else ""
    if _GPU_DEVICE.search(call.content[:20000]):
        return "" if _CACHE_HIT.search(call.content[:20000]) else "use"
    if call.name.lower() in CODE_TOOLS or call.name.lower() in WRITE_TOOLS:
        text = code_text(call.arguments)
        if _GPU_USE.search(text):
            return "use"
        if _GPU_PROBE.search(text):
            return "probe"
    if call.name == "system_info":
        return "probe"
    return ""
