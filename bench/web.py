"""Audited web access: HTML-to-markdown time for a 1 MB page, and audit-log appends per second.

    .venv/bin/python bench/web.py [--repeats 3] [--appends 300] [--json]

* Conversion: ``html_to_markdown`` (trafilatura, the converter web_fetch uses) against markdownify alone
  (the fallback) on the same generated 1 MB article page; the ratio is trafilatura / markdownify.
* Detector: time to scan the same page for a full policy (DOI, PMID, PMC id, title), and the same page
  with accented words and look-alike letters (Cyrillic, Greek) in every paragraph, where every word of it is
  compared by its Unicode confusable skeleton; each as a ratio over the markdownify conversion of the page
  (the least a fetch of it costs anyway).
* Audit log: appends per second with fsync (what the tools do) against appends without fsync on the
  same disk; the ratio says what durability costs.

The audit log at 1 MB to 1 GB (start-up, appends, verify) is ``bench/audit_log.py``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def make_page(target_bytes: int = 1024 * 1024) -> str:
    """A news-or-paper-like page: navigation, many varied paragraphs, tables and links, scripts."""
    head = (
        "<!doctype html><html><head><title>Benchmark article</title><script>"
        + "var x = 1;" * 200
        + "</script><style>p{margin:0}</style></head><body>"
        "<nav>" + " | ".join(f"<a href='/s{i}'>Section {i}</a>" for i in range(40)) + "</nav><article>"
    )
    parts = [head]
    size = len(head)
    i = 0
    while size < target_bytes:
        para = (
            f"<h2>Result {i}</h2><p>The measured rate constant for substrate {i} was {0.1 * i:.2f} per "
            "second "
            f"in methanol at 298 K, which is <b>{i % 7}</b> times faster than in toluene; see "
            f"<a href='https://example.org/ref{i}'>reference {i}</a> for the full protocol and the "
            f"activation parameters derived from an Eyring analysis over five temperatures.</p>"
            f"<table><tr><td>T{i}</td><td>{i * 3}</td></tr><tr><td>k{i}</td><td>{i * 0.5}</td></tr></table>"
        )
        parts.append(para)
        size += len(para)
        i += 1
    parts.append("</article><footer>Copyright</footer></body></html>")
    return "".join(parts)


def _time(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def bench_conversion(repeats: int) -> dict:
    from tools_server.web.detector import Detector
    from tools_server.web.fetch import html_to_markdown, markdownify_page
    from tools_server.web.policy import Policy

    page = make_page()
    text, converter = html_to_markdown(page)
    trafilatura_s = _time(lambda: html_to_markdown(page), repeats)
    markdownify_s = _time(lambda: markdownify_page(page), repeats)
    detector = Detector(
        Policy.from_dict(
            {
                "doi": "10.1021/jacs.5b01234",
                "pmid": "26012345",
                "pmcid": "PMC4512345",
                "title": "Enantioselective synthesis of chiral amines by iridium-catalysed "
                "asymmetric hydrogenation",
            }
        )
    )
    detector.scan("warm-up: the skeleton tables are built on first use")
    scan_s = _time(lambda: detector.scan(page), repeats)
    # accents and look-alikes (a Cyrillic ie, a Greek omicron) in every paragraph: the words that need ICU
    foreign = page.replace("methanol", "m\u00e9thanol").replace("second", "s\u0435c\u03bfnd")
    scan_foreign_s = _time(lambda: detector.scan(foreign), repeats)
    return {
        "page_bytes": len(page.encode()),
        "converter": converter,
        "markdown_chars": len(text),
        "trafilatura_s": trafilatura_s,
        "markdownify_s": markdownify_s,
        "ratio_trafilatura_over_markdownify": trafilatura_s / markdownify_s,
        "detector_scan_s": scan_s,
        "detector_scan_lookalikes_s": scan_foreign_s,
        "ratio_scan_over_markdownify": scan_s / markdownify_s,
        "ratio_scan_lookalikes_over_markdownify": scan_foreign_s / markdownify_s,
    }


def bench_audit(appends: int) -> dict:
    from spu_common.audit_log import verify
    from tools_server.web.audit import AuditLog

    record = {
        "kind": "http",
        "tool": "web_fetch",
        "url": "https://example.org/page",
        "status": 200,
        "bytes": 123456,
        "content_sha256": "0" * 64,
        "latency_ms": 12.5,
    }
    out = {}
    with tempfile.TemporaryDirectory(dir=Path.cwd()) as tmp:  # the working disk, not a tmpfs
        for fsync, n in ((True, appends), (False, appends * 10)):
            log = AuditLog(Path(tmp) / f"fsync-{fsync}.jsonl", fsync=fsync)
            t0 = time.perf_counter()
            for _ in range(n):
                log.append(record)
            elapsed = time.perf_counter() - t0
            assert verify(log.path).count == n
            out["fsync" if fsync else "no_fsync"] = n / elapsed
    out["ratio_fsync_over_no_fsync"] = out["fsync"] / out["no_fsync"]
    return {"appends_per_s": out}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--appends", type=int, default=300)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    conv = bench_conversion(args.repeats)
    audit = bench_audit(args.appends)["appends_per_s"]
    if args.json:
        print(json.dumps({"conversion": conv, "audit": audit}, indent=2))
        return
    print(f"HTML to markdown, {conv['page_bytes'] / 1e6:.2f} MB page (median of {args.repeats}):")
    print(
        f"  trafilatura {conv['trafilatura_s']:.2f} s, markdownify (baseline) {conv['markdownify_s']:.2f} s, "
        f"ratio {conv['ratio_trafilatura_over_markdownify']:.2f}"
    )
    print(
        f"  detector scan of the same page {conv['detector_scan_s']:.3f} s "
        f"(ratio over markdownify {conv['ratio_scan_over_markdownify']:.2f}); with accents and look-alike "
        f"letters in every paragraph {conv['detector_scan_lookalikes_s']:.3f} s "
        f"(ratio {conv['ratio_scan_lookalikes_over_markdownify']:.2f})"
    )
    print("Audit log appends per second:")
    print(
        f"  with fsync {audit['fsync']:.0f}/s, without (baseline) {audit['no_fsync']:.0f}/s, "
        f"ratio {audit['ratio_fsync_over_no_fsync']:.3f}"
    )


if __name__ == "__main__":
    main()
