"""Input models shared by a tool and its engine module: ``dft_run``'s arguments are also the options of a
DFT calculator (``tools_server.qc.dft.make_calculator``), so they live apart from both."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from tools_server.molecules import MoleculeText

_MOL_DESC = (
    "SMILES (3D built with ETKDG + MMFF), XYZ text (Å), molblock with 3D coordinates and explicit H, or a "
    "path "
    "to an .sdf/.mol/.xyz file ('file.sdf#k' = record k, from 0), e.g. an artifact of chem_conformers."
)


class DftInput(BaseModel):
    molecule: MoleculeText = Field(..., description=_MOL_DESC)
    task: Literal["energy", "optimize", "tddft", "frequencies"] = Field(
        "energy",
        description="energy; optimize (geomeTRIC); tddft (vertical excitations at the given "
        "geometry); frequencies (analytic Hessian, harmonic thermochemistry; small molecules, CPU).",
    )
    functional: str = Field(
        "B3LYP",
        description="libxc/PySCF name: B3LYP, PBE0, PBE, CAM-B3LYP, M062X, "
        "wB97X-V, TPSS ...; 'HF' for Hartree-Fock.",
    )
    basis: str = Field(
        "def2-SVP",
        description="Basis set name known to PySCF (sto-3g, 6-31g*, def2-svp, def2-tzvp, cc-pvdz ...).",
    )
    charge: int | None = Field(
        None, ge=-20, le=20, description="Default: formal charge of the SMILES/molblock."
    )
    multiplicity: int | None = Field(None, ge=1, le=11, description="2S+1 (UKS/UHF when > 1).")
    dispersion: Literal["none", "d3bj", "d3zero", "d4"] = Field("none", description="Empirical dispersion.")
    solvent: str | None = Field(
        None, description="Implicit solvent name (water, methanol, ...) or dielectric."
    )
    solvent_model: Literal["pcm", "smd"] = Field("pcm", description="PCM (C-PCM/IEF-PCM) or SMD.")
    density_fitting: bool = Field(True, description="RI-J/K density fitting (faster; ~1e-5 Eh differences).")
    n_states: int = Field(5, ge=1, le=50, description="TDDFT: number of excited states.")
    triplets: bool = Field(False, description="TDDFT: triplet instead of singlet excitations.")
    tda: bool = Field(False, description="TDDFT: Tamm-Dancoff approximation.")
    temperature_k: float = Field(298.15, gt=0, le=5000)
    pressure_pa: float = Field(101325.0, gt=0)
    device: Literal["auto", "cpu", "gpu"] = Field(
        "auto",
        description="auto: GPU (gpu4pyscf) when present and its FP64 rate makes it worthwhile, else CPU.",
    )
    max_steps: int = Field(100, ge=1, le=500, description="Maximum optimisation steps.")
    grid_level: int = Field(3, ge=0, le=9, description="DFT integration grid level (PySCF).")
    conv_tol_hartree: float = Field(1e-9, gt=0, le=1e-4, description="SCF energy convergence (Eh).")
