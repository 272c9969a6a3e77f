"""`spu analyze` and its readers on hand-written runs with known answers (values computed by hand below)."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path

import pytest
from analysis_runs import atif_trajectory, write_jsonl_run

from environment.analysis.activities import classify, gpu_use
from environment.analysis.analyze import analyze
from environment.analysis.errors import AnalysisError
from environment.analysis.monotone import field_baseline, follows, monotone_fields
from environment.analysis.trajectories import ToolCall, read_atif, read_jsonl

REPO = Path(__file__).resolve().parents[2]

# group a: temperature 10..50, measured order a2 < a4 < a1 < a5 < a3 (unrelated to temperature)
# group b: temperature 10, 10, 20, 30 (a tie), measured order b3 < b1 < b4 < b2
TEMPS = {"a1": 10, "a2": 20, "a3": 30, "a4": 40, "a5": 50, "b1": 10, "b2": 10, "b3": 20, "b4": 30}
VALUES = {
    "a": {"a1": 3.0, "a2": 1.0, "a3": 5.0, "a4": 2.0, "a5": 4.0},
    "b": {"b1": 2.0, "b2": 4.0, "b3": 1.0, "b4": 3.0},
}
FOLLOWS_TEMP = {"a": ["a1", "a2", "a3", "a4", "a5"], "b": ["b2", "b1", "b3", "b4"]}
MEASURED = {"a": ["a2", "a4", "a1", "a5", "a3"], "b": ["b3", "b1", "b4", "b2"]}


@pytest.fixture
def temp_task(make_task):
    conditions = {e: {"temperature_c": t, "label": e.upper()} for e, t in TEMPS.items()}
    return make_task(VALUES, task_id="t-temp", conditions=conditions)


# -- the monotone prior ---------------------------------------------------------------------------------


def test_a_ranking_that_follows_a_varied_field_is_flagged_and_one_that_does_not_is_not(temp_task):
    task, *_ = temp_task
    assert monotone_fields(task, FOLLOWS_TEMP) == [("temperature_c", "ascending")]
    reverse = {g: list(reversed(o)) for g, o in FOLLOWS_TEMP.items()}
    assert monotone_fields(task, reverse) == [("temperature_c", "descending")]
    assert monotone_fields(task, MEASURED) == []
    # ascending in one group, descending in the other: not one prior
    assert monotone_fields(task, {"a": FOLLOWS_TEMP["a"], "b": reverse["b"]}) == []


def test_follows_tolerates_ties_in_the_field_and_uses_rho_095_otherwise():
    values = {"x1": 1.0, "x2": 1.0, "x3": 2.0}
    assert follows(["x2", "x1", "x3"], values) == "ascending"
    # one adjacent swap among 20 distinct values: Spearman 1 - 6*2/(20*399) = 0.9985 >= 0.95
    many = {f"y{i:02d}": float(i) for i in range(20)}
    order = sorted(many)
    order[3], order[4] = order[4], order[3]
    assert follows(order, many) == "ascending"
    assert follows(["x3", "x1", "x2"], values) == "descending"
    assert follows(["z2", "z1", "z3"], {"z1": 1.0, "z2": 2.0, "z3": 3.0}) is None  # rho 0.5


def test_the_field_baseline_is_the_expected_score_over_tie_breaks(temp_task):
    task, answers, *_ = temp_task
    result = field_baseline(task, answers, "temperature_c", "ascending")
    by_group = {g["group_id"]: g for g in result["groups"]}
    # group a: d = (-2, 1, -2, 2, 1), rho = 1 - 6*14/(5*24) = 0.3
    assert by_group["a"]["expected_rho"] == pytest.approx(0.3)
    # group b: the two tie-breaks score 0 and -0.4 (hand computed); their mean is -0.2
    assert by_group["b"]["expected_rho"] == pytest.approx(-0.2)
    assert by_group["b"]["strict_rho"] == pytest.approx(0.0)  # b1 before b2, the presented order
    assert result["score"] == pytest.approx(0.5 * 0.3 + 0.5 * -0.2)
    assert result["strict_score"] == pytest.approx(0.5 * 0.3)
    descending = field_baseline(task, answers, "temperature_c", "descending")
    assert descending["score"] == pytest.approx(-result["score"])


# -- activities -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "arguments", "category", "domain"),
    [
        ("web_search", {"query": "pKa benzoic acid"}, "literature", ""),
        ("mcp__spu__web_fetch", {"url": "https://example.org"}, "literature", ""),
        ("literature_search", {"query": "x"}, "literature", ""),
        ("WebSearch", {"query": "x"}, "literature", ""),
        ("pubchem_lookup", {"name": "phenol"}, "database", ""),
        ("mcp__spu__uniprot_lookup", {"accession": "P12345"}, "database", ""),
        ("chem_descriptors", {"molecules": ["CCO"]}, "computation", "chem"),
        ("xtb_run", {"molecule": "O"}, "computation", "quantum"),
        ("dft_run", {"molecule": "O"}, "computation", "quantum"),
        ("md_run", {}, "computation", "md"),
        ("protein_fold", {"sequence": "MKV"}, "computation", "protein"),
        ("python", {"code": "from rdkit import Chem\nm = Chem.MolFromSmiles('CCO')"}, "computation", "chem"),
        ("Bash", {"command": "python -c 'import pyscf'"}, "computation", "quantum"),
        ("bash", {"command": "python fit.py && sort -n out.txt"}, "code", ""),
        ("exec_command", {"cmd": ["bash", "-lc", "echo hello"]}, "code", ""),
        (
            "bash",
            {"command": "curl -s https://pubchem.ncbi.nlm.nih.gov/rest/pug/compound/name/phenol/JSON"},
            "database",
            "",
        ),
        ("submit_rankings", {"rankings": []}, "drafting", ""),
        ("ranking_check", {}, "drafting", ""),
        ("Write", {"file_path": "/app/output/rankings.json", "content": "{}"}, "drafting", ""),
        (
            "bash",
            {"command": "python -c \"import json; json.dump(r, open('rankings.json','w'))\""},
            "drafting",
            "",
        ),
        ("Write", {"file_path": "/app/output/model.py", "content": "import numpy"}, "code", ""),
        ("read_file", {"path": "task/targets.csv"}, "inputs", ""),
        ("Read", {"file_path": "/app/task/experiment.md"}, "inputs", ""),
        ("bash", {"command": "cat /app/task/targets.csv"}, "inputs", ""),
        ("system_info", {}, "system", ""),
        ("Bash", {"command": "nvidia-smi"}, "system", ""),
        ("TodoWrite", {"todos": []}, "system", ""),
        ("frobnicate", {}, "other", ""),
    ],
)
def test_each_tool_family_gets_its_activity(name, arguments, category, domain):
    from environment.analysis.trajectories import normalise_tool_name

    call = ToolCall(index=1, step=1, name=normalise_tool_name(name), arguments=arguments, raw_name=name)
    assert classify(call) == (category, domain)


def test_gpu_use_is_read_from_provenance_or_code_and_probes_are_apart():
    served = ToolCall(1, 1, "dft_run", {}, content='{"energy": -76.4, "provenance": {"device": "cuda:0"}}')
    cpu = ToolCall(2, 1, "dft_run", {}, content='{"provenance": {"device": "cpu"}}')
    code = ToolCall(3, 1, "python", {"code": "import torch\nx = x.to('cuda')"})
    probe = ToolCall(4, 1, "bash", {"command": "nvidia-smi"})
    failed = ToolCall(5, 1, "python", {"code": "x.cuda()"}, is_error=True)
    cached = ToolCall(6, 1, "dft_run", {}, content='{"provenance": {"device": "cuda:0", "cache": "hit"}}')
    assert [gpu_use(c) for c in (served, cpu, code, probe, failed, cached)] == [
        "use",
        "",
        "use",
        "probe",
        "",
        "",
    ]


# -- reading trajectories: clear errors -----------------------------------------------------------------


def test_a_malformed_jsonl_line_is_reported_with_file_and_line(tmp_path):
    path = write_jsonl_run(tmp_path / "r", "t-temp", [("bash", {"command": "ls"})])
    lines = path.read_text().splitlines()
    lines[2] = lines[2][:-5] + "garbage"
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(AnalysisError) as info:
        read_jsonl(path)
    assert info.value.code == "trajectory_malformed"
    assert f"{path}:3:" in str(info.value)


def test_a_truncated_jsonl_names_the_cut_line(tmp_path):
    path = write_jsonl_run(tmp_path / "r", "t-temp", [("bash", {"command": "ls"})])
    text = path.read_text()
    path.write_text(text[: len(text) - 12])  # the run_end record loses its end and its newline
    with pytest.raises(AnalysisError) as info:
        read_jsonl(path)
    assert info.value.code == "trajectory_truncated"
    assert f"{path}:4:" in str(info.value)  # run_start, model_turn, tool_result, run_end


def test_a_truncated_atif_file_names_the_line(tmp_path):
    path = tmp_path / "trajectory.json"
    text = json.dumps(atif_trajectory("t-temp", [("Bash", {"command": "ls"})]), indent=2)
    path.write_text(text[: len(text) // 2])
    with pytest.raises(AnalysisError) as info:
        read_atif(path)
    assert info.value.code == "trajectory_truncated"
    expected_line = text[: len(text) // 2].count("\n") + 1
    assert f"{path}:{expected_line}:" in str(info.value)


def test_an_atif_step_of_the_wrong_shape_names_the_step(tmp_path):
    data = atif_trajectory("t-temp", [("Bash", {"command": "ls"})])
    data["steps"][1]["tool_calls"] = "not a list"
    path = tmp_path / "trajectory.json"
    path.write_text(json.dumps(data))
    with pytest.raises(AnalysisError, match=r"steps\[1\]\.tool_calls"):
        read_atif(path)


def test_the_cli_exits_2_naming_the_file_and_line(temp_task, tmp_path):
    """A trajectory that cannot be read is an input that cannot be read as its kind: exit 2 (it was 1, the
    code of a negative verdict, which analyze never gives), on one line with its hint."""
    _, _, task_dir, answers_path = temp_task
    runs = tmp_path / "runs"
    path = write_jsonl_run(runs / "r1", "t-temp", [("bash", {"command": "ls"})], final=MEASURED)
    path.write_text(path.read_text().replace('"type": "tool_result"', '"type": tool_result'))
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "spu",
            "analyze",
            str(runs),
            "--out",
            str(tmp_path / "out"),
            "--tasks",
            str(task_dir),
            "--answers-dir",
            str(answers_path.parent),
        ],
        capture_output=True,
        text=True,
        cwd=REPO,
        check=False,
        timeout=120,
    )
    assert done.returncode == 2
    assert f"error: [trajectory_malformed] {path}:3:" in done.stderr
    assert "Traceback" not in done.stderr and done.stderr.count("\n") == 1


def test_the_cli_finds_the_tasks_beside_their_answers(temp_task, tmp_path):
    # Before, --tasks defaulted to the demo tasks, so a run of any other task needed both options.
    answers_path = temp_task[3]
    runs = tmp_path / "runs"
    write_jsonl_run(runs / "r1", "t-temp", [("bash", {"command": "ls"})], final=MEASURED)
    args = ["analyze", str(runs), "--out", str(tmp_path / "out"), "--answers-dir", str(answers_path.parent)]
    done = subprocess.run(
        [sys.executable, "-m", "spu", *args, "--json"],
        capture_output=True,
        text=True,
        cwd=REPO,
        check=False,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    (row,) = json.loads(done.stdout)["runs_table"]
    assert row["task"] == "t-temp" and row["final_score"] == pytest.approx(1.0)


# -- whole analyses -------------------------------------------------------------------------------------


def _read_csv(path: Path) -> list[dict[str, str]]:
    with open(path, newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def _tasks(temp_task):
    task, answers, *_ = temp_task
    return {task.task_id: task}, {task.task_id: answers}


def test_drafts_revisions_and_score_changes(temp_task, tmp_path):
    tasks, answers = _tasks(temp_task)
    presented = {"a": ["a1", "a2", "a3", "a4", "a5"], "b": ["b1", "b2", "b3", "b4"]}
    draft2 = {"a": ["a2", "a4", "a1", "a3", "a5"], "b": MEASURED["b"]}  # a3/a5 swapped

    def rankings(orders):
        return {"rankings": [{"group_id": g, "order": o} for g, o in orders.items()]}

    calls = [
        ("read_file", {"path": "targets.csv"}),
        ("submit_rankings", rankings(presented)),  # the presented order: a draft, but not a first draft
        ("web_search", {"query": "x"}),
        ("submit_rankings", rankings(draft2)),
        ("submit_rankings", {"rankings": [{"group_id": "a", "order": ["a1"]}]}, "[invalid] no", True),
        ("python", {"code": "print(1)"}, "Traceback", True),
        ("submit_rankings", rankings(MEASURED)),
        ("submit_rankings", rankings(MEASURED)),
    ]
    write_jsonl_run(tmp_path / "runs" / "cfg" / "t-temp" / "r1", "t-temp", calls, final=MEASURED)
    out = tmp_path / "out"
    analyze(tmp_path / "runs", out, tasks, answers)
    drafts = _read_csv(out / "drafts.csv")
    assert [d["step"] for d in drafts] == ["2", "4", "7", "8"]
    assert [d["differs_from_presented"] for d in drafts] == ["0", "1", "1", "1"]
    # draft 2: group a rho = 1 - 6*2/120 = 0.9, group b 1.0 -> 0.95; then 1.0 (+0.05)
    assert float(drafts[1]["score"]) == pytest.approx(0.95)
    assert float(drafts[2]["score_change"]) == pytest.approx(0.05)
    assert drafts[2]["flipped_pairs"] == "1"
    (run,) = _read_csv(out / "runs.csv")
    assert run["first_draft_step"] == "4"
    # 8 model turns 10 s apart, each call 1 s, run_end 10 s after the last: call 4 starts at 40 s of 90 s
    assert float(run["first_draft_t_norm"]) == pytest.approx(40.0 / 90.0)
    assert run["n_revisions"] == "1"  # draft 3 changes the order, draft 4 repeats it
    assert run["tool_errors"] == "2"
    assert float(run["final_score"]) == pytest.approx(1.0)
    assert run["monotone_field"] == ""
    assert run["config"] == "cfg"


def test_consensus_gain_and_agreement_equal_hand_computation(make_task, tmp_path):
    task, answers, *_ = make_task({"c": {"c1": 1.0, "c2": 2.0, "c3": 3.0, "c4": 4.0}}, task_id="t-four")
    orders = {
        ("x", "A"): ["c1", "c2", "c3", "c4"],  # rho 1
        ("x", "B"): ["c2", "c1", "c4", "c3"],  # sum d^2 = 4: rho = 1 - 24/60 = 0.6
        ("y", "C"): ["c4", "c3", "c2", "c1"],  # rho -1
    }
    for (config, name), order in orders.items():
        write_jsonl_run(tmp_path / "runs" / config / "t-four" / name, "t-four", [], final={"c": order})
    out = tmp_path / "out"
    analyze(tmp_path / "runs", out, {task.task_id: task}, {task.task_id: answers})
    rows = {r["members"]: r for r in _read_csv(out / "consensus.csv")}
    # mean ranks c1 7/3, c2 2, c3 3, c4 8/3 -> consensus c2 c1 c4 c3 (rho 0.6); members average (1+0.6-1)/3
    assert float(rows["*"]["consensus_score"]) == pytest.approx(0.6)
    assert float(rows["*"]["mean_member_score"]) == pytest.approx(0.2)
    assert float(rows["*"]["consensus_gain"]) == pytest.approx(0.4)
    # configuration x alone: mean ranks tie pairwise, broken by id -> c1 c2 c3 c4 (1.0); members 0.8
    assert float(rows["x"]["consensus_gain"]) == pytest.approx(0.2)
    agreement = {(r["config_a"], r["config_b"]): r for r in _read_csv(out / "agreement.csv")}
    assert float(agreement[("x", "x")]["mean_spearman"]) == pytest.approx(0.6)
    assert float(agreement[("x", "y")]["mean_spearman"]) == pytest.approx((-1.0 - 0.6) / 2)
    assert float(agreement[("*", "*")]["mean_spearman"]) == pytest.approx((0.6 - 1.0 - 0.6) / 3)
    assert agreement[("x", "y")]["scope"] == "between"


def test_runs_following_the_field_are_flagged_in_runs_csv(temp_task, tmp_path):
    tasks, answers = _tasks(temp_task)
    write_jsonl_run(tmp_path / "runs" / "m" / "t-temp" / "follows", "t-temp", [], final=FOLLOWS_TEMP)
    write_jsonl_run(tmp_path / "runs" / "m" / "t-temp" / "measured", "t-temp", [], final=MEASURED)
    out = tmp_path / "out"
    analyze(tmp_path / "runs", out, tasks, answers)
    flags = {
        r["run"].rsplit("/", 1)[-1]: (r["monotone_field"], r["monotone_direction"])
        for r in _read_csv(out / "runs.csv")
    }
    assert flags == {"follows": ("temperature_c", "ascending"), "measured": ("", "")}
    assert "follows `temperature_c` (ascending)" in (out / "summary.md").read_text()


def test_an_atif_run_of_another_agent_in_a_harbor_trial(temp_task, tmp_path):
    tasks, answers = _tasks(temp_task)
    content = json.dumps(
        {
            "task_id": "t-temp",
            "task_version": "1",
            "rankings": [{"group_id": g, "order": o} for g, o in MEASURED.items()],
        }
    )
    calls = [
        ("Read", {"file_path": "/app/task/targets.csv"}),
        ("mcp__spu__web_search", {"query": "x"}),
        ("mcp__spu__chem_descriptors", {"molecules": ["CCO"]}, '{"provenance": {"device": "cpu"}}'),
        ("Bash", {"command": "python -c 'import torch; torch.zeros(3).cuda()'"}),
        ("Write", {"file_path": "/app/output/rankings.json", "content": content}),
    ]
    trial = tmp_path / "job" / "t-temp__abc"
    (trial / "agent").mkdir(parents=True)
    (trial / "agent" / "trajectory.json").write_text(json.dumps(atif_trajectory(None, calls)))
    (trial / "result.json").write_text(
        json.dumps(
            {
                "task_name": "spu/t-temp",
                "agent_info": {"name": "claude-code", "model_info": {"name": "claude-test"}},
            }
        )
    )
    out = tmp_path / "out"
    analyze(tmp_path / "job", out, tasks, answers)
    (run,) = _read_csv(out / "runs.csv")
    assert (run["task"], run["config"], run["format"]) == ("t-temp", "claude-code:claude-test", "atif")
    assert run["final_source"] == "last draft in the trajectory"
    assert float(run["final_score"]) == pytest.approx(1.0)
    assert run["first_draft_step"] == "5" and run["gpu_calls"] == "1"
    categories = [r["category"] for r in _read_csv(out / "activities.csv")]
    assert categories == ["inputs", "literature", "computation", "computation", "drafting"]
    # steps are a minute apart and the run lasts 6 minutes: the Write (step 5) starts at 5/6
    assert float(run["first_draft_t_norm"]) == pytest.approx(5 / 6)


def test_skip_invalid_lists_the_bad_run_and_goes_on(temp_task, tmp_path):
    tasks, answers = _tasks(temp_task)
    write_jsonl_run(tmp_path / "runs" / "m" / "t-temp" / "good", "t-temp", [], final=MEASURED)
    bad = write_jsonl_run(tmp_path / "runs" / "m" / "t-temp" / "bad", "t-temp", [], final=MEASURED)
    bad.write_text(bad.read_text()[:-3])
    with pytest.raises(AnalysisError):
        analyze(tmp_path / "runs", tmp_path / "out", tasks, answers)
    result = analyze(tmp_path / "runs", tmp_path / "out", tasks, answers, skip_invalid=True)
    assert result["runs"] == 1 and "trajectory_truncated" in result["skipped"][0]
    assert "## Skipped runs" in (tmp_path / "out" / "summary.md").read_text()


def test_method_families_name_domains_and_monte_carlo():
    from environment.analysis.activities import method_families

    sampling = ToolCall(1, 1, "python", {"code": "rng = np.random.default_rng(0)\nw = rng.normal(size=100)"})
    rdkit = ToolCall(2, 1, "python", {"code": "from rdkit import Chem"})
    assert method_families(sampling, *classify(sampling)) == {"monte_carlo"}
    assert method_families(rdkit, *classify(rdkit)) == {"chem"}
    assert method_families(ToolCall(3, 1, "web_search", {"query": "monte carlo"}), "literature", "") == set()


def test_the_analysis_imports_neither_the_server_nor_the_agent():
    code = (
        "import sys, environment.analysis.cli, environment.analysis.analyze, environment.analysis.baselines; "
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'scaffold', 'tools_server'}))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, check=True)
    assert done.stdout.strip() == "[]"


def test_drafts_written_by_a_shell_heredoc_or_a_patch_are_found(temp_task):
    from environment.analysis.drafts import find_drafts
    from environment.analysis.trajectories import Trajectory

    task, *_ = temp_task
    text = json.dumps(
        {
            "task_id": "t-temp",
            "task_version": "1",
            "rankings": [{"group_id": g, "order": o} for g, o in MEASURED.items()],
        },
        indent=2,
    )
    heredoc = f"cat > /app/output/rankings.json <<'EOF'\n{text}\nEOF\necho done"
    patch = "*** Begin Patch\n*** Add File: rankings.json\n" + "".join(
        f"+{line}\n" for line in text.splitlines()
    )
    broken = heredoc.replace('"b3"', '"zz"')  # an unknown experiment: not a valid draft
    calls = [
        ToolCall(1, 1, "Bash", {"command": heredoc}),
        ToolCall(2, 2, "apply_patch", {"input": patch + "*** End Patch"}),
        ToolCall(3, 3, "Bash", {"command": broken}),
    ]
    trajectory = Trajectory(path=Path("x"), format="atif", n_steps=3, duration_s=None, calls=calls)
    drafts = find_drafts(trajectory, task)
    assert [d.call.index for d in drafts] == [1, 2]
    assert all(d.orders == MEASURED for d in drafts)
