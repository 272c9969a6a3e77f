"""Policy files are checked against their schema: a wrong shape refuses to start `spu serve` (SPU_POLICY)
and `spu audit serve --policy` with `file: key: problem`, and `spu audit policy check` says so (exit 1)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tools_server.web.policy import Policy, PolicyError

BAD = {
    "nested": ({"mode": "enforce", "policy": {"dois": ["10.1021/jacs.5b01234"]}}, "policy", "unknown key"),
    "misspelt": ({"mode": "enforce", "doys": ["10.1021/jacs.5b01234"]}, "doys", "unknown key"),
    "only_mode": ({"mode": "enforce"}, "(identifiers)", "names no identifier"),
    "only_mode_observe": ({"mode": "observe"}, "(identifiers)", "names no identifier"),
    "empty_object": ({}, "(identifiers)", "names no identifier"),
    "nested_value": ({"dois": [{"doi": "10.1021/x"}]}, "dois", "list of strings"),
    "bool_value": ({"pmids": True}, "pmids", "list of strings"),
    "empty_entry": ({"titles": ["A real title of a study", " "]}, "titles", "empty entry"),
    "both_spellings": ({"doi": "10.1021/a", "dois": ["10.1021/b"]}, "doi", "not both"),
    "bad_mode": ({"mode": "block", "doi": "10.1021/a"}, "mode", "'observe' or 'enforce'"),
    "not_a_doi": ({"doi": "jacs.5b01234"}, "doi", "10.<digits>/<suffix>"),
    "list_file": (["10.1021/a"], "(file)", "must hold an object"),
    # too vague to single out one study: in enforce mode they would block nearly every page
    "one_letter_title": ({"mode": "enforce", "titles": ["x"]}, "titles[0]", "at least 4 words"),
    "short_title": ({"title": "Benzoic acid pKa"}, "title[0]", "at least 4 words and 20 letters"),
    "few_letter_title": ({"preprint_title": "A b c d e"}, "preprint_title[0]", "20 letters"),
    "short_pmid": ({"pmids": ["26012345", "123"]}, "pmids[1]", "fewer than 4 digits"),
    "short_pmcid": ({"pmcid": "PMC12"}, "pmcid[0]", "fewer than 4 digits"),
    "short_doi_registrant": ({"doi": "10.1/jacs.5b01234"}, "doi[0]", "registrant code of at least 4"),
    "short_doi_suffix": ({"dois": ["10.1021/x"]}, "dois[0]", "suffix of at least 3"),
}


@pytest.mark.parametrize("name", sorted(BAD))
def test_wrong_shapes_are_refused_with_file_key_problem(tmp_path, name):
    data, key, problem = BAD[name]
    path = tmp_path / "policy.json"
    path.write_text(json.dumps(data))
    with pytest.raises(PolicyError) as err:
        Policy.load(path)
    assert err.value.key == key and problem in err.value.problem
    assert str(err.value).startswith(f"{path}: {key}: ")


def test_yaml_and_json_syntax_errors_name_the_file(tmp_path):
    (tmp_path / "p.yaml").write_text("mode: enforce\n  dois: [\n")
    (tmp_path / "p.json").write_text('{"dois": ["10.1021/a"], "dois": ["10.1021/b"]}')  # duplicate key
    for name in ("p.yaml", "p.json"):
        with pytest.raises(PolicyError, match=rf"{name}: \(file\): is not valid"):
            Policy.load(tmp_path / name)


def test_a_key_given_twice_in_yaml_is_refused_as_in_json(spu_env, tmp_path):
    path = tmp_path / "policy.yaml"
    path.write_text("mode: enforce\ndois: ['10.1021/jacs.5b01234']\ndois: ['10.1021/other.5b0999']\n")
    with pytest.raises(PolicyError) as err:
        Policy.load(path)
    assert (
        err.value.key == "(file)"
        and "'dois' appears twice" in err.value.problem
        and "line 3" in str(err.value)
    )
    checked = _run(["audit", "policy", "check", str(path), "--json"], spu_env)
    assert checked.returncode == 1 and "appears twice" in json.loads(checked.stdout)["problem"]


def test_policy_check_refuses_a_vague_title_with_a_hint(spu_env, tmp_path):
    path = tmp_path / "policy.yaml"
    path.write_text("mode: enforce\ntitles: [x]\n")
    checked = _run(["audit", "policy", "check", str(path)], spu_env)
    assert (
        checked.returncode == 1
        and "titles[0]" in checked.stderr
        and "give the study's full title" in checked.stderr
    )


def _run(args: list[str], env: dict[str, str], timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "spu", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
    )


@pytest.mark.parametrize("name", ["nested", "misspelt", "only_mode"])
def test_no_server_starts_with_a_wrong_policy(spu_env, tmp_path, name):
    data, key, _ = BAD[name]
    path = tmp_path / "policy.json"
    path.write_text(json.dumps(data))
    served = _run(["serve"], {**spu_env, "SPU_POLICY": str(path)})
    assert served.returncode == 2 and f"{path}: {key}: " in served.stderr
    service = _run(
        ["audit", "serve", "--log", str(tmp_path / "a.jsonl"), "--policy", str(path), "--port", "0"],
        {**spu_env, "SPU_AUDIT_TOKEN": "Zq8vL2mX5nB7cV1kJ4hG6fD9sA3pO0iU"},
    )
    assert service.returncode == 2 and f"{path}: {key}: " in service.stderr
    assert not (tmp_path / "a.jsonl").exists() or not (tmp_path / "a.jsonl").read_text()
    checked = _run(["audit", "policy", "check", str(path), "--json"], spu_env)
    assert checked.returncode == 1 and json.loads(checked.stdout)["key"] == key


def test_policy_check_passes_a_good_file_without_showing_identifiers(spu_env, tmp_path):
    path = tmp_path / "policy.yaml"
    path.write_text("mode: enforce\ndois: ['10.1021/jacs.5b01234']\ntitle: Acidity of benzoic acids\n")
    checked = _run(["audit", "policy", "check", str(path)], spu_env)
    assert checked.returncode == 0 and "enforce mode; 1 dois, 1 titles" in checked.stdout
    assert "jacs" not in checked.stdout and "Acidity" not in checked.stdout


def test_a_policy_beside_an_audit_service_is_refused(spu_env, tmp_path):
    path = tmp_path / "policy.json"
    path.write_text(json.dumps({"doi": "10.1021/a"}))
    env = {**spu_env, "SPU_POLICY": str(path), "SPU_AUDIT_URL": "http://127.0.0.1:9", "SPU_AUDIT_TOKEN": "t"}
    served = _run(["serve"], env)
    assert served.returncode == 2 and "SPU_AUDIT_URL" in served.stderr
