"""What `spu view` reads from run directories, without a browser: categories, broken files, sources,
grading of drafts, the self-contained HTML and the command's errors."""

from __future__ import annotations

import base64
import gzip
import json
import re
import shutil
from pathlib import Path

import pytest
from view_testing import spu

from environment.view.categories import CATEGORIES, TOOL_CATEGORY, category_of
from environment.view.collect import ViewError, collect
from environment.view.page import DETAIL_CHUNK, render_page
from environment.view.runs import MAX_TEXT, cut


def decode_scripts(html: str) -> dict[str, object]:
    """The page's data blocks, inflated: {'spu-data': {...}, 'spu-detail-0-0': [...], ...}."""
    blocks = re.findall(r'<script type="application/octet-stream" id="([^"]+)"[^>]*>([^<]*)</script>', html)
    return {key: json.loads(gzip.decompress(base64.b64decode(text))) for key, text in blocks}


def test_every_tool_of_the_server_and_agent_has_a_category_from_the_table():
    assert set(TOOL_CATEGORY.values()) <= set(CATEGORIES)
    assert category_of("dft_run") == "quantum" and category_of("md_analyze") == "md"
    assert category_of("pubchem_lookup") == "database" and category_of("web_fetch") == "literature"
    assert category_of("submit_rankings") == "submission" and category_of("python") == "code"
    assert category_of("chem_new_thing") == "chemistry"  # by prefix, for tools added later
    assert category_of("zinc_lookup") == "database"
    assert category_of("mystery") == "other"


def test_long_texts_are_cut_head_and_tail_with_the_size_said():
    text = "A" * 10_000 + "END"
    out = cut(text)
    assert len(out) < MAX_TEXT + 100 and out.startswith("AAA") and out.endswith("END")
    assert "characters cut of 10,003" in out


def test_the_recorded_run_is_read_and_graded(demo_run):
    data = collect(demo_run)
    assert data["single_run"] and data["problems"] == []
    run = data["runs"][0]
    assert run["problems"] == []
    assert run["task_id"] == "demo-aromatic-acidity"
    assert run["ending"]["exit_status"] == "submitted"
    calls = [r for r in run["rows"] if r["k"] == "call"]
    assert [(r["n"], r["c"]) for r in calls] == [
        ("system_info", "jobs"),
        ("chem_parse", "chemistry"),
        ("python", "code"),
        ("ranking_check", "ranking"),
        ("submit_rankings", "submission"),
    ]
    assert json.loads(calls[1]["p"])["tool"] == "chem_parse"  # provenance from the structured result
    assert run["score"]["score"] == pytest.approx(1.0)
    assert run["drafts"][0]["score"]["groups"] == {"g1": pytest.approx(1.0), "g2": pytest.approx(1.0)}
    # chance threshold of the 16-experiment demo: the same figure `spu chance` prints (2,000 draws, seed 0)
    from environment.chance import chance_threshold
    from environment.demo_tasks import demo_answers_path, demo_task_dir
    from spu_common.task import load_answers, load_task

    expected = chance_threshold(
        load_task(demo_task_dir("aromatic-acidity")),
        load_answers(demo_answers_path("aromatic-acidity")),
        draws=2000,
    )
    assert run["chance"]["chance_threshold"] == pytest.approx(expected["chance_threshold"])
    assert run["truth"]["g1"]["e0ea"] == 1  # lowest measured pKa of group 1 (2-nitrobenzoic acid)


def test_without_answers_runs_are_shown_but_not_graded(demo_run, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(demo_run, run)
    start = json.loads((run / "trajectory.jsonl").read_text().splitlines()[0])
    assert start["type"] == "run_start"
    text = (run / "trajectory.jsonl").read_text().replace("demo-aromatic-acidity", "unknown-task")
    text = text.replace(json.dumps(start["task_dir"])[1:-1], "nowhere")
    (run / "trajectory.jsonl").write_text(text)
    (run / "run.json").write_text(
        (run / "run.json").read_text().replace("demo-aromatic-acidity", "unknown-task")
    )
    data = collect(run)
    assert "score" not in data["runs"][0]
    assert data["runs"][0]["grading"].startswith("not graded: the task was not found")


def test_sources_say_what_was_fetched_withheld_and_refused(demo_run, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(demo_run, run)
    sources = {
        "schema": "spu.sources/1",
        "audit_log": {"file": "audit.jsonl", "records": 9, "head": "0" * 64, "verified": True},
        "searches": [
            {
                "seq": 1,
                "ts": "t",
                "tool": "web_search",
                "provider": "searxng",
                "query": "benzoic acid pKa",
                "n_results": 5,
            }
        ],
        "sources": [
            {
                "seq": 3,
                "ts": "t",
                "tool": "web_fetch",
                "url": "https://example.org/a",
                "final_url": "https://example.org/a",
                "status": 200,
                "content_type": "text/html",
                "title": "Acidity table",
                "flagged": False,
            },
            {
                "seq": 5,
                "ts": "t",
                "tool": "web_fetch",
                "url": "https://example.org/paper",
                "status": 200,
                "flagged": True,
            },
        ],
        "flags": [{"seq": 5, "ts": "t", "tool": "web_fetch", "kinds": ["doi"]}],
    }
    (run / "sources.json").write_text(json.dumps(sources))
    audit = run / "spu-work" / "audit"
    audit.mkdir(parents=True, exist_ok=True)
    (audit / "audit.jsonl").write_text(
        json.dumps(
            {
                "kind": "http",
                "seq": 7,
                "tool": "web_fetch",
                "url": "http://10.0.0.1/x",
                "error": "url_refused",
                "reason": "private address",
            }
        )
        + "\n"
    )
    items = collect(run)["runs"][0]["sources"]["items"]
    assert [(i["outcome"], i["url"]) for i in items] == [
        ("fetched", "https://example.org/a"),
        ("withheld", "https://example.org/paper"),
        ("refused", "http://10.0.0.1/x"),
    ]
    assert items[2]["detail"] == "private address"
    assert items[1]["detail"].endswith("identifier kinds found: doi")


def test_broken_files_are_named_with_what_is_wrong(tmp_path):
    run = tmp_path / "run"
    (run / "drafts").mkdir(parents=True)
    (run / "trajectory.jsonl").write_text(
        '{"type": "run_start", "elapsed_s": 0, "task_id": "x"}\nnot json\n{"no_type": 1}\n{"type": "model_tu'
    )
    (run / "run.json").write_text("")
    (run / "drafts" / "draft-001.json").write_text('{"rankings": "nope"}')
    problems = {p["where"]: p for p in collect(run)["runs"][0]["problems"]}
    assert "not a trajectory record" in problems["trajectory.jsonl lines 2, 3"]["message"]
    assert "torn write" in problems["trajectory.jsonl line 4"]["message"]
    assert problems["run.json"]["message"] == "is empty"
    assert "no `rankings`" in problems["drafts/draft-001.json"]["message"]


def test_an_empty_directory_is_a_page_with_an_error_and_a_missing_one_a_usage_error(tmp_path):
    data = collect(tmp_path)
    assert data["runs"] == [] and "holds no agent run" in data["problems"][0]["message"]
    with pytest.raises(ViewError):
        collect(tmp_path / "absent")
    done = spu("view", str(tmp_path / "absent"), "--out", str(tmp_path / "x.html"))
    assert done.returncode == 2 and "does not exist" in done.stderr and "hint:" in done.stderr
    assert "Traceback" not in done.stderr


def test_the_html_file_is_self_contained_and_holds_every_output(demo_run, tmp_path):
    out = tmp_path / "page.html"
    done = spu("view", str(demo_run), "--out", str(out), "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["runs"] == 1
    html = out.read_text()
    assert "default-src 'none'" in html  # the browser itself refuses any request the page might attempt
    assert not re.search(r"<(script|link|img|iframe)[^>]+(src|href)=", html)  # nothing loaded from elsewhere
    blocks = decode_scripts(html)
    data = blocks["spu-data"]
    rows = data["runs"][0]["rows"]
    assert all("o" not in r for r in rows)  # outputs live in the detail blocks
    details = blocks["spu-detail-0-0"]
    chem = next(r for r in rows if r.get("n") == "chem_parse")
    assert details[chem["i"]]["o"].startswith('{"n_molecules":16,"n_ok":16,')  # the live tool's output
    assert "characters cut of" in details[chem["i"]]["o"]  # long, so cut head and tail


def test_markup_in_run_files_cannot_close_the_data_element():
    data = {
        "title": "t</script><script>alert(1)</script>",
        "path": "p",
        "generated": "now",
        "single_run": True,
        "problems": [{"level": "error", "where": "<b>x</b>", "message": "</script>", "hint": ""}],
        "runs": [{"rows": [{"k": "call", "o": "</script><!--"}] * (DETAIL_CHUNK + 1)}],
        "overview": None,
        "outputs": [],
        "categories": {},
    }
    html = render_page(data)
    assert html.count("</script>") == html.count("<script")  # every element closes where it should
    assert "&lt;/script&gt;" in html and "<b>x</b>" not in html
    blocks = decode_scripts(html)
    assert set(blocks) == {"spu-data", "spu-detail-0-0", "spu-detail-0-1"}
    assert blocks["spu-detail-0-1"] == [{"o": "</script><!--"}]


def test_a_taken_port_is_a_usage_error_with_a_hint(demo_run):
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        done = spu("view", str(demo_run), "--port", str(taken.getsockname()[1]))
    assert done.returncode == 2 and "in use" in done.stderr and "--port 0" in done.stderr


def test_a_report_directory_finds_the_runs_beside_it(demo_run, tmp_path):
    from environment.report import build_report

    runs = tmp_path / "runs"
    shutil.copytree(demo_run, runs / "replay" / "demo-aromatic-acidity")
    build_report(runs, n_boot=200, draws=500)
    data = collect(runs / "_report")
    assert [o["kind"] for o in data["outputs"]] == ["report"]
    assert [r["label"] for r in data["runs"]] == ["replay/demo-aromatic-acidity"]
    summary = json.loads((runs / "_report" / "summary.json").read_text())
    # the runs page takes the report's chance threshold, so both say the same
    assert (
        data["overview"]["tasks"][0]["chance"]["chance_threshold"] == summary["tasks"][0]["chance_threshold"]
    )
    assert [f["name"] for f in data["outputs"][0]["figures"]] == [
        "scores_vs_chance.png",
        "configuration_means.png",
    ]
    assert Path(data["path"]).name == "_report"


def test_the_viewer_imports_neither_the_tool_server_nor_the_agent(demo_run):
    import subprocess
    import sys

    code = (
        "import sys\n"
        "from environment.view.collect import collect\n"
        "from environment.view.page import render_page\n"
        "import environment.view.cli, environment.view.server\n"
        f"render_page(collect({str(demo_run)!r}))\n"
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'tools_server', 'scaffold'}))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_a_report_elsewhere_is_shown_alone_with_a_note(demo_run, tmp_path):
    from environment.report import build_report

    runs = tmp_path / "runs"
    shutil.copytree(demo_run, runs / "replay" / "demo-aromatic-acidity")
    (tmp_path / "elsewhere").mkdir()
    build_report(runs, tmp_path / "elsewhere" / "report", n_boot=200, draws=500)
    shutil.copytree(demo_run, tmp_path / "elsewhere" / "unrelated-run")  # not a configuration of the report
    data = collect(tmp_path / "elsewhere" / "report")
    assert data["runs"] == [] and [o["kind"] for o in data["outputs"]] == ["report"]
    assert "its runs were not found" in data["problems"][0]["message"]
    # an analyze output beside the runs directory finds it by the run paths in its CSV files
    analysis = tmp_path / "analysis"
    analysis.mkdir()
    (analysis / "activities.csv").write_text(
        "run,step,t_norm,category,tool\nreplay/demo-aromatic-acidity,1,0.1,chemistry,chem_parse\n"
    )
    beside = collect(analysis)
    assert [r["label"] for r in beside["runs"]] == ["replay/demo-aromatic-acidity"]
    assert beside["problems"] == [] and Path(beside["runs"][0]["label"]).parts[0] == "replay"


def test_a_run_with_only_the_atif_trajectory_gets_its_timeline_from_it(demo_run, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(demo_run, run)
    full = collect(run)["runs"][0]
    (run / "trajectory.jsonl").unlink()
    (run / "run.json").unlink()
    atif = collect(run)["runs"][0]

    def calls(r):
        return [(x["n"], x["c"], x["e"]) for x in r["rows"] if x["k"] == "call"]

    assert calls(atif) == calls(full)
    assert [x["n"] for x in atif["rows"] if x["k"] == "msg"] == ["system", "task"]
    assert atif["ending"]["exit_status"] == "submitted" and atif["model"] == "replay:demo-aromatic-acidity"
    assert "from the ATIF trajectory.json" in atif["problems"][0]["message"]


def test_a_recovered_submission_shows_the_strict_score_and_the_recovered_one(demo_run, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(demo_run, run)
    data = json.loads((run / "rankings.json").read_text())
    data["rankings"] = {g["group_id"]: g["order"] for g in data["rankings"]}  # departure 1 of Appendix E.1
    (run / "rankings.json").write_text(json.dumps(data))
    score = collect(run)["runs"][0]["score"]
    assert score["score"] == -1.0  # the strict grader rejects the file: the official score
    assert score["recovered_score"] == pytest.approx(1.0)  # the same orders, mapped back


def test_answers_beside_the_tasks_spu_batch_ran_are_found(tmp_path):
    """A batch over tasks outside the demo set is graded without --answers, as spu report grades it."""
    from environment.runs import batch_answers

    task_dir = tmp_path / "suite" / "t1" / "task"
    task_dir.mkdir(parents=True)
    (task_dir.parent / "answers.json").write_text("{}")
    (tmp_path / "runs" / "_batch").mkdir(parents=True)
    (tmp_path / "runs" / "_batch" / "cfg.json").write_text(json.dumps({"tasks": [str(task_dir)]}))
    assert batch_answers(tmp_path / "runs") == [task_dir.parent / "answers.json"]
    assert batch_answers(tmp_path / "elsewhere") == []


def test_one_run_is_graded_with_the_answers_beside_its_task(demo_run, tmp_path):
    """`spu view RUN` on a run of a task kept as `spu task build` and the suite keep it (`answers.json`
    beside the task folder) said "not graded: no answers"; the answers beside the run's task are found."""
    from environment.demo_tasks import demo_answers_path, demo_task_dir

    task_dir = tmp_path / "suite" / "acid" / "task"
    shutil.copytree(demo_task_dir("aromatic-acidity"), task_dir)
    contract = task_dir / "contract.json"
    contract.write_text(contract.read_text().replace("demo-aromatic-acidity", "acid-copy"))
    answers = demo_answers_path("aromatic-acidity").read_text().replace("demo-aromatic-acidity", "acid-copy")
    (task_dir.parent / "answers.json").write_text(answers)
    run = tmp_path / "run"
    shutil.copytree(demo_run, run)
    start = json.loads((run / "trajectory.jsonl").read_text().splitlines()[0])
    for name in ("trajectory.jsonl", "run.json", "rankings.json"):
        text = (run / name).read_text().replace("demo-aromatic-acidity", "acid-copy")
        (run / name).write_text(text.replace(json.dumps(start["task_dir"])[1:-1], str(task_dir)))
    for draft in (run / "drafts").glob("*.json"):
        draft.write_text(draft.read_text().replace("demo-aromatic-acidity", "acid-copy"))
    graded = collect(run)["runs"][0]
    assert "grading" not in graded, graded.get("grading")
    assert graded["score"]["score"] == collect(demo_run)["runs"][0]["score"]["score"]
