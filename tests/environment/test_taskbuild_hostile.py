"""`spu task build` against hostile or broken specs: YAML bombs, files outside the spec folder, cells that
other readers would misread, output paths that loop. Each ends in a listed problem, never a traceback."""

from __future__ import annotations

import json
import os

import pytest
import yaml
from test_taskbuild import ROWS, _spu, base_spec, codes, write_spec

from environment.taskbuild import SpecError, build_task, load_spec


def _spec_text(extra: str) -> str:
    return yaml.safe_dump(base_spec(), sort_keys=False) + extra


def test_an_alias_bomb_is_refused_at_once(tmp_path):
    # nine levels of nine aliases: 387 million strings once expanded (30-100 s into MemoryError before)
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 9) + "]" for i in range(1, 10)]
    root = write_spec(tmp_path / "spec")
    (root / "spec.yaml").write_text(_spec_text("\n".join(lines) + "\n"))
    with pytest.raises(SpecError) as info:
        load_spec(root)
    assert codes(info.value) == ["yaml-alias"]
    assert len(str(info.value)) < 500


def test_deep_nesting_is_refused_without_recursion_error(tmp_path):
    root = write_spec(tmp_path / "spec")
    (root / "spec.yaml").write_text(_spec_text("deep: " + "[" * 5000 + "]" * 5000 + "\n"))
    with pytest.raises(SpecError) as info:
        load_spec(root)
    assert codes(info.value) == ["yaml-too-deep"]


def test_a_huge_spec_yaml_is_refused_before_parsing(tmp_path):
    root = write_spec(tmp_path / "spec")
    (root / "spec.yaml").write_text(_spec_text("# " + "x" * 2_000_000 + "\n"))
    with pytest.raises(SpecError) as info:
        load_spec(root)
    assert codes(info.value) == ["spec-too-large"]


def test_experiments_outside_the_spec_folder_are_refused_and_never_quoted(tmp_path):
    secret = tmp_path / "secret.csv"
    secret.write_text("TOP-SECRET-HEADER,more\n1,2\n")
    for name in (str(secret), "../secret.csv"):
        spec = base_spec()
        spec["experiments"] = name
        root = write_spec(tmp_path / "spec", spec)
        with pytest.raises(SpecError) as info:
            load_spec(root)
        assert "bad-experiments" in codes(info.value)
        assert "TOP-SECRET-HEADER" not in str(info.value)


def test_experiments_through_a_link_out_of_the_folder_are_refused(tmp_path):
    outside = tmp_path / "outside.csv"
    outside.write_text("key,name,temperature_c,value,source\n" + "\n".join(",".join(r) for r in ROWS) + "\n")
    spec = base_spec()
    spec["experiments"] = "linked.csv"
    root = write_spec(tmp_path / "spec", spec)
    (root / "linked.csv").symlink_to(outside)
    with pytest.raises(SpecError) as info:
        load_spec(root)
    assert "bad-experiments" in codes(info.value)


def test_a_link_inside_an_inputs_folder_never_copies_its_target(tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text("TOP-SECRET-CONTENT\n")
    spec = base_spec()
    spec["inputs"] = ["structures"]
    root = write_spec(tmp_path / "spec", spec)
    (root / "structures").mkdir()
    (root / "structures" / "alpha.sdf").write_text("a structure\n")
    (root / "structures" / "leak.txt").symlink_to(secret)
    with pytest.raises(SpecError) as info:
        build_task(root, tmp_path / "out")
    assert codes(info.value) == ["bad-input"] and "leak.txt" in str(info.value)
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    "value",
    ["1_480", "\u0661\u0662", "1\x002", "0x10", "1e400", "\uff11\uff12"],
    ids=["underscore", "arabic-indic", "nul", "hex", "overflow", "fullwidth"],
)
def test_values_other_readers_would_misread_are_refused(tmp_path, value):
    rows = [list(r) for r in ROWS]
    rows[0][3] = value
    root = write_spec(tmp_path / "spec", rows=rows)
    with pytest.raises(SpecError) as info:
        load_spec(root)
    assert set(codes(info.value)) & {"csv-bad-value", "csv-bad-cell"}, codes(info.value)


def test_a_nul_in_a_setup_cell_is_refused(tmp_path):
    rows = [list(r) for r in ROWS]
    rows[1][1] = "compound\x00two"
    root = write_spec(tmp_path / "spec", rows=rows)
    with pytest.raises(SpecError) as info:
        load_spec(root)
    assert codes(info.value) == ["csv-bad-cell"]


def test_formula_like_cells_are_warned_about_and_written_as_text(tmp_path):
    rows = [list(r) for r in ROWS]
    rows[0][1] = '=HYPERLINK("http://example.invalid","x")'
    rows[1][1] = "-1.5"  # a number, not a formula
    result = build_task(write_spec(tmp_path / "spec", rows=rows), tmp_path / "out")
    assert [w.code for w in result.warnings] == ["formula-like-cell"]
    assert "alpha.name" in str(result.warnings[0])
    targets = (tmp_path / "out" / "task" / "targets.csv").read_text()
    assert "'=HYPERLINK(" in targets and ",-1.5," in targets


def test_an_output_path_that_loops_is_a_clear_error(tmp_path):
    loop = tmp_path / "loop"
    os.symlink(loop, loop)
    result = _spu("task", "build", str(write_spec(tmp_path / "spec")), "-o", str(loop / "sub"))
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output and "[bad-output]" in result.output
    result = _spu("task", "build", str(tmp_path / "spec"), "-o", str(loop))
    assert result.exit_code == 2 and "[bad-output]" in result.output


def test_a_citation_without_a_title_is_an_author_warning(tmp_path):
    spec = base_spec()
    spec["citation"] = "Quackenbush AB, Zeller CD, J Test Chem 2021, 10.1234/jtc.2021.555"
    result = build_task(write_spec(tmp_path / "spec", spec), tmp_path / "out")
    assert [w.code for w in result.warnings] == ["no-title"]


def test_show_exits_1_when_the_task_drifted_from_its_spec(tmp_path):
    root = tmp_path / "chem-test-build"
    write_spec(root / "spec")
    assert _spu("task", "build", str(root / "spec"), "-o", str(root)).exit_code == 0
    assert _spu("task", "show", str(root / "task")).exit_code == 0
    (root / "task" / "instruction.md").write_text("edited by hand\n")
    result = _spu("task", "show", str(root / "task"))
    assert (
        result.exit_code == 1
        and "differs from a fresh build of the spec: task/instruction.md" in result.output
    )
    result = _spu("task", "show", str(root / "task"), "--json")
    assert result.exit_code == 1
    assert json.loads(result.output)["authoring"]["differs_from_build"] == ["task/instruction.md"]
