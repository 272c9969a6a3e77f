"""A loopback "provider farm": one real HTTP server answering like each web provider's documented API,
plus HTML pages, a PDF, redirects, slow, oversized and gzip-bomb bodies, robots.txt and throttling.

Response shapes follow the providers' documentation: Brave Web Search (``web.results[].title/url/
description/page_age``), SearXNG ``format=json`` (``results[].title/url/content``), Tavily
(``results[].title/url/content/score``), Serper (``organic[].title/link/snippet/position``), Exa
(``results[].title/url/publishedDate/highlights``), DuckDuckGo's HTML endpoint (``a.result__a`` with
``/l/?uddg=`` links), Europe PMC REST search (``hitCount``, ``resultList.result[]``), E-utilities
esearch/esummary JSON (``esearchresult.idlist``, ``result.uids``), Crossref ``/works``
(``message.items[]``), OpenAlex ``/works`` (``meta.count``, ``results[]``), the arXiv Atom feed, PubChem
PUG REST property tables and synonyms, UniProtKB REST JSON and the RCSB Data API entry.
"""

from __future__ import annotations

import gzip
import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

SOURCE_DOI = "10.1021/jacs.5b01234"
SOURCE_TITLE = "Enantioselective synthesis of chiral amines by iridium-catalysed asymmetric hydrogenation"
ARTICLE_HTML = """<!doctype html><html><head><title>Amine synthesis review</title>
<script>var tracking = "ignore me";</script><style>body{color:red}</style></head>
<body><nav>Home | About</nav><article><h1>Catalytic routes to amines</h1>
<p>Reductive amination and hydrogenation of imines are the two main routes to chiral amines. This
paragraph is long enough for the main-text extractor to keep it as the article body, and it describes
how catalysts based on iridium, rhodium and ruthenium compare in selectivity and turnover.</p>
<p>The second paragraph discusses solvent effects: protic solvents such as methanol often speed up the
reaction, while aprotic solvents give higher selectivity in several of the reported systems.</p>
<table><tr><th>Metal</th><th>ee (%)</th></tr><tr><td>Ir</td><td>96</td></tr></table>
</article><footer>Copyright</footer></body></html>"""
FLAGGED_HTML = """<html><head><title>Related work</title></head><body><article><p>A related study
(<a href="https://doi.org/10.1021%2Fjacs.5b01234">doi&#58;10.1021&#x2F;JACS.5b01234</a>) reported the
selectivities; this page is otherwise an ordinary review paragraph with enough words to be kept by the
extractor as the main content of the page, which is what a real page would look like.</p></article>
</body></html>"""


def make_pdf(pages: list[list[str]]) -> bytes:
    """A valid PDF with one Helvetica text line per string, built by hand (offsets computed)."""
    n = len(pages)
    font = 3 + 2 * n
    objects = [
        "<< /Type /Catalog /Pages 2 0 R >>",
        f"<< /Type /Pages /Kids [{' '.join(f'{3 + 2 * i} 0 R' for i in range(n))}] /Count {n} >>",
    ]
    for i, lines in enumerate(pages):
        content = "BT /F1 12 Tf 72 720 Td " + " ".join(f"({t}) Tj 0 -16 Td" for t in lines) + " ET"
        objects.append(
            f"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents {4 + 2 * i} 0 R "
            f"/Resources << /Font << /F1 {font} 0 R >> >> >>"
        )
        objects.append(f"<< /Length {len(content)} >>\nstream\n{content}\nendstream")
    objects.append("<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>")
    out = b"%PDF-1.4\n"
    offsets = []
    for i, obj in enumerate(objects, start=1):
        offsets.append(len(out))
        out += f"{i} 0 obj\n{obj}\nendobj\n".encode()
    xref = len(out)
    out += f"xref\n0 {len(objects) + 1}\n0000000000 65535 f \n".encode()
    out += b"".join(f"{o:010d} 00000 n \n".encode() for o in offsets)
    out += f"trailer\n<< /Size {len(objects) + 1} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n".encode()
    return out


PDF_BYTES = make_pdf(
    [
        ["Kinetics of amine formation", "Rate constant 0.42 per second"],
        ["Second page: activation energy 55 kJ per mol"],
    ]
)
GZIP_BOMB = gzip.compress(b"\0" * (40 * 1024 * 1024), compresslevel=9)  # ~40 KB that inflates to 40 MB

ARXIV_ATOM = """<?xml version="1.0" encoding="UTF-8"?>
<feed xmlns="http://www.w3.org/2005/Atom" xmlns:opensearch="http://a9.com/-/spec/opensearch/1.1/"
 xmlns:arxiv="http://arxiv.org/schemas/atom">
<title type="html">ArXiv Query: search_query=all:amine</title>
<opensearch:totalResults>1</opensearch:totalResults><opensearch:startIndex>0</opensearch:startIndex>
<entry><id>http://arxiv.org/abs/2101.01234v2</id><updated>2021-02-01T00:00:00Z</updated>
<published>2021-01-05T18:00:00Z</published><title>Machine learning of amine
 basicity</title><summary>We predict pKa values of amines.</summary>
<author><name>A. Author</name></author><author><name>B. Author</name></author>
<arxiv:doi>10.48550/arXiv.2101.01234</arxiv:doi>
<link href="http://arxiv.org/abs/2101.01234v2" rel="alternate" type="text/html"/>
<arxiv:primary_category term="physics.chem-ph" scheme="http://arxiv.org/schemas/atom"/></entry></feed>"""


class Farm:
    """The running server: ``url(path)``, the request log, and per-route counters."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.counters: dict[str, int] = {}
        self.lock = threading.Lock()
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self.article_html, self.pdf_bytes, self.crn_cif = ARTICLE_HTML, PDF_BYTES, CRN_CIF
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def url(self, path: str = "/") -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def count(self, key: str) -> int:
        with self.lock:
            self.counters[key] = self.counters.get(key, 0) + 1
            return self.counters[key]

    def paths(self) -> list[str]:
        with self.lock:
            return [r["path"] for r in self.requests]

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def _handler(farm: Farm):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: Any) -> None:
            pass

        def _send(
            self,
            status: int,
            body: bytes | str,
            ctype: str = "application/json",
            headers: dict[str, str] | None = None,
        ) -> None:
            if isinstance(body, str):
                body = body.encode()
            self.send_response(status)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            for k, v in (headers or {}).items():
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(body)

        def _json(self, obj: Any, status: int = 200) -> None:
            self._send(status, json.dumps(obj))

        def do_GET(self) -> None:
            self._route("GET")

        def do_POST(self) -> None:
            self._route("POST")

        def _route(self, method: str) -> None:
            parts = urlsplit(self.path)
            path, query = parts.path, parse_qs(parts.query)
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
            with farm.lock:
                farm.requests.append(
                    {
                        "method": method,
                        "path": path,
                        "query": query,
                        "body": body,
                        "headers": dict(self.headers),
                    }
                )
            handler = ROUTES.get(path)
            if handler is None:
                for prefix, h in PREFIX_ROUTES.items():
                    if path.startswith(prefix):
                        handler = h
                        break
            if handler is None:
                self._send(404, "not found", "text/plain")
                return
            handler(self, path, query, body)

    return Handler


def _brave(h, path, q, body):
    if not h.headers.get("X-Subscription-Token"):
        return h._json({"type": "ErrorResponse", "error": {"code": "SUBSCRIPTION_TOKEN_INVALID"}}, 401)
    if h.headers.get("X-Subscription-Token") == "bad-key":
        return h._json({"type": "ErrorResponse", "error": {"code": "SUBSCRIPTION_TOKEN_INVALID"}}, 401)
    h._json(
        {
            "type": "search",
            "query": {"original": q["q"][0]},
            "web": {
                "type": "search",
                "results": [
                    {
                        "title": "Amine <strong>basicity</strong>",
                        "url": "https://example.org/amines",
                        "description": "pKa values of <strong>amines</strong>",
                        "page_age": "2023-04-01T00:00:00",
                    },
                    {
                        "title": "Second",
                        "url": "https://example.org/second",
                        "description": "more",
                        "age": "2 days ago",
                    },
                ],
            },
        }
    )


def _searxng(h, path, q, body):
    if q.get("format") != ["json"]:
        return h._send(403, "Forbidden", "text/html")
    h._json(
        {
            "query": q["q"][0],
            "number_of_results": 0,
            "results": [
                {
                    "url": "https://example.org/a",
                    "title": "SearX result",
                    "content": "snippet a",
                    "engine": "bing",
                    "publishedDate": None,
                    "score": 1.0,
                }
            ],
            "answers": [],
            "suggestions": [],
        }
    )


def _tavily(h, path, q, body):
    if h.headers.get("Authorization") != "Bearer tvly-test":
        return h._json({"detail": {"error": "Unauthorized: missing or invalid API key."}}, 401)
    req = json.loads(body)
    h._json(
        {
            "query": req["query"],
            "answer": None,
            "images": [],
            "response_time": 0.5,
            "results": [
                {
                    "title": "Tavily hit",
                    "url": "https://example.org/t",
                    "content": "tavily content",
                    "score": 0.9,
                    "raw_content": None,
                }
            ],
        }
    )


def _serper(h, path, q, body):
    if h.headers.get("X-API-KEY") != "serper-test":
        return h._json({"message": "Unauthorized.", "statusCode": 403}, 403)
    req = json.loads(body)
    h._json(
        {
            "searchParameters": {"q": req["q"], "type": "search", "engine": "google"},
            "organic": [
                {
                    "title": "Serper hit",
                    "link": "https://example.org/s",
                    "snippet": "serper snippet",
                    "position": 1,
                    "date": "Mar 3, 2022",
                }
            ],
        }
    )


def _exa(h, path, q, body):
    if h.headers.get("x-api-key") != "exa-test":
        return h._json({"error": "Invalid API key"}, 401)
    h._json(
        {
            "requestId": "abc",
            "resolvedSearchType": "neural",
            "results": [
                {
                    "id": "https://example.org/e",
                    "title": "Exa hit",
                    "url": "https://example.org/e",
                    "publishedDate": "2022-01-01T00:00:00.000Z",
                    "author": "X",
                    "score": 0.3,
                    "highlights": ["first highlight", "second"],
                }
            ],
        }
    )


def _ddg(h, path, q, body):
    query = parse_qs(body.decode()).get("q", [""])[0]
    if query == "captcha":
        return h._send(
            202, "<html><body><form id='challenge-form'>anomaly detected</form></body></html>", "text/html"
        )
    page = """<html><body><div class="results">
<div class="result results_links results_links_deep web-result"><div class="links_main links_deep result__body">
<h2 class="result__title"><a rel="nofollow" class="result__a" href="//duckduckgo.com/l/?uddg=https%3A%2F%2Fexample.org%2Fddg%3Fa%3D1%26b%3D2&amp;rut=abc">DDG &amp; <b>first</b></a></h2>
<a class="result__snippet" href="//duckduckgo.com/l/?uddg=https%3A%2F%2Fexample.org%2Fddg">Snippet <b>one</b></a>
</div></div>
<div class="result results_links"><h2 class="result__title"><a rel="nofollow" class="result__a" href="https://example.com/direct">Second result</a></h2>
<a class="result__snippet" href="https://example.com/direct">Snippet two</a></div></div></body></html>"""
    h._send(200, page, "text/html; charset=utf-8")


def _europepmc(h, path, q, body):
    h._json(
        {
            "version": "6.9",
            "hitCount": 1234,
            "request": {"queryString": q["query"][0]},
            "resultList": {
                "result": [
                    {
                        "id": "33333333",
                        "source": "MED",
                        "pmid": "33333333",
                        "pmcid": "PMC7777777",
                        "doi": "10.1000/epmc.1",
                        "title": "Amine basicity in water.",
                        "authorString": "Smith J, Doe A.",
                        "journalInfo": {"journal": {"title": "Journal of Amines"}},
                        "pubYear": "2020",
                        "firstPublicationDate": "2020-05-01",
                        "abstractText": "We measured <i>pKa</i> values.",
                    }
                ]
            },
        }
    )


def _esearch(h, path, q, body):
    h._json(
        {
            "header": {"type": "esearch", "version": "0.3"},
            "esearchresult": {
                "count": "2",
                "retmax": "2",
                "retstart": "0",
                "idlist": ["31111111", "32222222"],
                "querytranslation": q["term"][0],
            },
        }
    )


def _esummary(h, path, q, body):
    ids = q["id"][0].split(",")
    result: dict[str, Any] = {"uids": ids}
    for i, uid in enumerate(ids):
        result[uid] = {
            "uid": uid,
            "pubdate": "2019 Mar 5",
            "sortpubdate": "2019/03/05 00:00",
            "source": "J Chem",
            "fulljournalname": "Journal of Chemistry",
            "title": f"PubMed paper {i}.",
            "authors": [{"name": "Lee K", "authtype": "Author"}],
            "articleids": [{"idtype": "pubmed", "value": uid}, {"idtype": "doi", "value": f"10.1000/pm.{i}"}],
        }
    h._json({"header": {"type": "esummary", "version": "0.3"}, "result": result})


def _crossref(h, path, q, body):
    h._json(
        {
            "status": "ok",
            "message-type": "work-list",
            "message": {
                "total-results": 99,
                "items": [
                    {
                        "DOI": "10.1000/cr.1",
                        "title": ["Crossref work"],
                        "author": [{"given": "Ann", "family": "Lee"}],
                        "container-title": ["Chem Letters"],
                        "issued": {"date-parts": [[2018, 7, 2]]},
                        "type": "journal-article",
                        "URL": "https://doi.org/10.1000/cr.1",
                    }
                ],
            },
        }
    )


def _openalex(h, path, q, body):
    h._json(
        {
            "meta": {"count": 5, "page": 1, "per_page": 1},
            "results": [
                {
                    "id": "https://openalex.org/W123",
                    "doi": "https://doi.org/10.1000/oa.1",
                    "title": "OpenAlex work",
                    "display_name": "OpenAlex work",
                    "publication_year": 2021,
                    "publication_date": "2021-09-09",
                    "ids": {
                        "openalex": "https://openalex.org/W123",
                        "pmid": "https://pubmed.ncbi.nlm.nih.gov/34444444",
                    },
                    "authorships": [{"author": {"display_name": "Kim Park"}}],
                    "primary_location": {"source": {"display_name": "Open Chem"}},
                    "abstract_inverted_index": {"Amines": [0], "are": [1], "bases.": [2]},
                }
            ],
        }
    )


def _arxiv(h, path, q, body):
    h._send(200, ARXIV_ATOM, "application/atom+xml; charset=utf-8")


def _pubchem(h, path, q, body):
    if path.endswith("/synonyms/JSON"):
        return _pubchem_synonyms(h, path, q, body)
    return _pubchem_props(h, path, q, body)


def _pubchem_props(h, path, q, body):
    form = parse_qs(body.decode())
    value = (form.get("name") or form.get("smiles") or form.get("cid") or form.get("inchikey") or [""])[0]
    if path.startswith("/pubchem/compound/name/") and "throttle" in value and farm_count(h, "throttle") == 1:
        return h._json({"Fault": {"Code": "PUGREST.ServerBusy", "Message": "Too many requests"}}, 503)
    if value in ("aspirin", "50-78-2", "CC(=O)OC1=CC=CC=C1C(=O)O", "2244", "throttle-aspirin"):
        return h._json(
            {
                "PropertyTable": {
                    "Properties": [
                        {
                            "CID": 2244,
                            "MolecularFormula": "C9H8O4",
                            "MolecularWeight": "180.16",
                            "SMILES": "CC(=O)OC1=CC=CC=C1C(=O)O",
                            "ConnectivitySMILES": "CC(=O)OC1=CC=CC=C1C(=O)O",
                            "InChI": "InChI=1S/C9H8O4/c1-6(10)13-8-5-3-2-4-7(8)9(11)12/h2-5H,1H3,(H,11,12)",
                            "InChIKey": "BSYNRYMUTXBXSQ-UHFFFAOYSA-N",
                            "IUPACName": "2-acetyloxybenzoic acid",
                            "XLogP": 1.2,
                            "ExactMass": "180.04225873",
                            "TPSA": 63.6,
                            "HBondDonorCount": 1,
                            "HBondAcceptorCount": 4,
                            "RotatableBondCount": 3,
                            "Charge": 0,
                            "HeavyAtomCount": 13,
                        }
                    ]
                }
            }
        )
    h._json({"Fault": {"Code": "PUGREST.NotFound", "Message": "No CID found"}}, 404)


def farm_count(h, key: str) -> int:
    return h.server.farm.count(key)


def _pubchem_synonyms(h, path, q, body):
    h._json(
        {
            "InformationList": {
                "Information": [
                    {"CID": 2244, "Synonym": ["aspirin", "ACETYLSALICYLIC ACID", "50-78-2", "Acenterine"]}
                ]
            }
        }
    )


UNIPROT_HBB = {
    "entryType": "UniProtKB reviewed (Swiss-Prot)",
    "primaryAccession": "P68871",
    "uniProtkbId": "HBB_HUMAN",
    "organism": {"scientificName": "Homo sapiens", "commonName": "Human", "taxonId": 9606},
    "proteinDescription": {"recommendedName": {"fullName": {"value": "Hemoglobin subunit beta"}}},
    "genes": [{"geneName": {"value": "HBB"}}],
    "comments": [{"commentType": "FUNCTION", "texts": [{"value": "Involved in oxygen transport."}]}],
    "sequence": {
        "value": (
            "MVHLTPEEKSAVTALWGKVNVDEVGGEALGRLLVVYPWTQRFFESFGDLSTPDAVMGNPKVKAHGKKVLGAFSDGLAHLD"
            "NLKGTFATLSELHCDKLHVDPENFRLLGNVLVCVLAHHFGKEFTPPVQAAYQKVVAGVANALAHKYH"
        ),
        "length": 147,
        "molWeight": 15998,
        "crc64": "X",
        "md5": "Y",
    },
}


def _uniprot(h, path, q, body):
    if path == "/uniprot/uniprotkb/P68871.json":
        return h._json(UNIPROT_HBB)
    if path == "/uniprot/uniprotkb/search":
        return h._json({"results": [UNIPROT_HBB]})
    h._send(404, json.dumps({"url": "x", "messages": ["Resource not found"]}))


def _rcsb_entry(h, path, q, body):
    if path.endswith("/1CRN"):
        return h._json(
            {
                "rcsb_id": "1CRN",
                "struct": {"title": "WATER STRUCTURE OF A HYDROPHOBIC PROTEIN"},
                "exptl": [{"method": "X-RAY DIFFRACTION"}],
                "rcsb_accession_info": {"initial_release_date": "1981-09-15T00:00:00+0000"},
                "rcsb_entry_info": {
                    "resolution_combined": [1.5],
                    "polymer_entity_count": 1,
                    "deposited_atom_count": 327,
                    "molecular_weight": 4.73,
                },
                "rcsb_primary_citation": {
                    "title": "Water structure of a hydrophobic protein",
                    "rcsb_journal_abbrev": "Nature",
                    "year": 1981,
                    "pdbx_database_id_doi": "10.1038/290107a0",
                },
            }
        )
    h._json({"status": 404, "message": "No data found for entry"}, 404)


CRN_CIF = "data_1CRN\n_entry.id 1CRN\nATOM 1 N N . THR A 1 1 ? 17.047 14.099 3.625 1.00 13.79 ? 1 THR A N 1\n"


def _rcsb_file(h, path, q, body):
    if path.endswith("/1CRN.cif"):
        return h._send(200, CRN_CIF, "chemical/x-cif")
    h._send(404, "not found", "text/plain")


def _page(h, path, q, body):
    h._send(200, ARTICLE_HTML, "text/html; charset=utf-8")


def _big(h, path, q, body):
    paras = "".join(
        f"<p>Paragraph {p}: " + " ".join(f"word{i}" for i in range(200)) + "</p>\n" for p in range(60)
    )
    h._send(200, "<html><body><article>" + paras + "</article></body></html>", "text/html")


def _pdf(h, path, q, body):
    h._send(200, PDF_BYTES, "application/pdf")


def _json_doc(h, path, q, body):
    h._json({"compound": "ethanol", "boiling_point_c": 78.37})


def _text(h, path, q, body):
    h._send(200, "plain notes\nsecond line\n", "text/plain; charset=utf-8")


def _flagged(h, path, q, body):
    h._send(200, FLAGGED_HTML, "text/html")


def _robots(h, path, q, body):
    h._send(200, "User-agent: *\nDisallow: /private/\n", "text/plain")


def _redirect(h, path, q, body):
    n = int(path.rsplit("/", 1)[-1])
    target = f"/redirect/{n - 1}" if n > 1 else "/page.html"
    h._send(302, "", "text/plain", {"Location": target})


def _redirect_to(h, path, q, body):
    h._send(302, "", "text/plain", {"Location": q["to"][0]})


def _slow(h, path, q, body):
    h.send_response(200)
    h.send_header("Content-Type", "text/plain")
    h.send_header("Content-Length", "1000")
    h.end_headers()
    try:
        for _ in range(100):
            h.wfile.write(b"x" * 10)
            h.wfile.flush()
            time.sleep(0.2)
    except OSError:
        pass


def _huge_declared(h, path, q, body):
    h.send_response(200)
    h.send_header("Content-Type", "text/plain")
    h.send_header("Content-Length", str(500 * 1024 * 1024))
    h.end_headers()


def _huge_chunked(h, path, q, body):
    h.send_response(200)
    h.send_header("Content-Type", "text/plain")
    h.send_header("Connection", "close")
    h.end_headers()
    try:
        for _ in range(400):
            h.wfile.write(b"y" * 16384)
    except OSError:
        pass
    h.close_connection = True


def _bomb(h, path, q, body):
    h._send(200, GZIP_BOMB, "text/plain", {"Content-Encoding": "gzip"})


def _gzip_ok(h, path, q, body):
    h._send(200, gzip.compress(b"compressed text body " * 10), "text/plain", {"Content-Encoding": "gzip"})


def _retry_after(h, path, q, body):
    if farm_count(h, path + str(q.get("k"))) == 1:
        return h._send(429, "slow down", "text/plain", {"Retry-After": "1"})
    h._send(200, "after retry", "text/plain")


def _drip(h, path, q, body):
    """One byte every ``every`` seconds (default 0.8): each read finishes inside a 1 s read timeout."""
    every = float(q.get("every", ["0.8"])[0])
    h.send_response(200)
    h.send_header("Content-Type", "text/plain")
    h.send_header("Content-Length", "100")
    h.end_headers()
    try:
        for _ in range(100):
            h.wfile.write(b"x")
            h.wfile.flush()
            time.sleep(every)
    except OSError:
        pass


def _always_503(h, path, q, body):
    h._send(503, "busy", "text/plain")


ROUTES = {
    "/brave/web/search": _brave,
    "/searxng/search": _searxng,
    "/tavily/search": _tavily,
    "/serper/search": _serper,
    "/exa/search": _exa,
    "/ddg/html/": _ddg,
    "/europepmc/search": _europepmc,
    "/ncbi/esearch.fcgi": _esearch,
    "/ncbi/esummary.fcgi": _esummary,
    "/crossref/works": _crossref,
    "/openalex/works": _openalex,
    "/arxiv/query": _arxiv,
    "/page.html": _page,
    "/big.html": _big,
    "/paper.pdf": _pdf,
    "/data.json": _json_doc,
    "/notes.txt": _text,
    "/flagged.html": _flagged,
    "/robots.txt": _robots,
    "/private/secret.html": _page,
    "/slow": _slow,
    "/huge-declared": _huge_declared,
    "/huge-chunked": _huge_chunked,
    "/bomb": _bomb,
    "/gzip": _gzip_ok,
    "/retry-after": _retry_after,
    "/always-503": _always_503,
    "/redirect-to": _redirect_to,
    "/drip": _drip,
}
PREFIX_ROUTES = {
    "/redirect/": _redirect,
    "/pubchem/compound/": _pubchem,
    "/uniprot/": _uniprot,
    "/rcsb_data/core/entry/": _rcsb_entry,
    "/rcsb_files/download/": _rcsb_file,
}


@pytest.fixture(scope="session")
def farm() -> Iterator[Farm]:
    f = Farm()
    f.server.farm = f  # type: ignore[attr-defined]
    yield f
    f.close()


TEST_HOSTS = (
    "provider.test=127.0.0.1,internal.test=10.0.0.5,meta.test=169.254.169.254,"
    "v6meta.test=fd00:ec2::254,mixed.test=127.0.0.1,mixed.test=192.168.1.10,mapped.test=::ffff:10.0.0.1"
)


@pytest.fixture
def web_env(spu_env, farm, monkeypatch) -> dict[str, str]:
    """Environment pointing every provider at the farm; returns it (for subprocesses)."""
    env = {
        "SPU_WEB_TEST_ALLOW": f"127.0.0.1:{farm.port}",
        "SPU_WEB_TEST_HOSTS": TEST_HOSTS,
        "SPU_BRAVE_BASE_URL": farm.url("/brave"),
        "SEARXNG_URL": farm.url("/searxng"),
        "SPU_TAVILY_BASE_URL": farm.url("/tavily"),
        "SPU_SERPER_BASE_URL": farm.url("/serper"),
        "SPU_EXA_BASE_URL": farm.url("/exa"),
        "SPU_DUCKDUCKGO_BASE_URL": farm.url("/ddg"),
        "SPU_EUROPEPMC_BASE_URL": farm.url("/europepmc"),
        "SPU_NCBI_BASE_URL": farm.url("/ncbi"),
        "SPU_CROSSREF_BASE_URL": farm.url("/crossref"),
        "SPU_OPENALEX_BASE_URL": farm.url("/openalex"),
        "SPU_ARXIV_BASE_URL": farm.url("/arxiv"),
        "SPU_PUBCHEM_BASE_URL": farm.url("/pubchem"),
        "SPU_UNIPROT_BASE_URL": farm.url("/uniprot"),
        "SPU_RCSB_DATA_BASE_URL": farm.url("/rcsb_data"),
        "SPU_RCSB_FILES_BASE_URL": farm.url("/rcsb_files"),
        "BRAVE_API_KEY": "brave-test",
        "TAVILY_API_KEY": "tvly-test",
        "SERPER_API_KEY": "serper-test",
        "EXA_API_KEY": "exa-test",
        "NCBI_API_KEY": "ncbi-secret",
        "SPU_CONTACT_EMAIL": "tests@example.org",
    }
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    monkeypatch.delenv("SPU_AUDIT_URL", raising=False)
    monkeypatch.delenv("SPU_AUDIT_TOKEN", raising=False)
    monkeypatch.delenv("SPU_POLICY", raising=False)
    monkeypatch.delenv("SPU_SEARCH_PROVIDER", raising=False)
    return {**spu_env, **env}


@pytest.fixture
def make_gateway(web_env, tmp_path):
    """``make_gateway(policy=None, **client_kw)``: an embedded gateway with a fast-retrying client."""
    from tools_server.web.client import AuditedClient, ProviderLimit
    from tools_server.web.gateway import Gateway
    from tools_server.web.guard import Guard

    made = []

    def make(policy=None, log: Path | None = None, **kw):
        opts = {
            "backoff_base_s": 0.05,
            "timeout_s": 5.0,
            "max_bytes": 2 * 1024 * 1024,
            "limits": {"arxiv": ProviderLimit(None, 1)},
            **kw,
        }
        client = AuditedClient(None, Guard.from_env(), **opts)
        gw = Gateway(
            log or tmp_path / "audit" / "audit.jsonl", policy=policy, workdir=tmp_path / "work", client=client
        )
        made.append(gw)
        return gw

    yield make
    for gw in made:
        gw.client.close()
