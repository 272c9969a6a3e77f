"""The registry's rules, the domain declarations, wait_s, job lookup and pruning, without a server."""

from __future__ import annotations

import time

import pytest
from pydantic import BaseModel

from spu_common.error_codes import SHARED_ERROR_CODES
from tools_server.core.context import ToolContext
from tools_server.core.domain import Domain, Engine
from tools_server.core.errors import ERROR_CODES, ToolError
from tools_server.core.jobs import Job, JobManager, JobStore
from tools_server.core.registry import Registry, load_registry, tool
from tools_server.core.results import ToolResult
from tools_server.core.waits import WAIT_S_DEFAULT, parse_wait_s


class Number(BaseModel):
    x: float


def test_context_is_found_by_annotation_whatever_its_name():
    @tool(name="t_ctx_named")
    def with_context(args: Number, helper: ToolContext) -> dict:
        """Doc."""
        return {"tool": helper.tool}

    @tool(name="t_no_ctx")
    def without(args: Number) -> dict:
        """Doc."""
        return {"x": args.x}

    spec, plain = with_context.__spu_tool__, without.__spu_tool__
    assert spec.context_param == "helper" and plain.context_param is None
    assert spec.call(Number(x=1), ToolContext("t_ctx_named", "j-1")) == {"tool": "t_ctx_named"}
    assert plain.call(Number(x=2), ToolContext("t_no_ctx", "j-2")) == {"x": 2}


def test_an_unannotated_extra_parameter_is_refused():
    with pytest.raises(TypeError, match="annotated ToolContext"):

        @tool(name="t_bad")
        def bad(args: Number, something) -> dict:
            """Doc."""
            return {}


@pytest.fixture(autouse=True)
def _error_codes_restored():
    """Test domains declare codes in the process-wide table: put it back, so a later test (the docs list of
    codes) sees only the real domains' codes whatever order the tests run in."""
    from tools_server.core import errors
    from tools_server.core.registry import load_registry

    load_registry()  # the real domains' codes first, so the snapshot holds them
    codes, owners = dict(errors.ERROR_CODES), dict(errors._OWNERS)
    yield
    errors.ERROR_CODES.clear()
    errors.ERROR_CODES.update(codes)
    errors._OWNERS.clear()
    errors._OWNERS.update(owners)


def test_domain_error_codes_are_registered_and_typos_refused():
    Domain(name="t_domain", tool_modules=(), error_codes={"t_domain_refused": "Do the other thing."})
    assert ToolError("t_domain_refused", "no").hint == "Do the other thing."
    with pytest.raises(ValueError, match="declare it"):
        ToolError("t_domain_refuse", "typo")
    assert set(ERROR_CODES) >= {"invalid_input", "timeout", "engine_crashed"}


def test_a_shared_code_has_one_hint_whatever_domain_loads_first():
    """Before, the first domain to load set the hint: a dock worker told a model that Vina types H C N O …
    for an xTB molecule, a chem one that a basis set must define it."""
    import subprocess
    import sys

    code = (
        "import sys; from importlib import import_module\n"
        "for name in sys.argv[1:]: import_module(name)\n"
        "from tools_server.core.errors import ERROR_CODES\n"
        "print(ERROR_CODES['unsupported_element']); print(ERROR_CODES['weights_missing'])\n"
    )
    orders = [
        ("tools_server.dock", "tools_server.chem", "tools_server.mlip"),
        ("tools_server.mlip", "tools_server.qc", "tools_server.md"),
        ("tools_server.md", "tools_server.protein"),
    ]
    outs = {
        subprocess.run(
            [sys.executable, "-c", code, *order], capture_output=True, text=True, check=True
        ).stdout
        for order in orders
    }
    assert outs == {
        SHARED_ERROR_CODES["unsupported_element"] + "\n" + SHARED_ERROR_CODES["weights_missing"] + "\n"
    }


def test_no_domain_declares_a_shared_code_again_and_a_second_hint_is_refused():
    registry = load_registry()
    assert not [
        (d.name, c) for d in registry.domains.values() for c in d.error_codes if c in SHARED_ERROR_CODES
    ]
    with pytest.raises(ValueError, match=r"already declared by spu_common\.error_codes"):
        Domain(name="t_hints", tool_modules=(), error_codes={"unsupported_element": "Another hint."})
    assert ERROR_CODES["unsupported_element"] == SHARED_ERROR_CODES["unsupported_element"]
    # the same declaration twice (a module imported in the server and again in a worker) is fine
    for _ in range(2):
        Domain(name="t_twice", tool_modules=(), error_codes={"t_twice_code": "Same hint."})


def test_every_code_the_server_raises_is_declared():
    """An undeclared code passes only with the raiser's own hint (a plugin's code), so the server's own raise
    sites are read here: each literal code must be declared, shared or by its domain."""
    import ast
    from pathlib import Path

    load_registry()
    raised = set()
    for path in (Path(__file__).resolve().parents[2] / "tools_server").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.Call):
                continue
            callee = getattr(node.func, "id", getattr(node.func, "attr", None))
            if (
                callee in ("ToolError", "MoleculeError")
                and node.args
                and isinstance(node.args[0], ast.Constant)
            ):
                raised.add((path.name, node.args[0].value))
    assert len(raised) > 50
    assert [(name, code) for name, code in sorted(raised) if code not in ERROR_CODES] == []


def test_every_in_repo_domain_loads_through_entry_points():
    registry = load_registry()
    assert {"chem", "qc", "web", "md", "protein", "ranking"} <= set(registry.domains)
    assert registry.domain_of["xtb_run"] == "qc" and registry.domain_of["web_fetch"] == "web"
    assert registry.engines()["rdkit"].version() is not None
    # the codes each domain declares are known once it is loaded
    assert {"invalid_smiles", "too_large_for_cpu", "url_refused", "invalid_mutation"} <= set(ERROR_CODES)
    names = [c.name for c in registry.doctor_checks()]
    assert {"rdkit", "tblite", "pyscf", "openmm", "torch", "trafilatura"} <= set(names)


def test_engine_version_from_the_first_installed_distribution():
    engine = Engine("numpy", ("numpy-cuda99x-not-installed", "numpy"))
    import numpy

    assert engine.version() == numpy.__version__
    assert Engine("nothing_here", ("no-such-dist",)).version() is None
    registry = Registry()
    registry.domains["d"] = Domain(name="d", tool_modules=(), engines=(engine,))
    assert registry.engine_versions(("numpy", "scipy"))["numpy"] == numpy.__version__


@pytest.mark.parametrize("bad", [-1, 601, "soon", float("nan"), True, [5]])
def test_wait_s_out_of_bounds_is_invalid_input(bad):
    with pytest.raises(ToolError) as err:
        parse_wait_s(bad)
    assert err.value.code == "invalid_input" and "between 0 and 600" in err.value.message


def test_wait_s_defaults_and_accepts_numbers():
    assert parse_wait_s(None) == WAIT_S_DEFAULT
    assert parse_wait_s("2.5") == 2.5 and parse_wait_s(600) == 600.0


def _finished_record(job_id: str, finished: float) -> Job:
    job = Job(job_id, "test_square", "spu_testing_tools", {"x": 2}, "cpu", 30.0, None)
    job.status, job.result, job.finished, job.progress = "done", {"square": 4}, finished, 1.0
    job._done.set()
    return job


def test_lookup_always_returns_a_job(tmp_path):
    store = JobStore(tmp_path)
    store.save(_finished_record("test_square-00aa", time.time()))
    found = JobManager(store=store).lookup("test_square-00aa")
    assert isinstance(found, Job) and found.done and found.result == {"square": 4}
    with pytest.raises(ToolError) as err:
        JobManager(store=store).lookup("test_square-ffff")
    assert err.value.code == "job_not_found"


def test_finished_jobs_are_pruned_from_memory_and_disk(tmp_path):
    import os

    store = JobStore(tmp_path)
    manager = JobManager(store=store, retention_s=3600)
    old, fresh = (
        _finished_record("test_square-0001", time.time() - 7200),
        _finished_record("test_square-0002", time.time()),
    )
    for job in (old, fresh):
        manager.jobs[job.job_id] = job
        store.save(job)
    two_hours_ago = time.time() - 7200
    os.utime(tmp_path / "test_square-0001.json", (two_hours_ago, two_hours_ago))
    manager.prune()
    assert set(manager.jobs) == {"test_square-0002"}
    assert not (tmp_path / "test_square-0001.json").exists()
    assert (tmp_path / "test_square-0002.json").exists()


class Total(ToolResult):  # module level, as a tool's result type is (annotations are resolved by name)
    total_mol: float


def test_the_result_type_is_the_output_schema_and_a_result_that_drifts_is_refused():
    @tool(name="t_typed")
    def typed(args: Number) -> Total:
        """Doc."""
        return Total(total_mol=args.x)

    @tool(name="t_drifted", resource="cpu")
    def drifted(args: Number) -> Total:
        """Doc."""
        return {"total_moles": args.x}

    @tool(name="t_untyped")
    def untyped(args: Number) -> dict:
        """Doc."""
        return {"anything": args.x}

    spec = typed.__spu_tool__
    schema = spec.output_schema()
    assert schema["properties"]["total_mol"] == {"type": "number"} and schema["additionalProperties"] is False
    assert {"provenance", "warnings", "result_artifact"} <= set(schema["properties"])
    assert spec.call(Number(x=2)) == {"total_mol": 2.0}
    # a job's schema also admits the answer of a job still running
    assert drifted.__spu_tool__.output_schema()["anyOf"][1]["properties"]["status"]["enum"] == [
        "queued",
        "running",
    ]
    with pytest.raises(ToolError) as err:
        drifted.__spu_tool__.call(Number(x=1))
    assert (
        err.value.code == "internal_error"
        and "declared to return Total but returned dict" in err.value.message
    )
    assert untyped.__spu_tool__.output_schema() is None
    assert untyped.__spu_tool__.call(Number(x=1)) == {"anything": 1.0}
