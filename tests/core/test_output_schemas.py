"""Every tool declares its result type: ``tools/list`` carries an ``outputSchema`` for each, and each tool's
real output, called over the real MCP client on small inputs (real engines, tiny models built here, the
web providers on a loopback farm), validates against it. The tools are the ones ``tools/list`` names (the
domains, the server's own tools and a test plugin module, ``spu_typed_tools``): a tool without inputs here
fails the test by name, so a new tool is covered. The MCP client itself re-validates every
``structuredContent`` against the listed schema and raises on a mismatch; the test validates again with
``jsonschema`` so a failure names the tool and the field. The inputs include what makes NumPy produce NaN
and infinities (a descriptor RDKit cannot compute, a constant series' correlation, float32 overflow): they
arrive as null where the schema says so, and as the engine's error where they mean failure. Also checked:
the answer of a job still running, and a result moved to an artifact for being over the size budget."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import pytest
from jsonschema.validators import validator_for

from tools_server.core.results import JobStatus

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
ASPIRIN = "CC(=O)OC1=CC=CC=C1C(=O)O"
TEST_DATA = ROOT / "tests"


def _web_farm_module():
    """The loopback provider farm of the web tests (tests/web/conftest.py), loaded as a module."""
    spec = importlib.util.spec_from_file_location("spu_web_farm", TEST_DATA / "web" / "conftest.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _tiny_weights(weights: Path) -> None:
    """Random-weight ANI-2x, ESM-2 and ESMFold in the loaders' own formats (nothing is downloaded)."""
    import torch
    from transformers import EsmConfig, EsmForProteinFolding

    from tools_server.mlip.models import random_ani2x
    from tools_server.protein.weights import save_random_esm2

    target = weights / "torchani" / "StateDicts" / "ani2x_state_dict.pt"
    target.parent.mkdir(parents=True)
    torch.save(random_ani2x().state_dict(), target)
    save_random_esm2(weights / "esm" / "esm2_t2_tiny_test.pt")
    cfg = EsmConfig(
        vocab_size=33, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
        max_position_embeddings=1026, position_embedding_type="rotary", token_dropout=True, mask_token_id=32,
        pad_token_id=1, is_folding_model=True,
        esmfold_config={
            "trunk": {
                "num_blocks": 1, "sequence_state_dim": 32, "pairwise_state_dim": 16, "sequence_head_width": 8,
                "pairwise_head_width": 8,
                "structure_module": {
                    "sequence_dim": 32, "pairwise_dim": 16, "ipa_dim": 16, "num_heads_ipa": 2,
                    "num_qk_points": 2, "num_v_points": 2, "num_blocks": 1, "num_transition_layers": 1,
                    "resnet_dim": 16, "num_resnet_blocks": 1,
                },
            },
            "lddt_head_hid_dim": 16,
        },
    )  # fmt: skip
    torch.manual_seed(0)
    EsmForProteinFolding(cfg).save_pretrained(weights / "esmfold" / "tiny")


@pytest.fixture
def server(spu_env, monkeypatch, tmp_path, start_mcp_server):
    """``spu serve`` over stdio with the web providers on the loopback farm and tiny model weights."""
    web = _web_farm_module()
    farm = web.Farm()
    farm.server.farm = farm
    try:
        env = web.web_env.__wrapped__(spu_env, farm, monkeypatch)  # the web tests' own environment
        weights = tmp_path / "weights"
        _tiny_weights(weights)
        env |= {"SPU_WEIGHTS_DIR": str(weights), "HF_HUB_OFFLINE": "1", "TORCH_HOME": str(tmp_path / "th")}
        env |= {"SPU_TOOL_MODULES": "spu_typed_tools", "PYTHONPATH": f"{HERE}{os.pathsep}{env['PYTHONPATH']}"}
        yield start_mcp_server(env), farm
    finally:
        farm.close()


def _calls(farm) -> dict[str, dict]:
    """Small real inputs, one call per tool (job tools wait for their result)."""
    from environment.demo_tasks import demo_task_dir
    from spu_common.submission import fallback_submission
    from spu_common.task import load_task

    task_dir = demo_task_dir("aromatic-acidity")
    wait = {"wait_s": 600}
    peptide = str(TEST_DATA / "md" / "data" / "peptide_kwtvdage.pdb")
    receptor = str(TEST_DATA / "dock" / "data" / "t4l99a_pxylene.pdb")
    pka_pdb = str(TEST_DATA / "pka" / "data" / "1HPX.pdb")
    return {
        "chem_parse": {"molecules": [ASPIRIN, "C1CC("]},
        "chem_descriptors": {"molecules": ["CCO"], "preset": "physchem"},
        "chem_similarity": {"molecules": ["CCO", "CCN", "c1ccccc1"]},
        "chem_substructure": {"molecules": ["CCO", "CC"], "smarts": ["[OX2H]"]},
        "chem_conformers": {"molecules": ["CCO"], "n_conformers": 2, **wait},
        "chem_depict": {"molecules": ["CCO", "c1ccccc1O"], **wait},
        "xtb_run": {"molecules": ["O"], "task": "frequencies", **wait},
        "xtb_conformers": {"molecule": "CCCO", "n_conformers": 3, **wait},
        "dft_run": {"molecule": "O", "functional": "HF", "basis": "sto-3g", "task": "optimize", **wait},
        "mlip_run": {"molecules": ["O", "CBr"], "engine": "ani2x", **wait},
        "mlip_conformers": {"molecule": "CCO", "engine": "ani2x", "n_conformers": 2, "max_steps": 5, **wait},
        "md_run": {
            "pdb_path": peptide,
            "solvent": "obc2",
            "equilibration_ps": 0.2,
            "production_ps": 0.4,
            "report_interval_ps": 0.1,
            "nve_check_ps": 0,
            "minimize_max_iterations": 50,
            **wait,
        },
        "dock": {
            "ligands": ["Cc1ccc(C)cc1"],
            "receptor_path": receptor,
            "box_ligand": "TMP",
            "exhaustiveness": 1,
            "n_poses": 1,
            **wait,
        },
        "protein_pka": {
            "pdb_path": pka_pdb,
            "protonation_states": False,
            **wait,
        },
        "protein_properties": {"sequences": ["MKTAYIAKQRQISFVKSHFSRQLEERLGLIEVQ", "MKT1"]},
        "sequence_align": {"reference": "MKTAYIAK", "query": "MKTVYIAK"},
        "antibody_number": {"sequences": ["MKT"], **wait},
        "protein_embed": {"sequences": ["MKTAYIAK", "MKTVYIAK"], "model": "esm2_t2_tiny_test", **wait},
        "protein_variant_scores": {
            "wild_type": "MKTAYIAKQRQ",
            "variants": ["A4V", "X9Y"],
            "model": "esm2_t2_tiny_test",
            **wait,
        },
        "protein_fold": {"sequence": "MKTAYIAKQR", "model": "tiny", "num_recycles": 1, **wait},
        "ranking_check": {"task_dir": str(task_dir), "draft": fallback_submission(load_task(task_dir))},
        "ranking_aggregate": {"proxies": [{"name": "p", "values": {"a": 1.0, "b": 2.0, "c": 0.5}}]},
        "ranking_compare": {"order_a": ["x", "y", "z"], "order_b": ["z", "y", "x"]},
        "web_search": {"query": "amine pKa", "provider": "brave"},
        "web_fetch": {"url": farm.url("/page.html")},
        "literature_search": {"query": "amine", "source": "europepmc"},
        "pubchem_lookup": {"query": "aspirin"},
        "uniprot_lookup": {"query": "P68871"},
        "pdb_lookup": {"pdb_id": "1CRN"},
        "system_info": {},
        "jobs": {},
        # float32 as an engine computes it: NaN and overflow where "not a number" is the answer (null), and
        # where it is one item failing (engine_error); see spu_typed_tools
        "typed_moments": {"values": [0.0, 2.0, 4.0, 3e38, 3e38], **wait},
    }


#: Second calls that make tools produce NaN or infinity, and what each must become on the wire.
NOT_A_NUMBER = {
    # RDKit gives NaN for the BCUT2D descriptors of a salt: null, the other descriptors numbers
    "chem_descriptors": {"molecules": ["[Na+].[Cl-]"], "preset": "all"},
    # Spearman against values that are all equal is undefined
    "ranking_compare": {"order_a": ["x", "y", "z"], "values_b": {"x": 1.0, "y": 1.0, "z": 1.0}},
    # a proxy with equal values has no agreement with another
    "ranking_aggregate": {
        "proxies": [
            {"name": "flat", "values": {"a": 1.0, "b": 1.0}},
            {"name": "p", "values": {"a": 1, "b": 2}},
        ]
    },
}

#: Tools whose every call here is an error, with the code it must be.
ERRORS = {
    "typed_ratio": ({"values": [1.0, 0.0]}, "engine_error"),  # a NumPy division by zero: infinity
    "typed_old_dict": ({"values": [1.0]}, "internal_error"),  # a dict from a tool that declares a type
}


def _check(schema: dict, value: dict, tool: str) -> None:
    validator = validator_for(schema)(schema)
    errors = sorted(validator.iter_errors(value), key=lambda e: list(e.absolute_path))
    assert not errors, f"{tool}: {[(list(e.absolute_path), e.message[:200]) for e in errors[:3]]}"


def test_every_tool_declares_its_result_and_its_real_output_fits(server):
    mcp, farm = server
    listed = {t.name: t for t in mcp.list_tools()}
    schemas = {name: t.output_schema for name, t in listed.items()}
    assert [name for name, schema in schemas.items() if schema is None] == []
    for name, schema in schemas.items():
        validator_for(schema).check_schema(schema)
        assert schema["type"] == "object", name
    results, failures = {}, []
    for name, arguments in _calls(farm).items():
        try:  # the client validates against the listed schema and raises on a mismatch
            results[name] = mcp.call_ok(name, arguments)
            _check(schemas[name], results[name], name)
        except (AssertionError, RuntimeError) as exc:
            failures.append(f"{name}: {str(exc)[:600]}")
    if "md_run" in results:  # md_analyze reads md_run's trajectory
        art = results["md_run"]["artifacts"]
        paths = {"trajectory_path": art["trajectory_xtc"], "topology_path": art["topology_pdb"]}
        args = {**paths, "analyses": ["rmsd", "rg"], "wait_s": 600}
        results["md_analyze"] = mcp.call_ok("md_analyze", args)
        _check(schemas["md_analyze"], results["md_analyze"], "md_analyze")
    for name, arguments in NOT_A_NUMBER.items():
        sent = mcp.call_ok(name, arguments)
        _check(schemas[name], sent, f"{name} (not a number)")
        results[f"{name} (not a number)"] = sent
    for name, (arguments, code) in ERRORS.items():
        error = mcp.call_error(name, arguments)
        assert error["code"] == code, (name, error)
        results[name] = error
    assert failures == []
    # job_wait returns a finished job's own result; job_cancel the job's state
    job_id = results["xtb_run"]["provenance"]["job_id"]
    _check(schemas["job_wait"], mcp.call_ok("job_wait", {"job_id": job_id}), "job_wait")
    _check(schemas["job_cancel"], mcp.call_ok("job_cancel", {"job_id": job_id}), "job_cancel")
    covered = set(results) | {"job_wait", "job_cancel"}
    print(f"output schemas checked on real results: {len(covered & set(listed))} of {len(listed)} tools")
    missing = sorted(set(listed) - covered)
    assert missing == [], f"give these tools small inputs in _calls: {missing}"
    # what the results say, so the calls above are known to have done their work
    assert results["xtb_run"]["items"][0]["frequencies"]["n_imaginary"] == 0
    assert results["mlip_run"]["items"][1]["error"]["code"] == "unsupported_element"
    assert results["dft_run"]["optimization"]["converged"] and results["dft_run"]["geometry_xyz"]
    assert results["xtb_conformers"]["conformers"][0]["rank"] == 0
    assert results["mlip_conformers"]["conformers"][0]["rank"] == 0
    salt = results["chem_descriptors (not a number)"]["items"][0]["descriptors"]
    assert salt["BCUT2D_MWHI"] is None and salt["NumHDonors"] == 0 and salt["MolWt"] > 58
    assert results["ranking_compare (not a number)"]["spearman"] is None
    assert results["ranking_aggregate (not a number)"]["proxy_agreement"][0]["spearman"] is None
    moments = results["typed_moments"]["items"]
    assert [m.get("relative_spread") for m in moments[:4]] == [
        None,
        1.0,
        pytest.approx(0.8165, abs=1e-4),
        None,
    ]
    assert moments[0]["mean"] == 0.0 and type(moments[0]["n"]) is int
    assert moments[4]["ok"] is False and moments[4]["error"]["code"] == "engine_error"
    assert "return Ratio(...)" in results["typed_old_dict"]["hint"]


def test_a_running_job_and_a_result_over_budget_fit_the_schema(server):
    mcp, _ = server
    schemas = {t.name: t.output_schema for t in mcp.list_tools()}
    running = mcp.call_ok("xtb_conformers", {"molecule": "CCCCCO", "n_conformers": 8, "wait_s": 0})
    assert running["status"] in ("queued", "running"), running
    JobStatus.model_validate(running)
    _check(schemas["xtb_conformers"], running, "xtb_conformers (running)")
    done = mcp.call_ok("job_wait", {"job_id": running["job_id"], "wait_s": 600})
    assert done["n_unique"] >= 1 and done["sdf"].endswith(".sdf")
    _check(schemas["xtb_conformers"], done, "xtb_conformers")
    # 50 molecules: a 50 x 50 similarity matrix inline and the items are over the 20,000-character budget
    smiles = [f"C{'C' * k}O" for k in range(50)]
    big = mcp.call_ok("chem_similarity", {"molecules": smiles})
    assert "result_artifact" in big and "matrix" not in big, sorted(big)
    _check(schemas["chem_similarity"], big, "chem_similarity (over budget)")
