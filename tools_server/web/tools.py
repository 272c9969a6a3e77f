"""MCP tools for audited web access: search, fetch, literature and database lookups.

Every tool goes through one gateway (:mod:`tools_server.web.gateway`): embedded in this process by
default (audit log at ``$SPU_WORKDIR/audit/audit.jsonl``, policy from ``SPU_POLICY``), or the audit
service named by ``SPU_AUDIT_URL`` with ``SPU_AUDIT_TOKEN``, in which case this process never reads a
policy.
"""

from __future__ import annotations

import os
import threading
from typing import Any

from tools_server.plugin import ResultModel, ToolContext, ToolError, ToolResult, tool, workdir
from tools_server.web.fetch import FetchInput
from tools_server.web.scholarly import LiteratureInput, PDBInput, PubChemInput, UniProtInput
from tools_server.web.search import SearchInput

_gateways: dict[tuple[str | None, ...], Any] = {}
_lock = threading.Lock()


class PolicyNotice(ResultModel):
    flagged: bool
    action: str
    message: str


class WebResult(ToolResult):
    """A web tool's result, or, when the information policy flags it, only the stop notice: ``withheld``
    true, ``policy`` and ``tool`` (so every other key may be absent)."""

    withheld: bool | None = None
    policy: PolicyNotice | None = None
    tool: str | None = None


class SearchHit(ResultModel):
    rank: int | None = None
    title: str
    url: str
    snippet: str | None = None
    published: str | None = None


class SearchResult(WebResult):
    provider: str | None = None
    query: str | None = None
    n_results: int | None = None
    results: list[SearchHit] | None = None


class FetchResult(WebResult):
    url: str | None = None
    final_url: str | None = None
    status: int | None = None
    content_type: str | None = None
    title: str | None = None
    converter: str | None = None
    pages: int | None = None
    bytes: int | None = None
    content_sha256: str | None = None
    from_cache: bool | None = None
    total_chars: int | None = None
    start_index: int | None = None
    returned_chars: int | None = None
    next_start_index: int | None = None
    content: str | None = None


#: identifiers and years as the providers give them: numbers from some, text from others
Identifier = int | str | None


class Paper(ResultModel):
    title: str | None = None
    authors: list[str]
    journal: str | None = None
    year: Identifier = None
    date: str | None = None
    doi: str | None = None
    pmid: Identifier = None
    pmcid: str | None = None
    arxiv_id: str | None = None
    url: str | None = None
    abstract: str | None = None


class LiteratureResult(WebResult):
    source: str | None = None
    query: str | None = None
    total_hits: int | None = None
    n_results: int | None = None
    results: list[Paper] | None = None


class Compound(ResultModel):
    cid: Identifier = None
    iupac_name: str | None = None
    molecular_formula: str | None = None
    molecular_weight_g_mol: float | None = None
    exact_mass_da: float | None = None
    smiles: str | None = None
    connectivity_smiles: str | None = None
    inchi: str | None = None
    inchikey: str | None = None
    xlogp: float | None = None
    tpsa_a2: float | None = None
    hbond_donors: int | None = None
    hbond_acceptors: int | None = None
    rotatable_bonds: int | None = None
    formal_charge: int | None = None
    heavy_atoms: int | None = None
    cas: list[str]
    synonyms: list[str]
    url: str


class PubChemResult(WebResult):
    query: str | None = None
    kind: str | None = None
    n_results: int | None = None
    compounds: list[Compound] | None = None


class UniProtEntry(ResultModel):
    accession: str | None = None
    entry_name: str | None = None
    reviewed: bool
    protein_name: str | None = None
    genes: list[str | None]
    organism: str | None = None
    taxon_id: int | None = None
    length: int | None = None
    mass_da: float | None = None
    function: str | None = None
    sequence: str | None = None
    url: str


class UniProtResult(WebResult):
    query: str | None = None
    n_results: int | None = None
    entries: list[UniProtEntry] | None = None


class Citation(ResultModel):
    title: str | None = None
    journal: str | None = None
    year: Identifier = None
    doi: str | None = None
    pmid: Identifier = None


class PDBResult(WebResult):
    pdb_id: str | None = None
    title: str | None = None
    method: str | None = None
    resolution_a: float | None = None
    release_date: str | None = None
    polymer_entities: int | None = None
    deposited_atoms: int | None = None
    molecular_weight_kda: float | None = None
    citation: Citation | None = None
    file_format: str | None = None
    structure_bytes: int | None = None
    structure_sha256: str | None = None
    structure_file: str | None = None
    url: str | None = None


def current_gateway() -> Any:
    """The gateway for the current environment (remote service, or embedded with its audit log)."""
    from tools_server.web import guard, service

    url = os.environ.get(service.AUDIT_URL_ENV, "").strip()
    if url:
        token = os.environ.get(service.AUDIT_TOKEN_ENV, "").strip()
        if not token:
            raise ToolError(
                "http_error",
                "SPU_AUDIT_URL is set but SPU_AUDIT_TOKEN is not.",
                hint="The operator must set SPU_AUDIT_TOKEN to the audit service's token.",
            )
        try:
            service.parse_audit_url(url)
        except ValueError as exc:
            raise ToolError(
                "http_error",
                f"SPU_AUDIT_URL: {exc}",
                hint="The operator must set SPU_AUDIT_URL to the audit service's address.",
            ) from None
        key: tuple[str | None, ...] = ("remote", url, token)
    else:
        key = (
            "embedded",
            str(workdir()),
            os.environ.get("SPU_POLICY"),
            os.environ.get(guard.ALLOW_ENV),
            os.environ.get(guard.HOSTS_ENV),
        )
    with _lock:
        gw = _gateways.get(key)
        if gw is None:
            gw = _gateways[key] = _make(key)
        return gw


def _make(key: tuple[str | None, ...]) -> Any:
    if key[0] == "remote":
        from tools_server.web.service import RemoteGateway

        return RemoteGateway(key[1], key[2])
    from pathlib import Path

    from tools_server.web.gateway import Gateway
    from tools_server.web.policy import Policy

    workdir = Path(key[1])
    policy = Policy.load(key[2]) if key[2] else None
    return Gateway(workdir / "audit" / "audit.jsonl", policy=policy, workdir=workdir)


def _run(name: str, args: Any, ctx: ToolContext) -> dict[str, Any]:
    """The gateway's answer (embedded, or the audit service's JSON): the result, or the stop notice."""
    result = current_gateway().call(name, args.model_dump(mode="json"), call_id=ctx.job_id)
    ctx.set_engine("spu-audited-web", None)
    return result


@tool(name="web_search", resource="net", read_only=True, idempotent=False, open_world=True, time_limit_s=120)
def web_search(args: SearchInput, ctx: ToolContext) -> SearchResult:
    """Search the web through the audited search provider.

    Operators such as `site:nature.com`, `-term` and "quoted phrases" pass through to the provider.
    Returns `results` (rank, title, url, snippet, published date when known) and the `provider` used.
    Every search is recorded in the audit log. If `withheld` is true, the information policy applies:
    stop, do not retrieve the item another way, and record the step in your report.
    """
    return SearchResult.model_validate(_run("web_search", args, ctx))


@tool(name="web_fetch", resource="net", read_only=True, idempotent=False, open_world=True, time_limit_s=180)
def web_fetch(args: FetchInput, ctx: ToolContext) -> FetchResult:
    """Fetch a public http(s) URL and return its text: HTML as markdown, PDF as text (pages marked
    `--- page N ---`), JSON pretty-printed, plain text as is.

    Long documents are paginated: pass `start_index` = the previous `next_start_index` (null when the
    document is complete) to read on; later pages come from the same download. `total_chars` is the
    document length in characters, `content_sha256` the SHA-256 of the downloaded bytes. Private and
    local addresses are refused (`url_refused`), and robots.txt is respected. If `withheld` is true, the
    information policy applies: stop and record the step in your report.
    """
    return FetchResult.model_validate(_run("web_fetch", args, ctx))


@tool(
    name="literature_search",
    resource="net",
    read_only=True,
    idempotent=False,
    open_world=True,
    time_limit_s=120,
)
def literature_search(args: LiteratureInput, ctx: ToolContext) -> LiteratureResult:
    """Search the scholarly literature: Europe PMC (default), PubMed, Crossref, OpenAlex or arXiv.

    Optional `from_date`/`until_date` (YYYY, YYYY-MM or YYYY-MM-DD) filter by publication date. Returns
    `total_hits` and `results` with title, authors (first six), journal, year, date, doi, pmid, pmcid,
    arxiv_id, url and the start of the abstract (600 characters). If `withheld` is true, the information
    policy applies: stop and record the step in your report.
    """
    return LiteratureResult.model_validate(_run("literature_search", args, ctx))


@tool(
    name="pubchem_lookup", resource="net", read_only=True, idempotent=False, open_world=True, time_limit_s=120
)
def pubchem_lookup(args: PubChemInput, ctx: ToolContext) -> PubChemResult:
    """Look up a compound in PubChem by name, CAS number, SMILES, InChIKey or CID.

    Returns `compounds` with cid, IUPAC name, formula, molecular_weight_g_mol, exact_mass_da, smiles
    (isomeric), connectivity_smiles, InChI, InChIKey, xlogp (computed XLogP3), tpsa_a2 (topological polar
    surface area, Å²), H-bond donors/acceptors, rotatable bonds, formal charge, heavy atoms, CAS numbers
    and up to ten synonyms. An unknown compound is an `invalid_input` error.
    """
    return PubChemResult.model_validate(_run("pubchem_lookup", args, ctx))


@tool(
    name="uniprot_lookup", resource="net", read_only=True, idempotent=False, open_world=True, time_limit_s=120
)
def uniprot_lookup(args: UniProtInput, ctx: ToolContext) -> UniProtResult:
    """Look up proteins in UniProtKB by accession (P69905) or query ('gene:HBB AND organism_id:9606').

    Returns `entries` with accession, entry name, reviewed (Swiss-Prot), protein name, genes, organism,
    taxon id, length (residues), mass_da, the function comment (first 800 characters) and the sequence
    (entries up to 5000 residues).
    """
    return UniProtResult.model_validate(_run("uniprot_lookup", args, ctx))


@tool(name="pdb_lookup", resource="net", read_only=True, idempotent=False, open_world=True, time_limit_s=300)
def pdb_lookup(args: PDBInput, ctx: ToolContext) -> PDBResult:
    """Fetch a PDB entry from RCSB: metadata and the structure file, saved as an artifact.

    Returns title, experimental method, resolution_a (Å; null for NMR), release date, polymer entity
    count, deposited atoms, molecular_weight_kda, the primary citation, and `structure_file` (path of
    the saved mmCIF or PDB file) with its size and SHA-256.
    """
    result = _run("pdb_lookup", args, ctx)
    text = result.pop("structure_text", None)
    if text is not None:
        path = ctx.artifact(f"{result['pdb_id']}.{result['file_format']}")
        path.write_text(text, encoding="utf-8")
        result["structure_file"] = str(path)
    return PDBResult.model_validate(result)
