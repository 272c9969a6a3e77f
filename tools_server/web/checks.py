"""The ``spu doctor`` checks of this domain: a tiny real computation per engine, compared with a known value.

trafilatura extracts the main text of a small page.
"""

from tools_server.plugin import DoctorCheck

CHECKS: tuple[DoctorCheck, ...] = (
    DoctorCheck(
        "trafilatura",
        "trafilatura (page text for web_fetch)",
        """
            import trafilatura, importlib.metadata as md
            para = ("The melting point of the compound was measured three times by differential "
                    "scanning calorimetry.")
            article = f"<article><h1>Results</h1><p>{para}</p><p>{para}</p></article>"
            html = f"<html><body><nav>menu</nav>{article}</body></html>"
            text = trafilatura.extract(html) or ""
            assert "differential scanning calorimetry" in text, f"extracted {text[:80]!r}"
            report(version=md.version("trafilatura"), detail="main text extracted from a page")
            """,
        "pip install 'spu-scaffold[web]' (trafilatura and lxml_html_clean)",
    ),
)
