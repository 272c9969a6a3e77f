"""`spu view` pages in a real headless Chromium: a recorded run, a runs directory with `spu report` and
`spu analyze` outputs, and empty, truncated and malformed run directories.

Each test loads the page the way a user does (the `--out` file from disk, or the served page on
127.0.0.1), checks the elements a reader needs, checks that no request left 127.0.0.1, and saves a
screenshot.
"""

from __future__ import annotations

import http.server
import json
import shutil
import subprocess
import threading
from pathlib import Path

import pytest
from view_testing import SPU, spu

pytestmark = pytest.mark.slow

DEMO_TOOLS = ["system_info", "chem_parse", "python", "ranking_check", "submit_rankings"]


def write_html(path: Path, out: Path) -> Path:
    done = spu("view", str(path), "--out", str(out))
    assert done.returncode == 0, done.stderr
    return out


def shot(tab, artifacts: Path, name: str) -> None:
    path = artifacts / f"{name}.png"
    tab.page.screenshot(path=str(path), full_page=True)
    assert path.stat().st_size > 5000
    print(f"screenshot: {path}")


def check_run_page(tab) -> None:
    page = tab.page
    page.wait_for_selector("[data-testid=run-page]")
    assert "aromatic-acidity" in page.inner_text("h1")
    assert page.inner_text("[data-testid=exit-status]") == "submitted"
    # the shipped recording's Hammett order matches the handbook values (tests/agent/test_end_to_end.py)
    assert page.inner_text("[data-testid=score] .v").startswith("1.000")
    assert page.inner_text("[data-testid=calls] .v") == "5"
    names = page.eval_on_selector_all(
        "[data-testid=rows] details.call summary span:nth-child(4)", "els => els.map(e => e.textContent)"
    )
    assert names == DEMO_TOOLS
    legend = page.inner_text("[data-testid=activity] .legend")
    assert "chemistry (1)" in legend and "drafting / submission (1)" in legend and "code (1)" in legend
    # expand chem_parse: its arguments and the live tool's output (16 structures parsed) with provenance
    page.locator("[data-testid=rows] details.call", has_text="chem_parse").locator("summary").click()
    body = page.inner_text("[data-testid=rows] details[open] .body")
    assert '"n_ok": 16' in body.replace('"n_ok":16', '"n_ok": 16')
    assert "provenance" in body
    page.click("[data-testid=tab-drafts]")
    assert page.inner_text("[data-testid=draft-scores]").count("draft-001") == 1
    assert "1.000" in page.inner_text("[data-testid=draft-scores]")
    assert page.locator(".grid").count() == 2  # groups g1 and g2 side by side over the drafts
    page.click("[data-testid=tab-sources]")
    assert "No web source" in page.inner_text("[data-testid=sources]")
    page.click("[data-testid=tab-report]")
    assert "Run record" in page.inner_text("[data-testid=report]")
    page.click("[data-testid=tab-timeline]")
    assert tab.errors == []


def test_the_offline_file_shows_the_recorded_run(tab, demo_run, artifacts, tmp_path):
    html = write_html(demo_run, tmp_path / "demo.html")
    tab.page.goto(html.as_uri())
    check_run_page(tab)
    shot(tab, artifacts, "run-page-file")
    assert tab.off_loopback() == []
    assert all(url.startswith(("file://", "data:")) for url in tab.requests)


def test_the_served_page_shows_the_recorded_run_from_127_0_0_1(tab, demo_run, artifacts):
    proc = subprocess.Popen(
        [str(SPU), "view", str(demo_run), "--port", "0", "--json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        url = json.loads(proc.stdout.readline())["url"]
        assert url.startswith("http://127.0.0.1:")
        tab.page.goto(url)
        check_run_page(tab)
        shot(tab, artifacts, "run-page-served")
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    assert tab.requests and tab.off_loopback() == []


def make_runs_dir(demo_run: Path, root: Path) -> Path:
    """Two configurations on the demo task: the replayed run, and a run that only left its fallback."""
    runs = root / "runs"
    shutil.copytree(demo_run, runs / "replay_demo" / "demo-aromatic-acidity" / "run-1")
    fallback = runs / "fallback" / "demo-aromatic-acidity" / "run-1"
    fallback.mkdir(parents=True)
    from environment.demo_tasks import demo_task_dir
    from spu_common.submission import fallback_submission, write_submission_atomic
    from spu_common.task import load_task

    write_submission_atomic(
        fallback / "rankings.json", fallback_submission(load_task(demo_task_dir("aromatic-acidity")))
    )
    return runs


def make_analyze_dir(folder: Path) -> None:
    """What `spu analyze --out` writes (its documented files), made here since that command is separate."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    folder.mkdir(parents=True)
    (folder / "activities.csv").write_text(
        "run,step,t_norm,category,tool\nreplay_demo/demo-aromatic-acidity/run-1,1,0.1,chemistry,chem_parse\n"
    )
    (folder / "drafts.csv").write_text(
        "run,draft_index,step,t_norm,score\nreplay_demo/demo-aromatic-acidity/run-1,1,5,0.9,1.0\n"
    )
    (folder / "agreement.csv").write_text(
        "task,group,config_a,config_b,scope,n_pairs,mean_spearman\ndemo-aromatic-acidity,g1,fallback,replay_demo,between,1,0.125\n"
    )
    (folder / "summary.md").write_text(
        "# Trajectory analysis\n\n| runs | drafts |\n|---|---|\n| 2 | 1 |\n\n![activities](activities.png)\n"
    )
    fig, ax = plt.subplots(figsize=(4, 2))
    ax.bar(["chemistry", "code"], [1, 1])
    fig.savefig(folder / "activities.png", dpi=60)
    plt.close(fig)


def test_the_runs_page_shows_scores_against_chance_with_report_and_analyze_figures(
    tab, demo_run, artifacts, tmp_path
):
    from environment.report import build_report

    runs = make_runs_dir(demo_run, tmp_path)
    build_report(runs, n_boot=200, draws=500)
    make_analyze_dir(runs / "_analyze")
    html = write_html(runs, tmp_path / "runs.html")
    tab.page.goto(html.as_uri())
    page = tab.page
    page.wait_for_selector("[data-testid=runs-page]")
    overview = page.inner_text("[data-testid=overview]")
    assert "aromatic-acidity" in overview and "fallback" in overview and "replay_demo" in overview
    assert "1.000" in overview  # the replayed run
    assert "(unknown task)" not in overview
    # the fallback (presented order) scores below chance; the replayed run above it
    assert "1/1 tasks scored · 0/1 runs above chance" in overview
    assert "1/1 tasks scored · 1/1 runs above chance" in overview
    assert page.locator("[data-testid=output-report] img[alt='scores_vs_chance.png']").count() == 1
    assert page.locator("[data-testid=output-analyze] img[alt='activities.png']").count() == 1
    assert "mean_spearman" in page.inner_text("[data-testid=output-analyze]")
    shot(tab, artifacts, "runs-page")
    page.click("[data-testid=run-list] a >> text=replay_demo/demo-aromatic-acidity/run-1")
    check_run_page(tab)
    page.click("text=← all runs")
    page.wait_for_selector("[data-testid=runs-page]")
    page.click("[data-testid=run-list] a >> text=fallback/demo-aromatic-acidity/run-1")
    page.click("[data-testid=tab-drafts]")
    assert "The agent accepted no draft" in page.inner_text("[data-testid=drafts-view]")
    assert page.inner_text("[data-testid=exit-status]") == "unfinished"  # no run.json, no trajectory
    assert tab.off_loopback() == [] and tab.errors == []


def test_without_report_or_analyze_the_runs_page_says_how_to_add_them(tab, demo_run, tmp_path):
    runs = make_runs_dir(demo_run, tmp_path)
    tab.page.goto(write_html(runs, tmp_path / "bare.html").as_uri())
    assert "spu report" in tab.page.inner_text("[data-testid=no-outputs]")
    assert tab.page.locator("[data-testid=overview]").count() == 1
    assert tab.errors == []


def broken_runs(demo_run: Path, root: Path) -> dict[str, Path]:
    empty = root / "empty"
    empty.mkdir(parents=True)
    truncated = root / "truncated"
    shutil.copytree(demo_run, truncated)
    text = (truncated / "trajectory.jsonl").read_text()
    cut_at = text.rindex('"type": "tool_result"')  # the submit_rankings result
    (truncated / "trajectory.jsonl").write_text(text[: cut_at + 40])  # mid-record, as a killed run leaves it
    (truncated / "run.json").unlink()
    malformed = root / "malformed"
    shutil.copytree(demo_run, malformed)
    lines = (malformed / "trajectory.jsonl").read_text().splitlines()
    lines.insert(3, "this is not json")
    lines.insert(6, "[1, 2, 3]")
    (malformed / "trajectory.jsonl").write_text("\n".join(lines) + "\n")
    (malformed / "run.json").write_text('{"exit_status": "subm')
    (malformed / "drafts" / "draft-001.json").write_text("")
    (malformed / "sources.json").write_text("{]")
    return {"empty": empty, "truncated": truncated, "malformed": malformed}


def test_empty_truncated_and_malformed_runs_give_pages_that_say_what_is_wrong(
    tab, demo_run, artifacts, tmp_path
):
    dirs = broken_runs(demo_run, tmp_path / "broken")
    page = tab.page

    page.goto(write_html(dirs["empty"], tmp_path / "empty.html").as_uri())
    text = page.inner_text("[data-testid=problems]")
    assert "holds no agent run" in text and "spu agent run --out" in text
    shot(tab, artifacts, "empty-run")

    page.goto(write_html(dirs["truncated"], tmp_path / "truncated.html").as_uri())
    page.wait_for_selector("[data-testid=run-page]")
    assert "torn write" in page.inner_text("[data-testid=run-problems]")
    assert page.inner_text("[data-testid=exit-status]") == "unfinished"
    # every record written before the cut: system, task, 4 model turns, 4 tool results (not run_start)
    assert page.locator("[data-testid=rows] details").count() == 10
    assert page.locator("[data-testid=rows] details.call").count() == 4
    shot(tab, artifacts, "truncated-run")

    page.goto(write_html(dirs["malformed"], tmp_path / "malformed.html").as_uri())
    page.wait_for_selector("[data-testid=run-page]")
    problems = page.inner_text("[data-testid=run-problems]")
    assert "trajectory.jsonl lines 4, 7" in problems
    assert "run.json" in problems and "not valid JSON" in problems
    assert "drafts/draft-001.json" in problems and "is empty" in problems
    assert "sources.json" in problems
    assert page.inner_text("[data-testid=exit-status]") == "submitted"  # from the trajectory's run_end
    shot(tab, artifacts, "malformed-run")
    assert tab.errors == [] and tab.off_loopback() == []


class CountingServer:
    """A loopback HTTP server that counts requests: the page must never call it."""

    def __init__(self) -> None:
        self.hits: list[str] = []
        hits = self.hits

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                hits.append(self.path)
                self.send_response(204)
                self.end_headers()

            def log_message(self, *args) -> None:
                return

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def test_markup_in_tool_output_is_shown_as_text_and_loads_nothing(tab, demo_run, tmp_path):
    watcher = CountingServer()
    try:
        run = tmp_path / "hostile"
        shutil.copytree(demo_run, run)
        bait = (
            f'<img src="{watcher.url}/img"><script>fetch("{watcher.url}/js")</script>'
            f'</script><link rel=stylesheet href="{watcher.url}/css">'
        )
        record = {
            "type": "tool_result",
            "time": "2026-01-01T00:00:00Z",
            "elapsed_s": 1.0,
            "step": 1,
            "tool_call_id": "x",
            "name": "web_fetch",
            "arguments": {"url": f"{watcher.url}/page"},
            "content": bait,
            "is_error": False,
            "wall_s": 0.1,
        }
        with open(run / "trajectory.jsonl", "a") as handle:
            handle.write(json.dumps(record) + "\n")
        (run / "report.md").write_text(f"# Report\n\n![x]({watcher.url}/md.png)\n\n{bait}\n")
        tab.page.goto(write_html(run, tmp_path / "hostile.html").as_uri())
        page = tab.page
        page.wait_for_selector("[data-testid=run-page]")
        page.locator("[data-testid=rows] details.call", has_text="web_fetch").locator("summary").click()
        assert "<script>fetch(" in page.inner_text("[data-testid=rows] details[open] .body")
        page.click("[data-testid=tab-report]")
        page.wait_for_timeout(300)
        assert watcher.hits == []
        assert tab.off_loopback() == [] and all(not u.startswith(watcher.url) for u in tab.requests)
    finally:
        watcher.close()


def test_the_filter_searches_outputs_and_the_sources_tab_shows_outcomes(tab, demo_run, artifacts, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(demo_run, run)
    (run / "sources.json").write_text(
        json.dumps(
            {
                "schema": "spu.sources/1",
                "audit_log": {"file": "audit.jsonl", "records": 4, "head": "0" * 64, "verified": True},
                "searches": [
                    {
                        "seq": 0,
                        "tool": "web_search",
                        "provider": "searxng",
                        "query": "pKa of benzoic acids",
                        "n_results": 3,
                    }
                ],
                "sources": [
                    {
                        "seq": 1,
                        "tool": "web_fetch",
                        "url": "https://example.org/table",
                        "status": 200,
                        "title": "Table",
                        "flagged": False,
                    },
                    {
                        "seq": 2,
                        "tool": "web_fetch",
                        "url": "https://example.org/source-study",
                        "status": 200,
                        "flagged": True,
                    },
                ],
                "flags": [{"seq": 2, "tool": "web_fetch", "kinds": ["doi"]}],
            }
        )
    )
    tab.page.goto(write_html(run, tmp_path / "run.html").as_uri())
    page = tab.page
    page.fill("[data-testid=filter]", "n_molecules")  # only in chem_parse's output, inflated on demand
    page.wait_for_function("document.querySelector('[data-testid=rows]').dataset.filtered")
    assert page.eval_on_selector_all("[data-testid=rows] details", "els => els.map(e => e.className)") == [
        "call"
    ]
    assert "chem_parse" in page.inner_text("[data-testid=rows]")
    page.click("[data-testid=tab-sources]")
    text = page.inner_text("[data-testid=sources]")
    assert "pKa of benzoic acids" in text and "chain verified" in text
    assert "fetched: 1 · withheld: 1" in text
    assert page.inner_text(".outcome-withheld") == "withheld by the detector"
    shot(tab, artifacts, "sources")
    assert tab.errors == [] and tab.off_loopback() == []


def odd_calls_run(root: Path) -> Path:
    """A run whose one model reply came after a 429 and carried a malformed and a refused call."""
    run = root / "odd-calls"
    run.mkdir(parents=True)
    calls = [
        {
            "id": "c1",
            "name": "bash",
            "arguments": None,
            "arguments_raw": '{"command": "ls"',
            "error": "not JSON",
        },
        {"id": "c2", "name": "rank_everything", "arguments": {"all": True}, "arguments_raw": '{"all": true}'},
    ]
    retry = {"attempt": 1, "status": 429, "error": "HTTP 429: slow down", "body": '{"error": "slow down"}'}
    records = [
        {
            "type": "run_start",
            "elapsed_s": 0,
            "task_id": "t",
            "model": "openai:m",
            "tools": [{"name": "bash"}],
        },
        {
            "type": "model_turn",
            "elapsed_s": 2,
            "step": 1,
            "message": {"role": "assistant", "content": "", "tool_calls": calls},
            "attempts": 2,
            "retries": [{**retry, "wait_s": 1.0}],
        },
        *(
            {
                "type": "tool_result",
                "elapsed_s": 3,
                "step": 1,
                "tool_call_id": c["id"],
                "name": c["name"],
                "arguments": c["arguments"],
                "content": "not run",
                "is_error": True,
                "wall_s": 0.0,
            }
            for c in calls
        ),
    ]
    (run / "trajectory.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    return run


def test_retries_and_odd_calls_show_their_raw_payload(tab, artifacts, tmp_path):
    page = tab.page
    page.goto(write_html(odd_calls_run(tmp_path), tmp_path / "odd.html").as_uri())
    page.wait_for_selector("[data-testid=run-page]")
    retry = page.locator("[data-testid=rows] details.retry")
    assert retry.count() == 1 and "HTTP 429" in retry.inner_text()
    retry.locator("summary").click()
    assert "slow down" in page.inner_text("[data-testid=rows] details.retry .body")
    for flag, raw in (("malformed", '{"command": "ls"'), ("refused", "rank_everything")):
        row = page.locator("[data-testid=rows] details.call", has_text=flag)
        row.locator("summary").click()
        body = row.locator(".body").inner_text()
        assert "raw call (as the model sent it)" in body and raw in body
    shot(tab, artifacts, "odd-calls")
    assert tab.errors == [] and tab.off_loopback() == []
