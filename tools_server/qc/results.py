"""The result types of the quantum-chemistry tools: ``xtb_run``'s batch and its items (built by
:func:`tools_server.qc.xtb.run_item`, in a worker or a pool process), ``xtb_conformers``' ensemble and
``dft_run``'s one molecule."""

from __future__ import annotations

from typing import Any

from tools_server.engines.conformers import ConformerRow, ConformerSearchResult
from tools_server.engines.optimize import OptimizationReport
from tools_server.engines.task import FrequencyReport, TaskItem, Thermo
from tools_server.plugin import BatchResult, ToolResult


class XtbItem(TaskItem):
    """One molecule of ``xtb_run``."""

    homo_ev: float | None = None
    lumo_ev: float | None = None
    gap_ev: float | None = None
    dipole_debye: float | None = None
    dipole_vector_debye: list[float] | None = None
    partial_charges_e: list[float] | None = None
    partial_charges_e_sum: float | None = None
    solvation_free_energy_kcal_mol: float | None = None
    solvation_model: str | None = None
    gas_phase_energy_hartree: float | None = None


class XtbResult(BatchResult):
    method: str
    engine: str
    task: str
    solvation: str
    items: list[XtbItem]


class XtbConformerRow(ConformerRow):
    gap_ev: float | None = None
    dipole_debye: float | None = None


class XtbConformersResult(ConformerSearchResult):
    method: str
    solvation: str
    conformers: list[XtbConformerRow]


class DftResult(ToolResult):
    method: str
    basis: str
    task: str
    dispersion: str
    density_fitting: bool
    solvation: str
    smiles: str | None = None
    formula: str
    n_atoms: int
    n_basis: int
    charge: int
    multiplicity: int
    reference: str
    device: str
    device_reason: str
    scf: dict[str, Any]
    energy_hartree: float
    homo_ev: float | None = None
    lumo_ev: float | None = None
    gap_ev: float | None = None
    dipole_debye: float | None = None
    dipole_vector_debye: list[float] | None = None
    dipole_note: str | None = None
    mulliken_charges_e: list[float] | None = None
    charges_note: str | None = None
    dispersion_energy_hartree: float | None = None
    optimization: OptimizationReport | None = None
    geometry_xyz: str | None = None
    geometry_sdf: str | None = None
    frequencies: FrequencyReport | None = None
    thermo: Thermo | None = None
    excitations: dict[str, Any] | None = None
