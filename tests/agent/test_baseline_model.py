"""`--model baseline:ENTRY`: a keyless model that ranks every group by an entry of the task's card, through
the real `spu agent run` and the real MCP server, on suite tasks of every input kind.

The claim checked against each card (docs/agent.md): the run's order is the entry's values sorted in its
direction with ties in the presented order (a group with a missing value kept whole); the card's figure is
the mean of that score over random tie-breaks of the same values. So the run scores the card's figure
exactly when no group rests on the tie-break, and lies within the score's range over tie-breaks otherwise.
The values the test ranks by come from the screen's own code on the whole task (`descriptor_columns`),
apart from the run's path (the server's `chem_descriptors`, the screen's code on one column).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from environment.grading import grade
from environment.prior_screen import descriptor_columns
from scaffold.agent.models.baseline.entries import EntryError, resolve_entry
from spu_common.rank_agreement import expected_spearman, group_rho
from spu_common.task import load_answers, load_task

REPO = Path(__file__).resolve().parents[2]
SUITE = REPO / "environment" / "tasks"


def spu(*args: str, env: dict, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "spu", *args],
        cwd=REPO,
        env=env,
        capture_output=True,
        check=False,
        text=True,
        timeout=timeout,
    )


def keyless(env: dict[str, str]) -> dict[str, str]:
    """The environment without any model API key."""
    return {k: v for k, v in env.items() if not k.endswith("_API_KEY")}


def documented_order(ids: list[str], values: list[float | None], sign: float) -> list[str]:
    """The tie-break docs/agent.md states: a stable sort of the presented order; a missing value keeps the
    group in its presented order."""
    if any(v is None for v in values):
        return list(ids)
    return [ids[i] for i in sorted(range(len(ids)), key=lambda i: sign * values[i])]


def tie_break_range(task, answers, values: dict, sign: float) -> tuple[float, float, float, bool]:
    """(expected score over random tie-breaks, lowest, highest, whether any group ties) of ranking by
    ``values``; a group with a missing value is one tied block, as the screen counts it."""
    expected = low = high = 0.0
    tied = False
    for group in task.groups:
        ids = list(group.experiment_ids)
        measured = answers.group(group.group_id).values
        got = [values.get(e) for e in ids]
        if any(v is None for v in got):
            keys = [0.0] * len(ids)
        else:
            keys = [sign * v for v in got]
            expected += group.weight * expected_spearman(keys, [measured[e] for e in ids])
        tied = tied or len(set(keys)) < len(keys)
        best = sorted(range(len(ids)), key=lambda i: (keys[i], measured[ids[i]]))
        worst = sorted(range(len(ids)), key=lambda i: (keys[i], -measured[ids[i]]))
        high += group.weight * group_rho([ids[i] for i in best], measured)
        low += group.weight * group_rho([ids[i] for i in worst], measured)
    return expected, low, high, tied


def run_baseline(
    task_dir: Path, entry: str, out: Path, env: dict, *extra: str
) -> subprocess.CompletedProcess:
    return spu(
        "agent",
        "run",
        "--task",
        str(task_dir),
        "--out",
        str(out),
        "--model",
        f"baseline:{entry}",
        *extra,
        env=env,
    )


#: (task, ENTRY, whether the values come from the server's chem_descriptors)
CASES = [
    ("med-rat-microsomal-clearance", "smiles: Crippen logP ascending", True),  # a molecule: physchem preset
    ("med-rat-microsomal-clearance", "best", True),  # an RDKit descriptor by name (VSA_EState7)
    ("med-heptapeptide-stereoisomer-permeability", "best", True),  # R stereocentres; the table as a CSV
    ("chem-sulfonamide-partitioning", "best", True),  # an RDKit descriptor by name (BCUT2D_LOGPHI)
    ("mat-hea-compressive-strength", "best", False),  # a composition statistic (mendeleev)
    ("bio-cyp-isoform-selectivity", "best", False),  # a text condition's level
    ("mat-crossed-barrel-toughness", "best", False),  # a numeric condition
    ("bio-rbd-ace2-binding-alanine-scan", "best", False),  # a substitution's site scale
]


@pytest.mark.slow
@pytest.mark.parametrize(("slug", "entry", "molecular"), CASES)
def test_the_baseline_scores_what_the_card_says(spu_env, tmp_path, slug, entry, molecular):
    folder = SUITE / slug
    task, answers = load_task(folder / "task"), load_answers(folder / "answers.json")
    resolved = resolve_entry(entry, folder / "task")
    out = tmp_path / "run"
    done = run_baseline(folder / "task", entry, out, keyless(spu_env))
    assert done.returncode == 0, done.stdout + done.stderr
    run = json.loads((out / "run.json").read_text())
    assert (run["exit_status"], run["submission"], run["cost_usd"]) == (
        "submitted",
        "drafts/draft-001.json",
        0.0,
    )
    for name in ("report.md", "sources.json", "trajectory.jsonl", "trajectory.json", "drafts/draft-001.json"):
        assert (out / name).is_file(), name

    values = descriptor_columns(task)[0][resolved.name]
    sign = 1.0 if resolved.direction == "ascending" else -1.0
    submitted = {
        r["group_id"]: r["order"] for r in json.loads((out / "rankings.json").read_text())["rankings"]
    }
    for group in task.groups:
        ids = list(group.experiment_ids)
        assert submitted[group.group_id] == documented_order(ids, [values[e] for e in ids], sign)

    score = grade(out / "rankings.json", task, answers).score
    expected, low, high, tied = tie_break_range(task, answers, values, sign)
    card = resolved.card_score
    assert expected == pytest.approx(card, rel=1e-5, abs=1e-6)  # the card's figure, from these values
    if tied:
        assert low - 1e-12 <= score <= high + 1e-12 and low - 1e-6 <= card <= high + 1e-6
    else:
        assert score == pytest.approx(card, rel=1e-5, abs=1e-6)
    report = (out / "report.md").read_text()
    assert f"# Keyless baseline: {resolved.name} ({resolved.direction})" in report
    turns = [json.loads(line) for line in (out / "trajectory.jsonl").read_text().splitlines()]
    called = [c["name"] for t in turns if t["type"] == "model_turn" for c in t["message"]["tool_calls"]]
    assert called[:2] == ["read_file", "read_file"] and called[-1] == "submit_rankings"
    assert ("chem_descriptors" in called) == molecular  # molecular descriptors through the server only


@pytest.mark.slow
def test_a_declared_xtb_proxy_runs_through_the_server_and_scores_the_card_s_figure(spu_env, tmp_path):
    folder = SUITE / "chem-amination-additive-tolerance"
    task, answers = load_task(folder / "task"), load_answers(folder / "answers.json")
    resolved = resolve_entry("proxy", folder / "task")
    out = tmp_path / "run"
    done = run_baseline(folder / "task", "proxy", out, keyless(spu_env))
    assert done.returncode == 0, done.stdout + done.stderr
    turns = [json.loads(line) for line in (out / "trajectory.jsonl").read_text().splitlines()]
    calls = [c for t in turns if t["type"] == "model_turn" for c in t["message"]["tool_calls"]]
    assert sum(c["name"] == "xtb_run" for c in calls) == task.n_experiments  # one call per experiment
    score = grade(out / "rankings.json", task, answers).score
    # the card's figure (spu baselines, GFN2-xTB LUMO energies: no two equal, so no tie-break enters)
    assert score == pytest.approx(resolved.card_score, rel=1e-5, abs=1e-6)


@pytest.mark.slow
def test_a_proxy_that_cannot_run_here_fails_with_the_tool_s_code(spu_env, tmp_path):
    folder = SUITE / "bio-rbd-ace2-binding-alanine-scan"
    weights = tmp_path / "no-weights"  # ESM-2's weights cannot be downloaded here: an empty folder
    weights.mkdir()
    env = {**keyless(spu_env), "SPU_WEIGHTS_DIR": str(weights), "SPU_WEIGHTS_DOWNLOAD": "0"}
    out = tmp_path / "run"
    done = run_baseline(folder / "task", "proxy", out, env)
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    run = json.loads((out / "run.json").read_text())
    assert run["exit_status"] == "model_error" and run["submission"] == "fallback"
    assert "[weights_missing]" in run["reason"] and "protein_variant_scores" not in run.get(
        "finish_errors", ""
    )
    task = load_task(folder / "task")
    from spu_common.submission import validate_submission

    assert validate_submission(out / "rankings.json", task, recover=False).valid
    assert (out / "report.md").is_file() and (out / "trajectory.json").is_file()


def test_an_entry_the_card_lacks_is_refused_before_the_run(spu_env, tmp_path):
    out = tmp_path / "run"
    done = run_baseline(
        SUITE / "med-rat-microsomal-clearance" / "task", "no such entry", out, keyless(spu_env)
    )
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
    assert "lists no entry 'no such entry'" in done.stderr
    best = resolve_entry("best", SUITE / "med-rat-microsomal-clearance" / "task")  # the card's first entry
    assert f"best (= '{best.name} {best.direction}')" in done.stderr and "proxy:GFN2-xTB" in done.stderr
    assert not out.exists()


def test_a_task_without_a_card_is_refused_before_the_run(spu_env, tmp_path):
    from environment.demo_tasks import demo_task_dir

    out = tmp_path / "run"
    done = run_baseline(demo_task_dir("aromatic-acidity"), "best", out, keyless(spu_env))
    assert done.returncode == 2 and done.stderr.count("\n") == 1
    assert "there is no card at" in done.stderr and not out.exists()


@pytest.mark.slow
def test_a_page_cut_at_the_output_limit_is_read_again_in_smaller_pages(spu_env, tmp_path):
    folder = SUITE / "bio-cyp-isoform-selectivity"
    out = tmp_path / "run"
    done = run_baseline(folder / "task", "best", out, keyless(spu_env), "-c", "tools.max_output_chars=300")
    assert done.returncode == 0, done.stdout + done.stderr
    task = load_task(folder / "task")
    resolved = resolve_entry("best", folder / "task")
    values = descriptor_columns(task)[0][resolved.name]
    sign = 1.0 if resolved.direction == "ascending" else -1.0
    submitted = {
        r["group_id"]: r["order"] for r in json.loads((out / "rankings.json").read_text())["rankings"]
    }
    for group in task.groups:
        ids = list(group.experiment_ids)
        assert submitted[group.group_id] == documented_order(ids, [values[e] for e in ids], sign)
    reads = [
        json.loads(line)
        for line in (out / "trajectory.jsonl").read_text().splitlines()
        if '"tool_result"' in line and '"read_file"' in line
    ]
    assert any("characters omitted from the middle" in r["content"] for r in reads)  # a page came back cut
    assert len(reads) > 4  # and was read again in smaller pages


@pytest.mark.slow
def test_batch_report_analyze_and_view_run_without_a_key(spu_env, tmp_path):
    tasks = tmp_path / "tasks"
    for slug in (
        "med-rat-microsomal-clearance",
        "mat-hea-compressive-strength",
        "bio-cyp-isoform-selectivity-narrow",
    ):
        shutil.copytree(SUITE / slug, tasks / slug)
    env, runs = keyless(spu_env), tmp_path / "runs"
    done = spu(
        "batch", str(tasks), "--model", "baseline:best", "-j", "2", "--out", str(runs), "--json", env=env
    )
    assert done.returncode == 0, done.stderr
    summary = json.loads((runs / "_report" / "summary.json").read_text())
    assert summary["configurations"][0]["configuration"] == "baseline_best"
    assert summary["configurations"][0]["scored_tasks"] == 3
    rows = (runs / "_report" / "runs.csv").read_text()
    assert all(slug in rows for slug in ("med-rat-microsomal-clearance", "mat-hea-compressive-strength"))
    analyzed = spu("analyze", str(runs), "--out", str(tmp_path / "analysis"), env=env)
    assert analyzed.returncode == 0, analyzed.stderr
    viewed = spu("view", str(runs), "--out", str(tmp_path / "view.html"), "--json", env=env)
    assert viewed.returncode == 0, viewed.stderr
    assert json.loads(viewed.stdout)["runs"] == 3


@pytest.mark.slow
def test_batch_refuses_a_task_whose_card_lacks_the_entry_before_any_run(spu_env, tmp_path):
    tasks = tmp_path / "tasks"
    for slug in ("med-rat-microsomal-clearance", "mat-hea-compressive-strength"):
        shutil.copytree(SUITE / slug, tasks / slug)
    runs = tmp_path / "runs"
    entry = "smiles: Crippen logP ascending"  # on the clearance task's card, not on the alloy task's
    done = spu("batch", str(tasks), "--model", f"baseline:{entry}", "--out", str(runs), env=keyless(spu_env))
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    assert (
        "lists no entry 'smiles: Crippen logP'" in done.stderr
        and "alloy: spread molar heat capacity" in done.stderr
    )
    assert not runs.exists()


@pytest.mark.slow
def test_the_server_computes_every_molecular_descriptor_of_the_panel_as_the_screen_does(mcp_server):
    """Each molecule entry of the screen (its readable families and RDKit's whole list) through
    chem_descriptors, the way the baseline asks for it, settled as the screen settles: the screen's value.
    The molecules include partial charges that agree to six decimals and not to ten, and CIP labels."""
    from environment.prior_screen import MOLECULE_DESCRIPTORS, molecule_descriptors
    from environment.prior_screen.molecules import rdkit_descriptor_names
    from scaffold.agent.models.baseline.values import PHYSCHEM_FIELDS, settled

    task = load_task(SUITE / "med-plasma-protein-binding-series" / "task")
    smiles = [row["smiles"] for row in task.rows_of("g1")]
    smiles += ["C[C@H](N)C(=O)O", "C[C@@H](N)C(=O)O", "O[C@H]1[C@@H](O)CCCC1", "CCN.Cl"]
    assert set(PHYSCHEM_FIELDS) == set(MOLECULE_DESCRIPTORS)
    physchem = mcp_server.call_ok("chem_descriptors", {"molecules": smiles, "preset": "physchem"})["items"]
    for i, text in enumerate(smiles):
        screen = molecule_descriptors(text)
        for key, field in PHYSCHEM_FIELDS.items():
            assert settled(physchem[i]["descriptors"][field]) == settled(screen[key]), (text, key)
        listed = mcp_server.call_ok(
            "chem_descriptors", {"molecules": [text], "names": rdkit_descriptor_names()}
        )
        for name in rdkit_descriptor_names():
            assert settled(listed["items"][0]["descriptors"][name]) == settled(screen[name]), (text, name)
    alanine, d_alanine = physchem[-4]["descriptors"], physchem[-3]["descriptors"]
    assert (alanine["stereocenters_r"], alanine["stereocenters_s"]) == (0, 1)  # L-alanine is (S)
    assert (d_alanine["stereocenters_r"], d_alanine["stereocenters_s"]) == (1, 0)


# -- ENTRY's spelling, against generated cards ------------------------------------------------------------

_NAME = st.text(alphabet="abcdefgh XYZ:=()-,1234", min_size=1, max_size=20).map(str.strip).filter(bool)
_ENTRY = st.tuples(_NAME, st.sampled_from(["ascending", "descending"]), st.floats(-1, 1, allow_nan=False))


def _card(folder: Path, entries: list, proxies: list) -> Path:
    task = folder / "task"
    task.mkdir(parents=True, exist_ok=True)
    best = [{"name": n, "direction": d, "expected_score": s, "above_chance": False} for n, d, s in entries]
    card = {
        "schema": "spu.card/1",
        "screen": {"best": best},
        "proxies": [{"name": n, "direction": d, "score": s} for n, d, s in proxies],
    }
    (folder / "card.json").write_text(json.dumps(card))
    return task


@settings(max_examples=60, derandomize=True, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    entries=st.lists(_ENTRY, min_size=1, max_size=6, unique_by=lambda e: (e[0], e[1])),
    proxies=st.lists(_ENTRY, max_size=3, unique_by=lambda e: e[0]),
    stranger=_NAME,
)
def test_every_spelling_the_card_offers_resolves_and_nothing_else_does(
    tmp_path_factory, entries, proxies, stranger
):
    assume(not any(n.endswith((" ascending", " descending")) for n, _, _ in entries))
    task = _card(tmp_path_factory.mktemp("card"), entries, proxies)
    first = resolve_entry("best", task)
    assert (first.name, first.direction, first.card_score) == entries[0][:3]
    for name, direction, score in entries:
        found = resolve_entry(f"{name} {direction}", task)
        assert (found.kind, found.name, found.direction, found.card_score) == (
            "panel",
            name,
            direction,
            score,
        )
        other = "descending" if direction == "ascending" else "ascending"
        if (name, other) not in {(n, d) for n, d, _ in entries}:  # the reverse: the figure negated
            assert resolve_entry(f"{name} {other}", task).card_score == -score
            assert resolve_entry(name, task).direction == direction  # one direction listed: NAME alone
        else:
            with pytest.raises(EntryError, match="in both directions"):
                resolve_entry(name, task)
    for name, direction, score in proxies:
        found = resolve_entry(f"proxy:{name}", task)
        assert (found.kind, found.name, found.direction, found.card_score) == (
            "proxy",
            name,
            direction,
            score,
        )
    if len(proxies) == 1:
        assert resolve_entry("proxy", task).name == proxies[0][0]
    else:
        with pytest.raises(EntryError):
            resolve_entry("proxy", task)
    names = {n for n, _, _ in entries}
    if stranger not in names and stranger not in ("best", "proxy") and not stranger.startswith("proxy:"):
        head, _, tail = stranger.rpartition(" ")
        assume(not (tail in ("ascending", "descending") and head in names))
        with pytest.raises(EntryError) as refused:
            resolve_entry(stranger, task)
        for name, direction, _ in entries:  # the refusal names every entry the card has
            assert repr(f"{name} {direction}") in str(refused.value)
        for name, _, _ in proxies:
            assert repr(f"proxy:{name}") in str(refused.value)
