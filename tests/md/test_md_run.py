"""md_run and md_analyze on real OpenMM runs small enough for two CPU cores."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

pytest.importorskip("openmm")
pytest.importorskip("mdtraj")

from tools_server.core.errors import ToolError
from tools_server.md.tools import MdAnalyzeInput, MdRunInput, md_analyze, md_run

DATA = Path(__file__).resolve().parent / "data"

# TIP3P density at 298 K and 1 atm: 0.982 g/cm3 (Jorgensen et al., J. Chem. Phys. 79, 926 (1983));
# with PME and a long-range correction 0.98 g/cm3 (Vega & Abascal, PCCP 13, 19663 (2011), Table 2).
TIP3P_DENSITY_G_CM3 = 0.98


@pytest.mark.slow
def test_tip3p_water_density_npt(md_ctx):
    args = MdRunInput(
        components=[{"smiles": "O", "count": 300}],
        temperature_k=300,
        pressure_bar=1.0,
        cutoff_nm=0.9,
        equilibration_ps=5,
        production_ps=10,
        report_interval_ps=0.5,
        nve_check_ps=1,
    )
    out = md_run(args, md_ctx())
    prod = out.production
    assert out.system["force_field"].startswith("TIP3P")
    assert out.protocol["ensemble"] == "NPT"
    # Within 3 % of the published TIP3P density after a 10 ps average (box of 300 waters).
    assert abs(prod["density_g_cm3_mean"] - TIP3P_DENSITY_G_CM3) < 0.03 * TIP3P_DENSITY_G_CM3
    assert abs(prod["temperature_k_mean"] - 300) < 15
    assert Path(out.artifacts["trajectory_xtc"]).stat().st_size > 0
    rows = list(csv.DictReader(Path(out.artifacts["thermo_csv"]).read_text().splitlines()))
    assert sum(r["phase"] == "production" for r in rows) == 20

    analysis = md_analyze(
        MdAnalyzeInput(
            trajectory_path=out.artifacts["trajectory_xtc"], topology_path=out.artifacts["topology_pdb"]
        ),
        md_ctx("md_analyze"),
    )
    assert analysis.n_frames == 20
    assert analysis.frame_interval_ps == pytest.approx(0.5)
    # Box volumes in the XTC give the same density as the engine's own record (XTC stores 3 decimals).
    assert analysis.density["density_g_cm3_mean"] == pytest.approx(prod["density_g_cm3_mean"], abs=0.005)
    # TIP3P self-diffusion is about 5-6e-5 cm2/s (Mark & Nilsson, J. Phys. Chem. A 105, 9954 (2001));
    # a 10 ps run only pins the order of magnitude.
    assert 1.0 < analysis.diffusion["diffusion_1e-5_cm2_s"] < 15.0


@pytest.mark.slow
def test_peptide_in_implicit_solvent(md_ctx):
    args = MdRunInput(
        pdb_path=str(DATA / "peptide_kwtvdage.pdb"),
        solvent="obc2",
        ph=7.0,
        equilibration_ps=1,
        production_ps=3,
        report_interval_ps=0.25,
        nve_check_ps=0.5,
    )
    out = md_run(args, md_ctx())
    system = out.system
    assert system["solvent"] == "obc2" and system["n_waters"] == 0
    assert system["n_residues_protein"] == 8
    # KWTVDAGE at pH 7: charged termini (+1, -1), Lys +1, Asp -1, Glu -1 -> net -1 e.
    assert system["net_charge_e"] == pytest.approx(-1.0, abs=1e-3)
    # Hydrogens added by PDBFixer: 123 atoms for this sequence and protonation state.
    assert out.n_atoms == 123
    assert out.protocol["ensemble"] == "NVT"
    assert out.minimization["final_potential_kj_mol"] < out.minimization["initial_potential_kj_mol"]
    assert abs(out.production["temperature_k_mean"] - 300) < 30
    assert "drift_kj_mol_per_ns" in out.nve_check

    analysis = md_analyze(
        MdAnalyzeInput(
            trajectory_path=out.artifacts["trajectory_xtc"], topology_path=out.artifacts["topology_pdb"]
        ),
        md_ctx("md_analyze"),
    )
    assert analysis.selection == "protein"
    assert analysis.rmsf["n_residues"] == 8 and len(analysis.rmsf["rmsf_nm"]) == 8
    assert analysis.rmsd["rmsd_nm_max"] < 1.0
    # An 8-residue peptide: Rg between a compact (0.5 nm) and fully extended (~1.2 nm) chain.
    assert 0.4 < analysis.rg["rg_nm_mean"] < 1.3
    assert analysis.sasa["sasa_nm2_mean"] > 5


@pytest.mark.slow
def test_mmff_liquid_runs_and_keeps_temperature(md_ctx):
    args = MdRunInput(
        components=[{"smiles": "CO", "count": 60}],
        cutoff_nm=0.7,
        ensemble="nvt",
        # Langevin at 1/ps needs about a picosecond to refill the minimised box's kinetic energy
        equilibration_ps=1.2,
        production_ps=0.2,
        report_interval_ps=0.05,
        nve_check_ps=0,
    )
    out = md_run(args, md_ctx())
    assert out.system["force_field"].startswith("MMFF94")
    assert out.n_atoms == 360
    assert abs(out.production["temperature_k_mean"] - 300) < 30
    # NVT at the packing density: 0.85 x the van der Waals-volume estimate, a plausible liquid density.
    assert 0.4 < out.production["density_g_cm3_mean"] < 1.0


def test_exactly_one_source_is_required():
    with pytest.raises(ValueError, match="exactly one"):
        MdRunInput(production_ps=1)
    with pytest.raises(ValueError, match="hydrogen_mass_repartitioning"):
        MdRunInput(components=[{"smiles": "O", "count": 10}], timestep_fs=4)


def test_too_long_run_is_refused_before_launch(md_ctx):
    args = MdRunInput(components=[{"smiles": "O", "count": 300}], production_ps=1_000_000, max_wall_s=60)
    with pytest.raises(ToolError) as err:
        md_run(args, md_ctx())
    assert err.value.code == "too_large_for_cpu"
    assert err.value.details["estimate_s"] > 60


def test_bad_smiles_and_unsupported_ion(md_ctx):
    with pytest.raises(ToolError) as err:
        md_run(MdRunInput(components=[{"smiles": "C1CC", "count": 5}], production_ps=1), md_ctx())
    assert err.value.code == "invalid_smiles"
    with pytest.raises(ToolError) as err:
        md_run(
            MdRunInput(
                components=[{"smiles": "F[P-](F)(F)(F)(F)F", "count": 5}, {"smiles": "[Li+]", "count": 5}],
                production_ps=1,
            ),
            md_ctx(),
        )
    assert err.value.code == "unsupported_element"


def test_missing_structure_file(md_ctx, tmp_path):
    with pytest.raises(ToolError) as err:
        md_run(MdRunInput(pdb_path=str(tmp_path / "nope.pdb"), production_ps=1), md_ctx())
    assert err.value.code == "invalid_input"


def test_a_box_smaller_than_twice_the_cutoff_is_invalid_input(md_ctx):
    # 20 ethanol at liquid density fill about 2.3 nm^3, an edge near 1.3 nm: below 2 x 1.0 nm
    with pytest.raises(ToolError) as err:
        md_run(MdRunInput(components=[{"smiles": "CCO", "count": 20}], production_ps=1), md_ctx())
    assert err.value.code == "invalid_input"
    assert "twice the nonbonded cutoff" in err.value.message
    details = err.value.details
    assert details["box_edge_nm"] < 2.0 and details["cutoff_nm"] == 1.0
    # the hinted count fits: edge scales with the cube root of the count
    assert details["box_edge_nm"] * (details["min_molecules"] / 20) ** (1 / 3) >= 2.0
    assert str(details["min_molecules"]) in err.value.hint
