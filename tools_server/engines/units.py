"""The unit conversions every engine uses, from ``scipy.constants`` (CODATA 2018).

Units, everywhere in the procedure layer and in every engine's results: energies in Hartree (Eh),
relative energies in kcal/mol, orbital and excitation energies in eV, forces in eV/Å (the ML potentials'
own unit, named in their keys), coordinates in Å at every interface and in Bohr inside the calculators,
gradients in Hartree/Bohr, wavenumbers in cm⁻¹, dipoles in Debye, entropies in cal/(mol K).
"""

from __future__ import annotations

from functools import cache


@cache
def ev_per_hartree() -> float:
    """CODATA 2018 from scipy (ASE's ``units`` default to CODATA 2014)."""
    from scipy.constants import physical_constants

    return physical_constants["Hartree energy in eV"][0]


@cache
def angstrom_per_bohr() -> float:
    from scipy.constants import physical_constants

    return physical_constants["Bohr radius"][0] * 1e10


@cache
def bohr_per_angstrom() -> float:
    from scipy.constants import physical_constants

    return 1e-10 / physical_constants["Bohr radius"][0]


@cache
def kcal_mol_per_hartree() -> float:
    from scipy.constants import N_A, calorie, physical_constants

    return physical_constants["Hartree energy"][0] * N_A / (1000 * calorie)


@cache
def k_hartree_per_kelvin() -> float:
    """Boltzmann's constant in Hartree/K."""
    from scipy.constants import k, physical_constants

    return k / physical_constants["Hartree energy"][0]
