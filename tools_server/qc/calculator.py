"""One interface for every energy model, in the manner of ASE's calculators.

A :class:`Calculator` is one molecule (atoms, charge and multiplicity fixed) under one energy model; it
gives the energy and the forces at any geometry, and a Hessian (analytic where the engine has one, else
central differences of its gradients). xTB (:class:`tools_server.qc.xtb.XtbCalculator`), DFT
(:class:`tools_server.qc.dft.PyscfCalculator`) and every ML potential (:class:`AseCalculator` around the
model's ASE calculator) implement it, so optimisation, frequencies, thermochemistry and conformer ranking
(:mod:`tools_server.qc.pipeline`) are written once and a caller switches engines with one argument::

    calc = get_calculator("xtb", mol)          # or "dft", "ani2x", "aimnet2", "mace_off", "sevennet"
    result = pipeline.frequencies(calc, mol)

Units, everywhere: coordinates in Bohr, energies in Hartree, gradients in Hartree/Bohr, forces its
negative. A non-finite energy or gradient is never passed on: it raises :class:`CalculatorError` with
code ``engine_error``.
"""

from __future__ import annotations

import importlib
from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import Any


class CalculatorError(Exception):
    """An engine failure with a stable code (``not_converged``, ``engine_error`` ...); picklable, so it
    crosses process pools."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.code, self.message))


class Calculator(ABC):
    """An energy model for one molecule; subclasses implement :meth:`calculate`."""

    #: What the model is, for results and messages ("GFN2-xTB", "B3LYP/def2-SVP", "ANI-2x" ...).
    name: str = "calculator"

    @abstractmethod
    def calculate(self, coords_bohr: Any) -> tuple[float, Any]:
        """Energy (Hartree) and gradient (Hartree/Bohr, shape (n, 3)) at ``coords_bohr``."""

    def energy_gradient(self, coords_bohr: Any) -> tuple[float, Any]:
        """:meth:`calculate`, refused when the engine returns NaN or infinity."""
        import numpy as np

        energy, gradient = self.calculate(coords_bohr)
        gradient = np.asarray(gradient, dtype=float).reshape(-1, 3)
        if not (np.isfinite(energy) and np.isfinite(gradient).all()):
            raise CalculatorError(
                "engine_error", f"{self.name} returned a non-finite energy or gradient (NaN or infinity)"
            )
        return float(energy), gradient

    def energy(self, coords_bohr: Any) -> float:
        return self.energy_gradient(coords_bohr)[0]

    def forces(self, coords_bohr: Any) -> Any:
        """Minus the gradient (Hartree/Bohr)."""
        return -self.energy_gradient(coords_bohr)[1]

    def hessian(self, coords_bohr: Any, progress: Callable[[float], None] | None = None) -> tuple[Any, str]:
        """The 3N x 3N Hessian (Hartree/Bohr²) and how it was obtained. This default differentiates the
        gradients (central differences of 0.005 Bohr); engines with an analytic Hessian override it."""
        from tools_server.qc.thermo import finite_difference_hessian

        hess = finite_difference_hessian(lambda x: self.energy_gradient(x)[1], coords_bohr, progress=progress)
        return hess, f"central differences (0.005 Bohr) of analytic {self.name} gradients"

    def to_ase(self) -> Any:
        """An ASE calculator of this model (eV, Å), for ASE's optimisers and dynamics."""
        return _ase_view(self)


def ev_per_hartree() -> float:
    """CODATA 2018 from scipy, as every result here uses (ASE's ``units`` default to CODATA 2014)."""
    from scipy.constants import physical_constants

    return physical_constants["Hartree energy in eV"][0]


def angstrom_per_bohr() -> float:
    from scipy.constants import physical_constants

    return physical_constants["Bohr radius"][0] * 1e10


class AseCalculator(Calculator):
    """Any ASE calculator (the ML potentials: ANI-2x, AIMNet2, MACE-OFF, SevenNet) as a Calculator."""

    def __init__(self, ase_calc: Any, numbers: list[int], name: str = "ASE calculator") -> None:
        self.ase_calc = ase_calc
        self.numbers = list(numbers)
        self.name = name

    def calculate(self, coords_bohr: Any) -> tuple[float, Any]:
        import numpy as np
        from ase import Atoms

        bohr, hartree = angstrom_per_bohr(), ev_per_hartree()
        atoms = Atoms(numbers=self.numbers, positions=np.asarray(coords_bohr, dtype=float) * bohr)
        atoms.calc = self.ase_calc
        energy = float(atoms.get_potential_energy()) / hartree
        gradient = -np.asarray(atoms.get_forces(), dtype=float) * bohr / hartree
        return energy, gradient

    def to_ase(self) -> Any:
        return self.ase_calc  # the model itself: ASE's optimisers see exactly its numbers


def _ase_view(calc: Calculator) -> Any:
    """An ASE calculator that asks ``calc`` (the class is built on first use: ASE is imported lazily)."""
    from ase.calculators.calculator import Calculator as AseBase
    from ase.calculators.calculator import all_changes

    class AseView(AseBase):
        implemented_properties = ("energy", "forces")

        def calculate(
            self, atoms: Any = None, properties: Any = None, system_changes: Any = all_changes
        ) -> None:
            super().calculate(atoms, properties, system_changes)
            bohr, hartree = angstrom_per_bohr(), ev_per_hartree()
            energy, gradient = calc.energy_gradient(self.atoms.get_positions() / bohr)
            self.results = {"energy": energy * hartree, "forces": -gradient * hartree / bohr}

    return AseView()


#: Engine name -> "module:function" building a Calculator for a molecule; any import path is accepted.
FACTORIES = {
    "xtb": "tools_server.qc.xtb:make_calculator",
    "dft": "tools_server.qc.dft:make_calculator",
    "ani2x": "tools_server.mlip.models:make_calculator",
    "aimnet2": "tools_server.mlip.models:make_calculator",
    "mace_off": "tools_server.mlip.models:make_calculator",
    "sevennet": "tools_server.mlip.models:make_calculator",
}


def get_calculator(engine: str, mol: Any, **options: Any) -> Calculator:
    """A Calculator of ``engine`` for ``mol`` (a :class:`tools_server.molecules.Molecule`);
    ``options`` go to the engine (``method``, ``solvent`` for xTB; ``functional``, ``basis`` for DFT;
    ``model``, ``device`` for ML potentials). ``engine`` may also be ``"module:function"``."""
    target = FACTORIES.get(engine, engine)
    if ":" not in target:
        known = ", ".join(FACTORIES)
        raise CalculatorError("invalid_input", f"Unknown engine {engine!r}; known: {known}")
    module, function = target.split(":", 1)
    return getattr(importlib.import_module(module), function)(mol, engine=engine, **options)
