"""Scholarly and database sources with normalized outputs.

``literature_search`` over Europe PMC (REST search, ``resultType=core``), PubMed (E-utilities esearch +
esummary), Crossref (``/works``), OpenAlex (``/works``) and arXiv (Atom API); ``pubchem_lookup`` (PUG
REST property tables and synonyms), ``uniprot_lookup`` (UniProtKB REST) and ``pdb_lookup`` (RCSB Data
API entry plus the structure file from files.rcsb.org).

Configuration: ``SPU_CONTACT_EMAIL`` (Crossref and OpenAlex polite pool, NCBI ``email``),
``NCBI_API_KEY``, ``OPENALEX_API_KEY``; base URLs ``SPU_<SOURCE>_BASE_URL`` (``EUROPEPMC``, ``NCBI``,
``CROSSREF``, ``OPENALEX``, ``ARXIV``, ``PUBCHEM``, ``UNIPROT``, ``RCSB_DATA``, ``RCSB_FILES``).
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import os
import re
import xml.etree.ElementTree as ET
from typing import Any, Literal

from pydantic import BaseModel, Field, field_validator

from tools_server.plugin import ToolError
from tools_server.web.net import CallNet, env_url, raise_for_status

Source = Literal["europepmc", "pubmed", "crossref", "openalex", "arxiv"]


def _date(value: str | None, *, end: bool) -> _dt.date | None:
    if not value:
        return None
    value = value.strip()
    try:
        if re.fullmatch(r"\d{4}", value):
            return _dt.date(int(value), 12, 31) if end else _dt.date(int(value), 1, 1)
        if re.fullmatch(r"\d{4}-\d{2}", value):
            y, m = map(int, value.split("-"))
            if end:
                nxt = _dt.date(y + (m == 12), m % 12 + 1, 1)
                return nxt - _dt.timedelta(days=1)
            return _dt.date(y, m, 1)
        return _dt.date.fromisoformat(value)
    except ValueError:
        raise ToolError(
            "invalid_input", f"{value!r} is not a date; use YYYY, YYYY-MM or YYYY-MM-DD."
        ) from None


class LiteratureInput(BaseModel):
    query: str = Field(
        ..., min_length=1, max_length=500, description="Search terms (the source's own syntax works)."
    )
    source: Source = Field(
        "europepmc", description="europepmc (default), pubmed, crossref, openalex or arxiv."
    )
    max_results: int = Field(10, ge=1, le=50, description="How many records to return (1-50).")
    from_date: str | None = Field(None, description="Earliest publication date, YYYY[-MM[-DD]].")
    until_date: str | None = Field(None, description="Latest publication date, YYYY[-MM[-DD]].")


def _record(**kw: Any) -> dict[str, Any]:
    base = {
        "title": None,
        "authors": [],
        "journal": None,
        "year": None,
        "date": None,
        "doi": None,
        "pmid": None,
        "pmcid": None,
        "arxiv_id": None,
        "url": None,
        "abstract": None,
    }
    base.update({k: v for k, v in kw.items() if v not in (None, "", [])})
    if base["abstract"]:
        base["abstract"] = re.sub(r"\s+", " ", re.sub(r"<[^>]+>", "", base["abstract"])).strip()[:600]
    if base["title"]:
        base["title"] = re.sub(r"\s+", " ", re.sub(r"<[^>]+>", "", str(base["title"]))).strip()
    if len(base["authors"]) > 6:
        base["authors"] = [*base["authors"][:6], "et al."]
    if base["doi"]:
        base["doi"] = re.sub(r"^https?://(dx\.)?doi\.org/", "", base["doi"], flags=re.IGNORECASE)
    return base


def _europepmc(net: CallNet, q: str, n: int, since: _dt.date | None, until: _dt.date | None):
    if since or until:
        q = f"({q}) AND FIRST_PDATE:[{since or '1000-01-01'} TO {until or '3000-12-31'}]"
    base = env_url("europepmc", "https://www.ebi.ac.uk/europepmc/webservices/rest")
    data = net.get_json(
        f"{base}/search",
        provider="europepmc",
        params={"query": q, "format": "json", "pageSize": n, "resultType": "core"},
    )
    out = []
    for x in (data.get("resultList") or {}).get("result") or []:
        journal = ((x.get("journalInfo") or {}).get("journal") or {}).get("title") or x.get("journalTitle")
        authors = [
            a.get("fullName") for a in ((x.get("authorList") or {}).get("author") or []) if a.get("fullName")
        ]
        if not authors and x.get("authorString"):
            authors = [a.strip() for a in x["authorString"].rstrip(".").split(",")]
        out.append(
            _record(
                title=x.get("title"),
                authors=authors,
                journal=journal,
                year=_int(x.get("pubYear")),
                date=x.get("firstPublicationDate"),
                doi=x.get("doi"),
                pmid=x.get("pmid"),
                pmcid=x.get("pmcid"),
                url=f"https://europepmc.org/article/{x.get('source')}/{x.get('id')}" if x.get("id") else None,
                abstract=x.get("abstractText"),
            )
        )
    return int(data.get("hitCount") or 0), out


def _ncbi_params() -> dict[str, Any]:
    return {
        "tool": "spu-scaffold",
        "email": os.environ.get("SPU_CONTACT_EMAIL") or None,
        "api_key": os.environ.get("NCBI_API_KEY") or None,
    }


def _pubmed(net: CallNet, q: str, n: int, since: _dt.date | None, until: _dt.date | None):
    base = env_url("ncbi", "https://eutils.ncbi.nlm.nih.gov/entrez/eutils")
    params = {"db": "pubmed", "term": q, "retmax": n, "retmode": "json", **_ncbi_params()}
    if since or until:
        params.update(
            datetype="pdat",
            mindate=(since or _dt.date(1800, 1, 1)).strftime("%Y/%m/%d"),
            maxdate=(until or _dt.date(3000, 12, 31)).strftime("%Y/%m/%d"),
        )
    found = net.get_json(f"{base}/esearch.fcgi", provider="ncbi", params=params)
    result = found.get("esearchresult") or {}
    if "ERROR" in result:
        raise ToolError("invalid_input", f"PubMed rejected the query: {result['ERROR']}")
    ids = result.get("idlist") or []
    if not ids:
        return int(result.get("count") or 0), []
    summary = net.get_json(
        f"{base}/esummary.fcgi",
        provider="ncbi",
        params={"db": "pubmed", "id": ",".join(ids), "retmode": "json", **_ncbi_params()},
    )
    docs = summary.get("result") or {}
    out = []
    for uid in docs.get("uids") or ids:
        x = docs.get(uid) or {}
        ids_by_type = {a.get("idtype"): a.get("value") for a in x.get("articleids") or []}
        out.append(
            _record(
                title=x.get("title"),
                authors=[a.get("name") for a in x.get("authors") or [] if a.get("name")],
                journal=x.get("fulljournalname") or x.get("source"),
                year=_int((x.get("pubdate") or "")[:4]),
                date=x.get("sortpubdate", "")[:10].replace("/", "-") or x.get("pubdate"),
                doi=ids_by_type.get("doi") or (x.get("elocationid") or "").removeprefix("doi: ") or None,
                pmid=uid,
                pmcid=ids_by_type.get("pmc"),
                url=f"https://pubmed.ncbi.nlm.nih.gov/{uid}/",
            )
        )
    return int(result.get("count") or 0), out


def _crossref(net: CallNet, q: str, n: int, since: _dt.date | None, until: _dt.date | None):
    base = env_url("crossref", "https://api.crossref.org")
    filters = [f"from-pub-date:{since}"] if since else []
    filters += [f"until-pub-date:{until}"] if until else []
    data = net.get_json(
        f"{base}/works",
        provider="crossref",
        params={
            "query": q,
            "rows": n,
            "filter": ",".join(filters) or None,
            "select": "DOI,title,author,container-title,issued,type,URL,abstract",
            "mailto": os.environ.get("SPU_CONTACT_EMAIL") or None,
        },
    )
    msg = data.get("message") or {}
    out = []
    for x in msg.get("items") or []:
        parts = ((x.get("issued") or {}).get("date-parts") or [[None]])[0]
        out.append(
            _record(
                title=(x.get("title") or [None])[0],
                authors=[
                    " ".join(filter(None, (a.get("given"), a.get("family")))) or a.get("name")
                    for a in x.get("author") or []
                ],
                journal=(x.get("container-title") or [None])[0],
                year=parts[0] if parts else None,
                date="-".join(f"{p:02d}" if i else str(p) for i, p in enumerate(parts) if p) or None,
                doi=x.get("DOI"),
                url=x.get("URL"),
                abstract=x.get("abstract"),
            )
        )
    return int(msg.get("total-results") or 0), out


def _inverted_abstract(index: dict[str, list[int]] | None) -> str | None:
    if not index:
        return None
    words = sorted((pos, word) for word, positions in index.items() for pos in positions)
    return " ".join(w for _, w in words)


def _openalex(net: CallNet, q: str, n: int, since: _dt.date | None, until: _dt.date | None):
    base = env_url("openalex", "https://api.openalex.org")
    filters = [f"from_publication_date:{since}"] if since else []
    filters += [f"to_publication_date:{until}"] if until else []
    data = net.get_json(
        f"{base}/works",
        provider="openalex",
        params={
            "search": q,
            "per-page": n,
            "filter": ",".join(filters) or None,
            "mailto": os.environ.get("SPU_CONTACT_EMAIL") or None,
            "api_key": os.environ.get("OPENALEX_API_KEY") or None,
        },
    )
    out = []
    for x in data.get("results") or []:
        ids = x.get("ids") or {}
        source = (x.get("primary_location") or {}).get("source") or {}
        out.append(
            _record(
                title=x.get("title") or x.get("display_name"),
                authors=[
                    (a.get("author") or {}).get("display_name")
                    for a in x.get("authorships") or []
                    if (a.get("author") or {}).get("display_name")
                ],
                journal=source.get("display_name"),
                year=x.get("publication_year"),
                date=x.get("publication_date"),
                doi=x.get("doi"),
                pmid=(ids.get("pmid") or "").rstrip("/").rsplit("/", 1)[-1] or None,
                pmcid=(ids.get("pmcid") or "").rstrip("/").rsplit("/", 1)[-1] or None,
                url=x.get("id"),
                abstract=_inverted_abstract(x.get("abstract_inverted_index")),
            )
        )
    return int((data.get("meta") or {}).get("count") or 0), out


_ATOM = {
    "a": "http://www.w3.org/2005/Atom",
    "arxiv": "http://arxiv.org/schemas/atom",
    "os": "http://a9.com/-/spec/opensearch/1.1/",
}


def _arxiv(net: CallNet, q: str, n: int, since: _dt.date | None, until: _dt.date | None):
    base = env_url("arxiv", "https://export.arxiv.org/api")
    if re.search(r"\b(ti|au|abs|co|jr|cat|rn|id|all):", q):
        search = q
    else:
        search = " AND ".join(f"all:{w}" for w in re.findall(r'"[^"]+"|\S+', q))
    if since or until:
        lo = (since or _dt.date(1991, 1, 1)).strftime("%Y%m%d")
        hi = (until or _dt.date(3000, 12, 31)).strftime("%Y%m%d")
        search = f"({search}) AND submittedDate:[{lo}0000 TO {hi}2359]"
    r = net.request(
        "GET",
        f"{base}/query",
        provider="arxiv",
        params={"search_query": search, "start": 0, "max_results": n},
    )
    raise_for_status(r, "arxiv")
    try:
        root = ET.fromstring(r.content)
    except ET.ParseError:
        raise ToolError("http_error", "arXiv returned a feed that is not valid XML") from None
    out = []
    for e in root.findall("a:entry", _ATOM):
        entry_id = e.findtext("a:id", "", _ATOM)
        if "/api/errors" in entry_id:
            raise ToolError(
                "invalid_input", f"arXiv rejected the query: {e.findtext('a:summary', '', _ATOM)}"
            )
        published = e.findtext("a:published", "", _ATOM)
        out.append(
            _record(
                title=e.findtext("a:title", "", _ATOM),
                authors=[a.findtext("a:name", "", _ATOM) for a in e.findall("a:author", _ATOM)],
                journal=e.findtext("arxiv:journal_ref", None, _ATOM) or "arXiv",
                year=_int(published[:4]),
                date=published[:10] or None,
                doi=e.findtext("arxiv:doi", None, _ATOM),
                arxiv_id=re.sub(r"^https?://arxiv\.org/abs/", "", entry_id),
                url=entry_id,
                abstract=e.findtext("a:summary", None, _ATOM),
            )
        )
    total = root.findtext("os:totalResults", "0", _ATOM)
    return _int(total) or len(out), out


def _int(value: Any) -> int | None:
    try:
        return int(str(value).strip())
    except (TypeError, ValueError):
        return None


_SOURCES = {
    "europepmc": _europepmc,
    "pubmed": _pubmed,
    "crossref": _crossref,
    "openalex": _openalex,
    "arxiv": _arxiv,
}


def literature_search(args: LiteratureInput, net: CallNet) -> dict[str, Any]:
    since, until = _date(args.from_date, end=False), _date(args.until_date, end=True)
    if since and until and since > until:
        raise ToolError("invalid_input", "from_date is after until_date.")
    total, records = _SOURCES[args.source](net, args.query, args.max_results, since, until)
    return {
        "source": args.source,
        "query": args.query,
        "total_hits": total,
        "n_results": len(records[: args.max_results]),
        "results": records[: args.max_results],
    }


# --- PubChem -------------------------------------------------------------------------------------------

PUBCHEM_PROPERTIES = (
    "MolecularFormula,MolecularWeight,SMILES,ConnectivitySMILES,InChI,InChIKey,IUPACName,XLogP,ExactMass,"
    "TPSA,HBondDonorCount,HBondAcceptorCount,RotatableBondCount,Charge,HeavyAtomCount"
)
_CAS = re.compile(r"^\d{2,7}-\d{2}-\d$")
_INCHIKEY = re.compile(r"^[A-Z]{14}-[A-Z]{10}-[A-Z]$")


class PubChemInput(BaseModel):
    query: str = Field(
        ...,
        min_length=1,
        max_length=2000,
        description="Compound name, CAS number, SMILES, InChIKey or PubChem CID.",
    )
    kind: Literal["auto", "name", "cas", "smiles", "cid", "inchikey"] = Field(
        "auto", description="What the query is; auto guesses from its form."
    )
    max_results: int = Field(3, ge=1, le=10, description="Maximum compounds when a name matches several.")


def _guess_kind(q: str) -> str:
    if q.isdigit():
        return "cid"
    if _CAS.match(q):
        return "cas"
    if _INCHIKEY.match(q):
        return "inchikey"
    if " " not in q and re.search(r"[=#()\[\]@+\\/]|^[BCNOPSFIcnops]", q) and not q.isalpha():
        return "smiles"
    return "name"


def pubchem_lookup(args: PubChemInput, net: CallNet) -> dict[str, Any]:
    q = args.query.strip()
    kind = _guess_kind(q) if args.kind == "auto" else args.kind
    base = env_url("pubchem", "https://pubchem.ncbi.nlm.nih.gov/rest/pug")
    namespace = {"cas": "name", "name": "name", "smiles": "smiles", "cid": "cid", "inchikey": "inchikey"}[
        kind
    ]
    url = f"{base}/compound/{namespace}/property/{PUBCHEM_PROPERTIES}/JSON"
    if kind == "cid" and not q.isdigit():
        raise ToolError("invalid_input", f"a PubChem CID is a number, not {q!r}")
    r = net.request("POST", url, provider="pubchem", data={namespace: q})
    if r.status == 404 or (r.status == 400 and kind == "smiles"):
        raise ToolError(
            "invalid_input",
            f"PubChem has no compound for {q!r} read as {kind}.",
            hint="Check the spelling, or try a CAS number, SMILES, InChIKey or CID.",
        )
    raise_for_status(r, "pubchem")
    rows = ((r.json() or {}).get("PropertyTable") or {}).get("Properties") or []
    compounds = []
    for row in rows[: args.max_results]:
        cid = row.get("CID")
        synonyms = _pubchem_synonyms(net, base, cid)
        compounds.append(
            {
                "cid": cid,
                "iupac_name": row.get("IUPACName"),
                "molecular_formula": row.get("MolecularFormula"),
                "molecular_weight_g_mol": _float(row.get("MolecularWeight")),
                "exact_mass_da": _float(row.get("ExactMass")),
                "smiles": row.get("SMILES") or row.get("IsomericSMILES"),
                "connectivity_smiles": row.get("ConnectivitySMILES") or row.get("CanonicalSMILES"),
                "inchi": row.get("InChI"),
                "inchikey": row.get("InChIKey"),
                "xlogp": _float(row.get("XLogP")),
                "tpsa_a2": _float(row.get("TPSA")),
                "hbond_donors": row.get("HBondDonorCount"),
                "hbond_acceptors": row.get("HBondAcceptorCount"),
                "rotatable_bonds": row.get("RotatableBondCount"),
                "formal_charge": row.get("Charge"),
                "heavy_atoms": row.get("HeavyAtomCount"),
                "cas": [s for s in synonyms if _CAS.match(s)][:3],
                "synonyms": synonyms[:10],
                "url": f"https://pubchem.ncbi.nlm.nih.gov/compound/{cid}",
            }
        )
    if not compounds:
        raise ToolError("invalid_input", f"PubChem returned no compound for {q!r}.")
    return {"query": q, "kind": kind, "n_results": len(compounds), "compounds": compounds}


def _pubchem_synonyms(net: CallNet, base: str, cid: Any) -> list[str]:
    if cid is None:
        return []
    r = net.request("GET", f"{base}/compound/cid/{int(cid)}/synonyms/JSON", provider="pubchem")
    if r.status != 200:
        return []
    info = ((r.json() or {}).get("InformationList") or {}).get("Information") or [{}]
    return [str(s) for s in (info[0].get("Synonym") or [])[:200]]


def _float(value: Any) -> float | None:
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


# --- UniProt -------------------------------------------------------------------------------------------

_ACCESSION = re.compile(
    r"^(?:[OPQ][0-9][A-Z0-9]{3}[0-9]|[A-NR-Z][0-9](?:[A-Z][A-Z0-9]{2}[0-9]){1,2})(?:-\d+)?$"
)
UNIPROT_FIELDS = (
    "accession,id,protein_name,gene_names,organism_name,organism_id,length,mass,sequence,cc_function,reviewed"
)


class UniProtInput(BaseModel):
    query: str = Field(
        ...,
        min_length=1,
        max_length=500,
        description="UniProt accession (P69905) or a search such as 'gene:HBB AND organism_id:9606'.",
    )
    max_results: int = Field(3, ge=1, le=10, description="Maximum entries for a search.")
    include_sequence: bool = Field(True, description="Include the sequence (entries up to 5000 residues).")


def _uniprot_entry(x: dict[str, Any], with_sequence: bool) -> dict[str, Any]:
    desc = x.get("proteinDescription") or {}
    name = ((desc.get("recommendedName") or {}).get("fullName") or {}).get("value")
    if not name:
        sub = desc.get("submissionNames") or [{}]
        name = (sub[0].get("fullName") or {}).get("value")
    seq = x.get("sequence") or {}
    function = [
        t.get("value")
        for c in x.get("comments") or []
        if c.get("commentType") == "FUNCTION"
        for t in c.get("texts") or []
    ]
    sequence = seq.get("value") if with_sequence and (seq.get("length") or 0) <= 5000 else None
    return {
        "accession": x.get("primaryAccession"),
        "entry_name": x.get("uniProtkbId"),
        "reviewed": "reviewed" in str(x.get("entryType", "")).lower()
        and "unreviewed" not in str(x.get("entryType", "")).lower(),
        "protein_name": name,
        "genes": [(g.get("geneName") or {}).get("value") for g in x.get("genes") or [] if g.get("geneName")],
        "organism": (x.get("organism") or {}).get("scientificName"),
        "taxon_id": (x.get("organism") or {}).get("taxonId"),
        "length": seq.get("length"),
        "mass_da": seq.get("molWeight"),
        "function": (function[0][:800] if function else None),
        "sequence": sequence,
        "url": f"https://www.uniprot.org/uniprotkb/{x.get('primaryAccession')}/entry",
    }


def uniprot_lookup(args: UniProtInput, net: CallNet) -> dict[str, Any]:
    base = env_url("uniprot", "https://rest.uniprot.org")
    q = args.query.strip()
    if _ACCESSION.match(q.upper()):
        data = net.get_json(f"{base}/uniprotkb/{q.upper()}.json", provider="uniprot", ok_404=True)
        if data is None or not data.get("primaryAccession"):
            raise ToolError(
                "invalid_input",
                f"UniProt has no entry {q!r}.",
                hint="Check the accession or search by gene and organism.",
            )
        entries = [data]
    else:
        data = net.get_json(
            f"{base}/uniprotkb/search",
            provider="uniprot",
            params={"query": q, "format": "json", "size": args.max_results, "fields": UNIPROT_FIELDS},
        )
        entries = data.get("results") or []
    results = [_uniprot_entry(x, args.include_sequence) for x in entries[: args.max_results]]
    return {"query": q, "n_results": len(results), "entries": results}


# --- RCSB PDB ------------------------------------------------------------------------------------------


class PDBInput(BaseModel):
    pdb_id: str = Field(..., description="Four-character PDB id, e.g. 1CRN.")
    file_format: Literal["cif", "pdb"] = Field(
        "cif", description="Structure file format to save (mmCIF or PDB)."
    )

    @field_validator("pdb_id")
    @classmethod
    def _check_id(cls, value: str) -> str:
        value = value.strip().upper()
        if not re.fullmatch(r"[0-9][A-Z0-9]{3}", value):
            raise ValueError("a PDB id is a digit followed by three letters or digits, e.g. 1CRN")
        return value


def pdb_lookup(args: PDBInput, net: CallNet) -> dict[str, Any]:
    """Entry metadata plus ``structure_text`` (the caller saves it as an artifact and drops the text)."""
    data_base = env_url("rcsb_data", "https://data.rcsb.org/rest/v1")
    files_base = env_url("rcsb_files", "https://files.rcsb.org")
    entry = net.get_json(f"{data_base}/core/entry/{args.pdb_id}", provider="rcsb", ok_404=True)
    if entry is None:
        raise ToolError("invalid_input", f"The PDB has no entry {args.pdb_id}.")
    r = net.request(
        "GET",
        f"{files_base}/download/{args.pdb_id}.{args.file_format}",
        provider="rcsb",
        max_bytes=200 * 1024 * 1024,
    )
    if r.status == 404 and args.file_format == "pdb":
        raise ToolError(
            "invalid_input",
            f"{args.pdb_id} has no PDB-format file (large structures are mmCIF only).",
            hint="Use file_format='cif'.",
        )
    raise_for_status(r, "rcsb")
    info = entry.get("rcsb_entry_info") or {}
    citation = entry.get("rcsb_primary_citation") or {}
    resolution = info.get("resolution_combined") or [None]
    return {
        "pdb_id": args.pdb_id,
        "title": (entry.get("struct") or {}).get("title"),
        "method": ", ".join(e.get("method", "") for e in entry.get("exptl") or []) or None,
        "resolution_a": resolution[0],
        "release_date": ((entry.get("rcsb_accession_info") or {}).get("initial_release_date") or "")[:10]
        or None,
        "polymer_entities": info.get("polymer_entity_count"),
        "deposited_atoms": info.get("deposited_atom_count"),
        "molecular_weight_kda": info.get("molecular_weight"),
        "citation": {
            "title": citation.get("title"),
            "journal": citation.get("rcsb_journal_abbrev"),
            "year": citation.get("year"),
            "doi": citation.get("pdbx_database_id_doi"),
            "pmid": citation.get("pdbx_database_id_pub_med"),
        },
        "file_format": args.file_format,
        "structure_bytes": len(r.content),
        "structure_sha256": hashlib.sha256(r.content).hexdigest(),
        "structure_text": r.text(),
        "url": f"https://www.rcsb.org/structure/{args.pdb_id}",
    }
