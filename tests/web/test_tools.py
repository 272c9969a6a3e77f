"""Web tools end to end against the loopback provider farm: search adapters, fetch conversions and
pagination, robots.txt, scholarly and database lookups, the policy (observe and enforce) and sources.json."""

from __future__ import annotations

import hashlib
import json

import pytest

from spu_common.audit_log import verify, write_sources
from tools_server.core.context import ToolContext
from tools_server.core.errors import ToolError
from tools_server.web.policy import Policy

POLICY = {
    "doi": "10.1021/jacs.5b01234",
    "pmid": "26012345",
    "title": "Enantioselective synthesis of chiral amines by iridium-catalysed asymmetric hydrogenation",
}


@pytest.mark.parametrize(
    ("provider", "first_title", "first_url"),
    [
        ("brave", "Amine basicity", "https://example.org/amines"),
        ("searxng", "SearX result", "https://example.org/a"),
        ("tavily", "Tavily hit", "https://example.org/t"),
        ("serper", "Serper hit", "https://example.org/s"),
        ("exa", "Exa hit", "https://example.org/e"),
        ("duckduckgo", "DDG & first", "https://example.org/ddg?a=1&b=2"),
    ],
)
def test_search_providers(make_gateway, farm, provider, first_title, first_url):
    gw = make_gateway()
    out = gw.call("web_search", {"query": "amine pKa site:example.org -review", "provider": provider})
    assert out["provider"] == provider
    assert out["results"][0]["title"] == first_title and out["results"][0]["url"] == first_url
    assert out["results"][0]["rank"] == 1
    sent = farm.requests[-1]
    raw = json.dumps({k: v for k, v in sent.items() if k != "body"}) + sent["body"].decode()
    assert "site:example.org" in raw.replace("%3A", ":") or "site%3Aexample.org" in raw
    call = gw.audit.records()[-1]
    assert call["kind"] == "call" and call["provider"] == provider and call["n_results"] == out["n_results"]


def test_search_provider_from_config(make_gateway, monkeypatch):
    monkeypatch.setenv("SPU_SEARCH_PROVIDER", "serper")
    assert make_gateway().call("web_search", {"query": "x"})["provider"] == "serper"
    monkeypatch.setenv("SPU_SEARCH_PROVIDER", "bing")
    with pytest.raises(ToolError) as info:
        make_gateway().call("web_search", {"query": "x"})
    assert info.value.code == "invalid_input" and "bing" in info.value.message


def test_missing_and_rejected_keys(make_gateway, monkeypatch):
    monkeypatch.delenv("TAVILY_API_KEY")
    with pytest.raises(ToolError) as info:
        make_gateway().call("web_search", {"query": "x", "provider": "tavily"})
    assert info.value.code == "provider_key_missing" and "TAVILY_API_KEY" in info.value.message
    monkeypatch.setenv("EXA_API_KEY", "wrong")
    with pytest.raises(ToolError) as info:
        make_gateway().call("web_search", {"query": "x", "provider": "exa"})
    assert info.value.code == "provider_key_missing" and "rejected" in info.value.message


def test_duckduckgo_bot_check(make_gateway):
    with pytest.raises(ToolError) as info:
        make_gateway().call("web_search", {"query": "captcha", "provider": "duckduckgo"})
    assert info.value.code == "rate_limited"


def test_fetch_html_to_markdown(make_gateway, farm):
    out = make_gateway().call("web_fetch", {"url": farm.url("/page.html")})
    assert out["converter"] == "trafilatura" and out["title"] == "Amine synthesis review"
    assert "iridium, rhodium and ruthenium" in out["content"]
    assert "tracking" not in out["content"] and "color:red" not in out["content"]
    assert out["content_sha256"] == hashlib.sha256(farm.article_html.encode()).hexdigest()
    assert out["bytes"] == len(farm.article_html.encode()) and out["next_start_index"] is None


def test_fetch_pagination_from_one_download(make_gateway, farm):
    gw = make_gateway()
    first = gw.call("web_fetch", {"url": farm.url("/big.html"), "max_length": 5000})
    assert first["returned_chars"] == 5000 and first["next_start_index"] == 5000 and not first["from_cache"]
    n_requests = farm.paths().count("/big.html")
    pages = [first["content"]]
    nxt = first["next_start_index"]
    while nxt is not None:
        page = gw.call("web_fetch", {"url": farm.url("/big.html"), "start_index": nxt, "max_length": 5000})
        assert page["from_cache"] and page["content_sha256"] == first["content_sha256"]
        pages.append(page["content"])
        nxt = page["next_start_index"]
    assert farm.paths().count("/big.html") == n_requests  # later pages came from the cached download
    assert len("".join(pages)) == first["total_chars"] and "word199" in "".join(pages)


def test_fetch_pdf(make_gateway, farm):
    out = make_gateway().call("web_fetch", {"url": farm.url("/paper.pdf")})
    assert out["converter"] == "pypdfium2" and out["pages"] == 2
    assert "Rate constant 0.42 per second" in out["content"]
    assert out["content"].index("--- page 1 ---") < out["content"].index("--- page 2 ---")
    assert "activation energy 55 kJ" in out["content"]


def test_pdf_fallback_to_pypdf(farm, monkeypatch):
    import sys

    from tools_server.web.fetch import pdf_to_text

    monkeypatch.setitem(sys.modules, "pypdfium2", None)  # import fails: the fallback must take over
    text, converter, pages = pdf_to_text(farm.pdf_bytes)
    assert converter == "pypdf" and pages == 2 and "Rate constant 0.42" in text


def test_markdownify_fallback_when_trafilatura_finds_nothing(monkeypatch):
    import trafilatura

    from tools_server.web.fetch import html_to_markdown

    monkeypatch.setattr(trafilatura, "extract", lambda *a, **k: None)
    text, converter = html_to_markdown(
        "<html><body><nav><a href='/a'>A</a></nav>" + "<p>x</p>" * 400 + "</body></html>"
    )
    assert converter == "markdownify" and "[A](/a)" in text


def test_fetch_json_and_text(make_gateway, farm):
    gw = make_gateway()
    j = gw.call("web_fetch", {"url": farm.url("/data.json")})
    assert j["converter"] == "json" and json.loads(j["content"])["boiling_point_c"] == 78.37
    t = gw.call("web_fetch", {"url": farm.url("/notes.txt")})
    assert t["converter"] == "text" and t["content"] == "plain notes\nsecond line\n"


def test_fetch_respects_robots(make_gateway, farm, monkeypatch):
    from tools_server.web import fetch

    monkeypatch.setattr(fetch, "_robots", {})  # forget what earlier tests learnt about this origin
    gw = make_gateway()
    with pytest.raises(ToolError) as info:
        gw.call("web_fetch", {"url": farm.url("/private/secret.html")})
    assert info.value.code == "url_refused" and "robots.txt" in info.value.message
    assert "/private/secret.html" not in farm.paths()
    assert any(r.get("purpose") == "robots" for r in gw.audit.records())
    monkeypatch.setenv("SPU_WEB_IGNORE_ROBOTS", "1")
    assert gw.call("web_fetch", {"url": farm.url("/private/secret.html")})["status"] == 200


def test_fetch_refuses_hostile_url_without_request(make_gateway, farm):
    gw = make_gateway()
    before = len(farm.paths())
    for url in (
        "http://169.254.169.254/latest/meta-data/",
        f"http://internal.test:{farm.port}/",
        "file:///etc/passwd",
        "http://[::ffff:127.0.0.1]/",
    ):
        with pytest.raises(ToolError) as info:
            gw.call("web_fetch", {"url": url})
        assert info.value.code == "url_refused", url
    assert len(farm.paths()) == before
    calls = [r for r in gw.audit.records() if r["kind"] == "call"]
    assert [c["error"] for c in calls] == ["url_refused"] * 4


def test_fetch_http_error(make_gateway, farm):
    with pytest.raises(ToolError) as info:
        make_gateway().call("web_fetch", {"url": farm.url("/missing")})
    assert info.value.code == "http_error" and info.value.details["status"] == 404


@pytest.mark.parametrize(
    ("source", "title", "doi"),
    [
        ("europepmc", "Amine basicity in water.", "10.1000/epmc.1"),
        ("pubmed", "PubMed paper 0.", "10.1000/pm.0"),
        ("crossref", "Crossref work", "10.1000/cr.1"),
        ("openalex", "OpenAlex work", "10.1000/oa.1"),
        ("arxiv", "Machine learning of amine basicity", "10.48550/arXiv.2101.01234"),
    ],
)
def test_literature_sources(make_gateway, farm, source, title, doi):
    out = make_gateway().call(
        "literature_search",
        {"query": "amine basicity", "source": source, "from_date": "2015", "until_date": "2022-06"},
    )
    first = out["results"][0]
    assert first["title"] == title and first["doi"] == doi and out["source"] == source
    assert out["total_hits"] >= 1
    q = farm.requests[-1]["query"]
    if source == "pubmed":
        q = [r for r in farm.requests if r["path"] == "/ncbi/esearch.fcgi"][-1]["query"]
    if source == "europepmc":
        assert "FIRST_PDATE:[2015-01-01 TO 2022-06-30]" in q["query"][0] and first["pmcid"] == "PMC7777777"
        assert first["abstract"] == "We measured pKa values."
    if source == "pubmed":
        assert (
            q["mindate"] == ["2015/01/01"]
            and q["maxdate"] == ["2022/06/30"]
            and q["api_key"] == ["ncbi-secret"]
        )
        assert first["pmid"] == "31111111" and first["year"] == 2019
    if source == "crossref":
        assert q["filter"] == ["from-pub-date:2015-01-01,until-pub-date:2022-06-30"]
        assert q["mailto"] == ["tests@example.org"] and first["date"] == "2018-07-02"
    if source == "openalex":
        assert first["pmid"] == "34444444" and first["abstract"] == "Amines are bases."
    if source == "arxiv":
        assert "submittedDate:[201501010000 TO 202206302359]" in q["search_query"][0]
        assert first["arxiv_id"] == "2101.01234v2" and first["authors"] == ["A. Author", "B. Author"]


def test_ncbi_key_not_in_audit_log(make_gateway):
    gw = make_gateway()
    gw.call("literature_search", {"query": "x", "source": "pubmed"})
    assert "ncbi-secret" not in gw.audit.path.read_text()


def test_bad_dates(make_gateway):
    with pytest.raises(ToolError) as info:
        make_gateway().call("literature_search", {"query": "x", "from_date": "2020-13"})
    assert info.value.code == "invalid_input"


@pytest.mark.parametrize(
    ("query", "kind"),
    [("aspirin", "name"), ("50-78-2", "cas"), ("CC(=O)OC1=CC=CC=C1C(=O)O", "smiles"), ("2244", "cid")],
)
def test_pubchem(make_gateway, query, kind):
    out = make_gateway().call("pubchem_lookup", {"query": query})
    c = out["compounds"][0]
    assert out["kind"] == kind and c["cid"] == 2244 and c["molecular_weight_g_mol"] == pytest.approx(180.16)
    assert c["inchikey"] == "BSYNRYMUTXBXSQ-UHFFFAOYSA-N" and c["cas"] == ["50-78-2"]


def test_pubchem_throttle_retried_and_unknown(make_gateway):
    gw = make_gateway()
    out = gw.call("pubchem_lookup", {"query": "throttle-aspirin", "kind": "name"})
    assert out["compounds"][0]["cid"] == 2244
    statuses = [r.get("status") for r in gw.audit.records() if r["kind"] == "http"]
    assert statuses[:2] == [503, 200]
    with pytest.raises(ToolError) as info:
        gw.call("pubchem_lookup", {"query": "notacompound"})
    assert info.value.code == "invalid_input"


def test_uniprot(make_gateway):
    gw = make_gateway()
    entry = gw.call("uniprot_lookup", {"query": "P68871"})["entries"][0]
    assert entry["entry_name"] == "HBB_HUMAN" and entry["length"] == 147 and entry["reviewed"]
    assert entry["sequence"].startswith("MVHLTPEEK") and entry["genes"] == ["HBB"]
    found = gw.call("uniprot_lookup", {"query": "gene:HBB AND organism_id:9606"})
    assert found["entries"][0]["accession"] == "P68871"
    with pytest.raises(ToolError):
        gw.call("uniprot_lookup", {"query": "Q99999"})


def test_pdb_lookup_saves_artifact(web_env, farm, monkeypatch):
    from tools_server.web import tools

    ctx = ToolContext("pdb_lookup", "job-1")
    out = tools.pdb_lookup(tools.PDBInput(pdb_id="1crn"), ctx)
    assert out.title.startswith("WATER STRUCTURE") and out.resolution_a == 1.5
    assert "structure_text" not in out.model_fields_set
    from pathlib import Path

    assert Path(out.structure_file).read_text() == farm.crn_cif
    assert out.citation.doi == "10.1038/290107a0"
    with pytest.raises(ToolError):
        tools.pdb_lookup(tools.PDBInput(pdb_id="9ZZZ"), ctx)


def test_embedded_log_location(web_env, farm):
    from tools_server.core import settings
    from tools_server.web import tools

    tools.web_fetch(tools.FetchInput(url=farm.url("/notes.txt")), ToolContext("web_fetch", "j2"))
    log = settings.workdir() / "audit" / "audit.jsonl"
    assert verify(log).ok and any(
        r.get("call_id") == "j2" for r in map(json.loads, log.read_text().splitlines())
    )


def test_observe_mode_withholds_and_continues(make_gateway, farm):
    gw = make_gateway(policy=Policy.from_dict({**POLICY, "mode": "observe"}))
    out = gw.call("web_fetch", {"url": farm.url("/flagged.html")})
    assert out["withheld"] and out["policy"]["action"] == "stop_and_record"
    assert "10.1021" not in json.dumps(out) and "jacs" not in json.dumps(out).lower()
    assert "stop" in out["policy"]["message"] and "record" in out["policy"]["message"]
    assert gw.call("web_fetch", {"url": farm.url("/notes.txt")})["status"] == 200  # observe: not blocked
    call = next(r for r in gw.audit.records() if r["kind"] == "call")
    assert call["flags"] == ["doi"]
    assert "10.1021/jacs" not in gw.audit.path.read_text().lower()  # kinds are logged, never the identifiers


def test_enforce_mode_blocks_later_calls(make_gateway, farm, tmp_path):
    policy = Policy.from_dict({**POLICY, "mode": "enforce"})
    gw = make_gateway(policy=policy)
    assert gw.call("web_search", {"query": "amines", "provider": "brave"})["n_results"] == 2
    assert gw.call("web_fetch", {"url": farm.url("/flagged.html")})["withheld"]
    for args in ({"url": farm.url("/notes.txt")}, {"url": farm.url("/page.html")}):
        with pytest.raises(ToolError) as info:
            gw.call("web_fetch", args)
        assert info.value.code == "policy_blocked"
    calls = [r for r in gw.audit.records() if r["kind"] == "call"]
    assert [c.get("error") for c in calls] == [None, None, "policy_blocked", "policy_blocked"]
    # a restarted gateway on the same log stays blocked
    again = make_gateway(policy=policy, log=gw.audit.path)
    with pytest.raises(ToolError) as info:
        again.call("web_search", {"query": "x", "provider": "brave"})
    assert info.value.code == "policy_blocked"
    data = write_sources(gw.audit.path, tmp_path / "out" / "sources.json")
    assert data["flags"][0]["kinds"] == ["doi"] and data["audit_log"]["verified"]
    assert data["searches"][0]["query"] == "amines"
    assert "10.1021" not in (tmp_path / "out" / "sources.json").read_text()


def test_flag_in_search_query_arguments(make_gateway):
    gw = make_gateway(policy=Policy.from_dict(POLICY))
    assert gw.call("web_search", {"query": "PMID 26012345", "provider": "brave"})["withheld"]


def test_sources_json(make_gateway, farm, tmp_path):
    gw = make_gateway()
    gw.call("web_search", {"query": "amines", "provider": "serper"})
    gw.call("web_fetch", {"url": farm.url("/redirect/1")})
    gw.call("web_fetch", {"url": farm.url("/redirect/1"), "start_index": 10})
    data = write_sources(gw.audit.path, tmp_path / "sources.json")
    assert data["schema"] == "spu.sources/1" and len(data["searches"]) == 1
    assert len(data["sources"]) == 1
    src = data["sources"][0]
    assert src["url"] == farm.url("/redirect/1") and src["final_url"] == farm.url("/page.html")
    assert src["status"] == 200 and len(src["content_sha256"]) == 64 and src["flagged"] is False


def test_a_page_that_cannot_be_kept_is_returned_with_a_warning(make_gateway, farm, monkeypatch):
    """The fetch cache's disk is full: the page comes back all the same, saying its next parts will be
    fetched again (an OSError here was an internal_error before)."""
    import errno
    import os

    from tools_server.web import fetch

    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(fetch, "atomic_write_json", full)
    gw = make_gateway()
    page = gw.call("web_fetch", {"url": farm.url("/big.html"), "max_length": 5000})
    assert page["returned_chars"] == 5000 and not page["from_cache"]
    (warning,) = page["warnings"]
    assert (
        warning.startswith("storage_error: the page could not be written to ") and "No space left" in warning
    )
