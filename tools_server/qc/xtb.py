"""GFN-xTB behind one interface: tblite (default) or xtb-python.

Why tblite by default: it offers ALPB *and* GBSA implicit solvation (xtb-python's ``set_solvent`` is
GBSA only; the two differ by up to 19 mEh), it ships wheels for Python 3.12+ (xtb-python stops at 3.11),
and it is about twice as fast below 30 atoms. xtb-python stays selectable (``engine="xtb-python"``): it is
up to twice as fast above 100 atoms, and the two agree on GFN2 gas-phase energies to ~1e-8 Eh on small
molecules.

Everything here works in atomic units internally (Bohr, Hartree); results carry units in their names.
:class:`XtbCalculator` is xTB's :class:`~tools_server.engines.calculator.Calculator`: the task
(optimisation with geomeTRIC, frequencies from a finite-difference Hessian of analytic gradients) and
the conformer search are :mod:`tools_server.engines`' own.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from tools_server.engines.calculator import Calculator, CalculatorError, SinglePoint
from tools_server.engines.task import TaskOptions, run_task
from tools_server.engines.units import k_hartree_per_kelvin, kcal_mol_per_hartree
from tools_server.molecules import Molecule, check_elements, check_geometry, load_molecule

log = logging.getLogger(__name__)
MAX_Z = 86  # GFN1/GFN2 are parametrised for H-Rn
METHODS = ("GFN2-xTB", "GFN1-xTB")
TBLITE_SOLVENTS = (
    "acetone",
    "acetonitrile",
    "aniline",
    "benzaldehyde",
    "benzene",
    "ch2cl2",
    "chcl3",
    "cs2",
    "dioxane",
    "dmf",
    "dmso",
    "ether",
    "ethylacetate",
    "furane",
    "hexadecane",
    "hexane",
    "methanol",
    "nitromethane",
    "octanol",
    "woctanol",
    "phenol",
    "toluene",
    "thf",
    "water",
    "ethanol",
)
#: tblite has GBSA parameters for fewer solvents than ALPB (checked against tblite 0.8).
TBLITE_GBSA_SOLVENTS = (
    "acetone",
    "acetonitrile",
    "benzene",
    "ch2cl2",
    "chcl3",
    "cs2",
    "dmf",
    "dmso",
    "ether",
    "hexane",
    "methanol",
    "toluene",
    "thf",
    "water",
)
XTB_PYTHON_SOLVENTS = {
    "acetone": "acetone",
    "acetonitrile": "acetonitrile",
    "benzene": "benzene",
    "ch2cl2": "ch2cl2",
    "dichloromethane": "ch2cl2",
    "chcl3": "chcl3",
    "chloroform": "chcl3",
    "cs2": "cs2",
    "dmf": "dmf",
    "dmso": "dmso",
    "ether": "ether",
    "diethylether": "ether",
    "water": "h2o",
    "h2o": "h2o",
    "methanol": "methanol",
    "hexane": "nhexane",
    "n-hexane": "nhexane",
    "thf": "thf",
    "toluene": "toluene",
}
_ALIASES = {
    "h2o": "water",
    "dichloromethane": "ch2cl2",
    "chloroform": "chcl3",
    "diethylether": "ether",
    "n-hexane": "hexane",
    "nhexane": "hexane",
    "tetrahydrofuran": "thf",
    "ethyl acetate": "ethylacetate",
    "octanol (wet)": "woctanol",
    "wet octanol": "woctanol",
    "furan": "furane",
}


class XtbError(CalculatorError):
    """An xTB failure with a stable code (``not_converged``, ``invalid_input`` ...)."""


@dataclass(frozen=True)
class XtbSettings:
    method: str = "GFN2-xTB"
    engine: str = "tblite"
    solvent: str | None = None
    solvent_model: str = "alpb"  # "alpb" or "gbsa"; xtb-python has only GBSA
    accuracy: float = 1.0
    electronic_temperature_k: float = 300.0
    max_iterations: int = 250

    def solvent_label(self) -> str | None:
        if not self.solvent:
            return None
        return f"{self.solvent_model.upper()}({self.solvent})"


def normalise_solvent(settings: XtbSettings) -> XtbSettings:
    """Check the solvent name and model against the engine; raise XtbError('invalid_input') if unknown."""
    if not settings.solvent:
        return settings
    name = settings.solvent.strip().lower()
    if settings.engine == "xtb-python":
        if settings.solvent_model != "gbsa":
            raise XtbError(
                "invalid_input",
                "xtb-python implements only GBSA solvation; use solvent_model='gbsa' "
                "or engine='tblite' for ALPB",
            )
        if name not in XTB_PYTHON_SOLVENTS:
            raise XtbError(
                "invalid_input",
                f"xtb-python has no GBSA parameters for {settings.solvent!r}; known: "
                + ", ".join(sorted(set(XTB_PYTHON_SOLVENTS))),
            )
        return XtbSettings(**{**asdict(settings), "solvent": name})
    name = _ALIASES.get(name, name)
    known = TBLITE_GBSA_SOLVENTS if settings.solvent_model == "gbsa" else TBLITE_SOLVENTS
    if name not in known:
        raise XtbError(
            "invalid_input",
            f"No {settings.solvent_model.upper()} parameters for solvent "
            f"{settings.solvent!r}; known: {', '.join(known)}",
        )
    return XtbSettings(**{**asdict(settings), "solvent": name})


@dataclass
class XtbPoint:
    energy_hartree: float
    gradient: Any  # Hartree/Bohr, (n, 3)
    charges: Any  # e
    dipole_au: Any  # e*Bohr, (3,)
    orbital_energies_hartree: Any
    occupations: Any


def engine_version(engine: str) -> str | None:
    from tools_server.plugin import distribution_version

    return distribution_version("tblite" if engine == "tblite" else "xtb")


class XtbCalculator(Calculator):
    """One molecule, fixed atoms and charge; ``compute(coords_bohr)`` runs a single point with every
    property, :meth:`calculate` the energy and gradient of the calculator interface, :meth:`single_point`
    the properties a result reports (partial charges inline when ``inline_charges``, else their sum)."""

    def __init__(self, settings: XtbSettings, mol: Molecule, *, inline_charges: bool = True) -> None:
        self.name = settings.method + (f" {settings.solvent_label()}" if settings.solvent else "")
        self.settings = settings
        self.mol = mol
        self.numbers = list(mol.numbers)
        self.charge = mol.charge
        self.uhf = mol.multiplicity - 1
        self.inline_charges = inline_charges
        self._calc: Any = None
        self._res: Any = None

    def _build(self, coords_bohr: Any, *, safer: bool) -> None:
        import numpy as np

        s = self.settings
        numbers = np.asarray(self.numbers)
        if s.engine == "xtb-python":
            from xtb.interface import Calculator, Param
            from xtb.libxtb import VERBOSITY_MUTED
            from xtb.utils import Solvent

            param = {"GFN2-xTB": Param.GFN2xTB, "GFN1-xTB": Param.GFN1xTB}[s.method]
            calc = Calculator(param, numbers, coords_bohr, float(self.charge), self.uhf)
            calc.set_verbosity(VERBOSITY_MUTED)
            calc.set_accuracy(s.accuracy)
            calc.set_electronic_temperature(s.electronic_temperature_k)
            calc.set_max_iterations(s.max_iterations * (4 if safer else 1))
            if s.solvent:
                calc.set_solvent(Solvent[XTB_PYTHON_SOLVENTS[s.solvent]])
        else:
            from tblite.interface import Calculator

            calc = Calculator(s.method, numbers, coords_bohr, charge=float(self.charge), uhf=self.uhf)
            calc.set("verbosity", 0)
            calc.set("accuracy", s.accuracy)
            calc.set("temperature", s.electronic_temperature_k * k_hartree_per_kelvin())
            calc.set("max-iter", s.max_iterations * (4 if safer else 1))
            if safer:
                calc.set("mixer-damping", 0.2)
            if s.solvent:
                calc.add(f"{s.solvent_model}-solvation", s.solvent)
        self._calc = calc
        self._res = None

    def calculate(self, coords_bohr: Any) -> tuple[float, Any]:
        sp = self.compute(coords_bohr)
        return sp.energy_hartree, sp.gradient

    def single_point(self, coords_bohr: Any, *, with_gradient: bool = False) -> SinglePoint:
        from tools_server.molecules import first_non_finite

        sp = self.compute(coords_bohr)
        bad = first_non_finite({"energy": sp.energy_hartree, "gradient": sp.gradient, "charges": sp.charges})
        if bad is not None:
            raise XtbError("engine_error", f"{self.name} returned a non-finite {bad} (NaN or infinity)")
        dip, dip_vec = dipole_debye(sp.dipole_au)
        props: dict[str, Any] = {
            **frontier_orbitals_ev(sp),
            "dipole_debye": dip,
            "dipole_vector_debye": dip_vec,
        }
        if self.settings.solvent:
            props.update(solvation_free_energy(self.settings, self.mol, coords_bohr, sp.energy_hartree))
        charges = [round(float(q), 4) for q in sp.charges]
        if self.inline_charges:
            props["partial_charges_e"] = charges
        else:
            props["partial_charges_e_sum"] = round(float(sum(charges)), 4)
        return SinglePoint(float(sp.energy_hartree), sp.gradient, props)

    def compute(self, coords_bohr: Any) -> XtbPoint:
        import numpy as np

        coords_bohr = np.ascontiguousarray(coords_bohr, dtype=float).reshape(-1, 3)
        last_error: Exception | None = None
        for safer in (False, True):
            try:
                if self._calc is None or safer:
                    self._build(coords_bohr, safer=safer)
                else:
                    self._calc.update(coords_bohr)
                return self._run()
            except Exception as exc:
                last_error = exc
                self._calc = None
        raise XtbError(
            "not_converged",
            f"{self.settings.method} SCF failed twice (second try with damped "
            f"mixing, 4x iterations): {last_error}",
        )

    def _run(self) -> XtbPoint:
        import numpy as np

        if self.settings.engine == "xtb-python":
            res = self._calc.singlepoint(self._res)
            self._res = res
            return XtbPoint(
                res.get_energy(),
                res.get_gradient(),
                res.get_charges(),
                res.get_dipole(),
                res.get_orbital_eigenvalues(),
                res.get_orbital_occupations(),
            )
        res = self._calc.singlepoint(self._res)
        self._res = res
        return XtbPoint(
            res.get("energy"),
            res.get("gradient"),
            res.get("charges"),
            res.get("dipole"),
            np.asarray(res.get("orbital-energies")).ravel(),
            np.asarray(res.get("orbital-occupations")).ravel(),
        )


# --------------------------------------------------------------------------------------------------
# Derived quantities
# --------------------------------------------------------------------------------------------------


def frontier_orbitals_ev(sp: XtbPoint) -> dict[str, float | None]:
    """HOMO, LUMO (eV) and gap from orbital energies and occupations (restricted: occupations 0-2)."""
    import numpy as np
    from scipy.constants import physical_constants

    ev = physical_constants["Hartree energy in eV"][0]
    e = np.asarray(sp.orbital_energies_hartree, dtype=float)
    occ = np.asarray(sp.occupations, dtype=float)
    if e.size == 0 or occ.size != e.size:
        return {"homo_ev": None, "lumo_ev": None, "gap_ev": None}
    order = np.argsort(e)
    e, occ = e[order], occ[order]
    occupied = occ > 0.5
    homo = float(e[occupied].max()) if occupied.any() else None
    empty = occ < 0.5
    lumo = float(e[empty].min()) if empty.any() else None
    return {
        "homo_ev": None if homo is None else round(homo * ev, 4),
        "lumo_ev": None if lumo is None else round(lumo * ev, 4),
        "gap_ev": None if homo is None or lumo is None else round((lumo - homo) * ev, 4),
    }


def dipole_debye(dipole_au: Any) -> tuple[float, list[float]]:
    import numpy as np
    from scipy.constants import c, e, physical_constants

    debye_cm = 1e-21 / c  # 1 D in C*m
    au = e * physical_constants["Bohr radius"][0] / debye_cm
    vec = np.asarray(dipole_au, dtype=float) * au
    return round(float(np.linalg.norm(vec)), 4), [round(float(v), 4) for v in vec]


def solvation_free_energy(
    settings: XtbSettings, mol: Molecule, coords_bohr: Any, energy_in_solvent_hartree: float
) -> dict[str, Any]:
    """The implicit-solvent free energy of solvation at fixed geometry: the energy in solvent minus a
    gas-phase single point at the same coordinates, in kcal/mol (negative: the solvent stabilises)."""
    gas = XtbCalculator(replace(settings, solvent=None), mol).compute(coords_bohr)
    return {
        "solvation_free_energy_kcal_mol": round(
            (energy_in_solvent_hartree - gas.energy_hartree) * kcal_mol_per_hartree(), 6
        ),
        "solvation_model": settings.solvent_label(),
        "gas_phase_energy_hartree": float(gas.energy_hartree),
    }


def make_calculator(
    mol: Molecule, engine: str = "xtb", *, inline_charges: bool = True, **options: Any
) -> XtbCalculator:
    """The xTB :class:`~tools_server.engines.calculator.Calculator` for ``mol``; ``options`` are
    :class:`XtbSettings` fields (``method``, ``engine`` as ``xtb_engine``, ``solvent`` ...)."""
    if "xtb_engine" in options:
        options["engine"] = options.pop("xtb_engine")
    check_elements(mol.numbers, max_z=MAX_Z, method="GFN-xTB")
    check_geometry(mol)
    return XtbCalculator(normalise_solvent(XtbSettings(**options)), mol, inline_charges=inline_charges)


def calculator_options(settings: XtbSettings) -> dict[str, Any]:
    """``settings`` as :func:`make_calculator` options (for a conformer search's pool processes)."""
    options = asdict(settings)
    options["xtb_engine"] = options.pop("engine")
    return options


# --------------------------------------------------------------------------------------------------
# One molecule, one task (runs in the job's worker or in a pool process)
# --------------------------------------------------------------------------------------------------


def prepare(text: str, charge: int | None, multiplicity: int | None) -> Molecule:
    mol = load_molecule(text, charge=charge, multiplicity=multiplicity)
    check_elements(mol.numbers, max_z=MAX_Z, method="GFN-xTB")
    check_geometry(mol)
    return mol


def run_item(
    index: int,
    text: str,
    settings: XtbSettings,
    options: TaskOptions,
    charge: int | None,
    multiplicity: int | None,
    out_dir: str,
    inline_charges: bool,
    progress: Callable[[float, str], None] | None = None,
) -> Any:
    """Everything for one molecule; returns its :class:`~tools_server.qc.results.XtbItem` (ok, or failed with
    its error) and never raises."""
    from tools_server.qc.results import XtbItem

    try:
        mol = prepare(text, charge, multiplicity)
        calc = XtbCalculator(settings, mol, inline_charges=inline_charges)
        result = run_task(calc, mol, options, Path(out_dir), f"mol{index}", progress)
        return XtbItem(index=index, ok=True, **result.as_item())
    except Exception as exc:
        return XtbItem.failed(index, exc)
