"""Harmonic vibrational analysis and ideal-gas / rigid-rotor / harmonic-oscillator thermochemistry.

Shared by every engine: xTB and the ML potentials (Hessian from finite differences of analytic gradients)
and DFT (PySCF analytic Hessian); :func:`frequencies` takes any calculator.
All constants come from ``scipy.constants``. Inputs: Hessian in Hartree/Bohr², coordinates in Å, masses
in u. Outputs: wavenumbers in cm⁻¹ (imaginary modes as negative numbers), energies in Hartree, entropy
in Hartree/K and cal/(mol K).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

#: Modes with |wavenumber| below this many cm⁻¹ count as imaginary only when negative beyond it: tiny
#: negative values from numerical noise on translations/rotations are not reported as imaginary.
IMAGINARY_THRESHOLD_CM1 = 20.0


def _constants() -> dict[str, float]:
    from scipy import constants as c

    hartree_j = c.physical_constants["Hartree energy"][0]
    bohr_m = c.physical_constants["Bohr radius"][0]
    return {
        "hartree_j": hartree_j,
        "bohr_m": bohr_m,
        "amu_kg": c.physical_constants["atomic mass constant"][0],
        "h": c.h,
        "kB": c.k,
        "c_cm": c.c * 100.0,
        "NA": c.N_A,
        "cal": c.calorie,
        "atm": c.atm,
    }


def finite_difference_hessian(
    gradient: Callable[[Any], Any],
    coords_bohr: Any,
    *,
    step_bohr: float = 0.005,
    progress: Callable[[float], None] | None = None,
) -> Any:
    """Symmetrised Hessian (3N x 3N, Hartree/Bohr²) by central differences of analytic gradients."""
    import numpy as np

    x0 = np.asarray(coords_bohr, dtype=float).ravel()
    n = x0.size
    hess = np.zeros((n, n))
    for k in range(n):
        xp, xm = x0.copy(), x0.copy()
        xp[k] += step_bohr
        xm[k] -= step_bohr
        gp = np.asarray(gradient(xp.reshape(-1, 3))).ravel()
        gm = np.asarray(gradient(xm.reshape(-1, 3))).ravel()
        hess[k] = (gp - gm) / (2 * step_bohr)
        if progress is not None:
            progress((k + 1) / n)
    return 0.5 * (hess + hess.T)


def atomic_masses(numbers: list[int]) -> Any:
    """Masses (u) of the most abundant isotope, as PySCF and xtb use for frequencies."""
    import numpy as np
    from rdkit.Chem import GetPeriodicTable

    table = GetPeriodicTable()
    return np.array([table.GetMostCommonIsotopeMass(int(z)) for z in numbers])


def _rigid_body_basis(coords: Any, masses: Any) -> Any:
    """Orthonormal mass-weighted translation and rotation vectors (columns)."""
    import numpy as np

    sqm = np.sqrt(masses)
    com = (masses[:, None] * coords).sum(0) / masses.sum()
    r = coords - com
    vecs = []
    for axis in range(3):
        t = np.zeros_like(coords)
        t[:, axis] = 1.0
        vecs.append((t * sqm[:, None]).ravel())
    for axis in range(3):
        e = np.zeros(3)
        e[axis] = 1.0
        vecs.append((np.cross(e, r) * sqm[:, None]).ravel())
    basis = np.array(vecs).T
    u, s, _ = np.linalg.svd(basis, full_matrices=False)
    return u[:, s > 1e-6 * s.max()]


@dataclass
class Vibrations:
    wavenumbers_cm1: list[float]  # imaginary as negative
    n_imaginary: int
    linear: bool


def harmonic_analysis(hessian_hartree_bohr2: Any, coords_angstrom: Any, numbers: list[int]) -> Vibrations:
    """Vibrational wavenumbers with translations and rotations projected out."""
    import numpy as np

    k = _constants()
    coords = np.asarray(coords_angstrom, dtype=float).reshape(-1, 3)
    masses = atomic_masses(numbers)
    n = len(numbers)
    if n == 1:
        return Vibrations([], 0, False)
    inv_sqm = 1.0 / np.sqrt(np.repeat(masses, 3))
    mw_hess = hessian_hartree_bohr2 * inv_sqm[:, None] * inv_sqm[None, :]
    rigid = _rigid_body_basis(coords, masses)
    linear = rigid.shape[1] == 5
    projector = np.eye(3 * n) - rigid @ rigid.T
    # Diagonalise in the vibrational subspace only, so the 6 (5) rigid-body modes never mix in.
    vib_basis = np.linalg.svd(projector)[0][:, : 3 * n - rigid.shape[1]]
    evals = np.linalg.eigvalsh(vib_basis.T @ mw_hess @ vib_basis)
    # eigenvalue in Hartree/(Bohr² u) -> angular frequency (1/s) -> wavenumber (1/cm)
    si = evals * k["hartree_j"] / (k["bohr_m"] ** 2 * k["amu_kg"])
    wavenumbers = np.sign(si) * np.sqrt(np.abs(si)) / (2 * np.pi * k["c_cm"])
    values = sorted(float(w) for w in wavenumbers)
    n_imag = sum(1 for w in values if w < -IMAGINARY_THRESHOLD_CM1)
    return Vibrations(values, n_imag, linear)


def rotational_symmetry_number(numbers: list[int], coords_angstrom: Any, tolerance_bohr: float = 0.05) -> int:
    """The rotational symmetry number (sigma) from the point group PySCF detects (table of NIST CCCBDB);
    1 when PySCF is absent."""
    try:
        from pyscf import symm
        from pyscf.symm import geom
    except ImportError:
        return 1
    from tools_server.molecules import element_symbol as _symbol

    atoms = [
        [_symbol(z), tuple(float(v) / _bohr_angstrom() for v in xyz)]
        for z, xyz in zip(numbers, coords_angstrom, strict=True)
    ]
    saved = geom.TOLERANCE
    geom.TOLERANCE = tolerance_bohr
    try:
        group = symm.detect_symm(atoms)[0]
    finally:
        geom.TOLERANCE = saved
    if group in ("SO3", "C1", "Ci", "Cs", "Coov"):
        return 1
    if group == "Dooh":
        return 2
    if group in ("T", "Td"):
        return 12
    if group == "Oh":
        return 24
    if group == "Ih":
        return 60
    digits = int("".join(ch for ch in group if ch.isdigit()) or 1)
    if group[0] == "C":
        return digits
    if group[0] == "D":
        return 2 * digits
    if group[0] == "S":
        return max(1, digits // 2)
    return 1


def _bohr_angstrom() -> float:
    return _constants()["bohr_m"] * 1e10


def thermochemistry(
    energy_hartree: float,
    vibrations: Vibrations,
    coords_angstrom: Any,
    numbers: list[int],
    multiplicity: int,
    *,
    temperature_k: float = 298.15,
    pressure_pa: float = 101325.0,
    symmetry_number: int | None = None,
) -> dict[str, Any]:
    """Ideal gas, rigid rotor, harmonic oscillator. Imaginary modes are left out of the sums."""
    import numpy as np

    k = _constants()
    t = temperature_k
    kT = k["kB"] * t  # J
    coords = np.asarray(coords_angstrom, dtype=float).reshape(-1, 3)
    masses = atomic_masses(numbers)
    j_to_eh = 1.0 / k["hartree_j"]
    sigma = symmetry_number or rotational_symmetry_number(numbers, coords)

    # translation
    m_kg = masses.sum() * k["amu_kg"]
    q_trans = (2 * np.pi * m_kg * kT / k["h"] ** 2) ** 1.5 * kT / pressure_pa
    s_trans = k["kB"] * (np.log(q_trans) + 2.5)
    e_trans = 1.5 * kT

    # rotation
    com = (masses[:, None] * coords).sum(0) / masses.sum()
    r = (coords - com) * 1e-10
    inertia = np.zeros((3, 3))
    for m, v in zip(masses * k["amu_kg"], r, strict=True):
        inertia += m * (np.dot(v, v) * np.eye(3) - np.outer(v, v))
    moments = np.linalg.eigvalsh(inertia)
    if len(numbers) == 1:
        s_rot = e_rot = 0.0
    elif vibrations.linear:
        theta = k["h"] ** 2 / (8 * np.pi**2 * moments[-1] * k["kB"])
        s_rot = k["kB"] * (np.log(t / (sigma * theta)) + 1.0)
        e_rot = kT
    else:
        thetas = k["h"] ** 2 / (8 * np.pi**2 * moments * k["kB"])
        q_rot = np.sqrt(np.pi) / sigma * t**1.5 / np.sqrt(np.prod(thetas))
        s_rot = k["kB"] * (np.log(q_rot) + 1.5)
        e_rot = 1.5 * kT

    # vibration (real modes only)
    nus = np.array([w for w in vibrations.wavenumbers_cm1 if w > 0]) * k["c_cm"]  # Hz
    hv = k["h"] * nus
    zpe = 0.5 * hv.sum()
    x = hv / kT
    e_vib = zpe + (hv / np.expm1(x)).sum() if hv.size else 0.0
    s_vib = k["kB"] * (x / np.expm1(x) - np.log(-np.expm1(-x))).sum() if hv.size else 0.0

    # electronic
    s_elec = k["kB"] * np.log(multiplicity)

    u_corr = e_trans + e_rot + e_vib
    h_corr = u_corr + kT
    s_total = s_trans + s_rot + s_vib + s_elec
    g_corr = h_corr - t * s_total
    per_mol_cal = k["NA"] / k["cal"]
    low = [w for w in vibrations.wavenumbers_cm1 if 0 < w < 50]
    return {
        "temperature_k": t,
        "pressure_pa": pressure_pa,
        "symmetry_number": int(sigma),
        "zpe_hartree": zpe * j_to_eh,
        "thermal_energy_correction_hartree": u_corr * j_to_eh,
        "enthalpy_correction_hartree": h_corr * j_to_eh,
        "gibbs_correction_hartree": g_corr * j_to_eh,
        "entropy_cal_mol_k": s_total * per_mol_cal,
        "entropy_terms_cal_mol_k": {
            "translational": s_trans * per_mol_cal,
            "rotational": s_rot * per_mol_cal,
            "vibrational": s_vib * per_mol_cal,
            "electronic": s_elec * per_mol_cal,
        },
        "enthalpy_hartree": energy_hartree + h_corr * j_to_eh,
        "gibbs_free_energy_hartree": energy_hartree + g_corr * j_to_eh,
        "n_low_modes_below_50_cm1": len(low),
    }


def frequencies_and_thermo(
    hessian_hartree_bohr2: Any,
    energy_hartree: float,
    coords_angstrom: Any,
    numbers: list[int],
    multiplicity: int,
    *,
    temperature_k: float = 298.15,
    pressure_pa: float = 101325.0,
) -> tuple[Vibrations, list[float], dict[str, Any]]:
    """What xTB and DFT frequency jobs both report: the harmonic analysis, the wavenumbers (cm-1, imaginary
    as negative, rounded to 0.01) and the thermochemistry (floats rounded to 1e-8 Eh)."""
    vib = harmonic_analysis(hessian_hartree_bohr2, coords_angstrom, numbers)
    th = thermochemistry(
        energy_hartree,
        vib,
        coords_angstrom,
        numbers,
        multiplicity,
        temperature_k=temperature_k,
        pressure_pa=pressure_pa,
    )
    freqs = [round(w, 2) for w in vib.wavenumbers_cm1]
    return vib, freqs, {k: (round(v, 8) if isinstance(v, float) else v) for k, v in th.items()}


@dataclass
class Frequencies:
    wavenumbers_cm1: list[float]  # rounded to 0.01, imaginary as negative
    n_imaginary: int
    thermo: dict[str, Any]
    hessian_method: str
    energy_hartree: float


def frequencies(
    calc: Any,
    mol: Any,
    coords_angstrom: Any = None,
    energy_hartree: float | None = None,
    *,
    temperature_k: float = 298.15,
    pressure_pa: float = 101325.0,
    progress: Callable[[float], None] | None = None,
) -> Frequencies:
    """Harmonic frequencies from ``calc``'s Hessian (a :class:`~tools_server.engines.calculator.Calculator`)
    at ``coords_angstrom`` (default: ``mol``'s), and ideal-gas / rigid-rotor / harmonic-oscillator
    thermochemistry."""
    import numpy as np

    from tools_server.engines.units import bohr_per_angstrom

    coords = np.asarray(mol.coords_angstrom if coords_angstrom is None else coords_angstrom, dtype=float)
    x_bohr = coords * bohr_per_angstrom()
    if energy_hartree is None:
        energy_hartree = calc.energy(x_bohr)
    hess, how = calc.hessian(x_bohr, progress=progress)
    vib, freqs, th = frequencies_and_thermo(
        hess,
        energy_hartree,
        coords,
        mol.numbers,
        mol.multiplicity,
        temperature_k=temperature_k,
        pressure_pa=pressure_pa,
    )
    return Frequencies(freqs, vib.n_imaginary, th, how, float(energy_hartree))
