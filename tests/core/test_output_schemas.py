"""Every tool declares its result type: ``tools/list`` carries an ``outputSchema`` for each, and each tool's
real output, called over the real MCP client on small inputs (real engines, tiny models built here, the
web providers on a loopback farm), validates against it. The MCP client itself re-validates every
``structuredContent`` against the listed schema and raises on a mismatch; the test validates again with
``jsonschema`` so a failure names the tool and the field. Also checked: the answer of a job still running,
and a result moved to an artifact for being over the size budget."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
from jsonschema.validators import validator_for

from tools_server.core.results import JobStatus

ROOT = Path(__file__).resolve().parents[2]
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
    assert failures == []
    # job_wait returns a finished job's own result; job_cancel the job's state
    job_id = results["xtb_run"]["provenance"]["job_id"]
    _check(schemas["job_wait"], mcp.call_ok("job_wait", {"job_id": job_id}), "job_wait")
    _check(schemas["job_cancel"], mcp.call_ok("job_cancel", {"job_id": job_id}), "job_cancel")
    covered = set(results) | {"job_wait", "job_cancel"}
    print(f"output schemas checked on real results: {len(covered & set(listed))} of {len(listed)} tools")
    assert covered == set(listed), sorted(set(listed) - covered)
    # what the results say, so the calls above are known to have done their work
    assert results["xtb_run"]["items"][0]["frequencies"]["n_imaginary"] == 0
    assert results["mlip_run"]["items"][1]["error"]["code"] == "unsupported_element"
    assert results["dft_run"]["optimization"]["converged"] and results["dft_run"]["geometry_xyz"]
    assert results["xtb_conformers"]["conformers"][0]["rank"] == 0
    assert results["mlip_conformers"]["conformers"][0]["rank"] == 0


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
