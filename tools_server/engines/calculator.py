"""One interface for every energy model, in the manner of ASE's calculators.

A :class:`Calculator` is one molecule (atoms, charge and multiplicity fixed) under one energy model; it
gives the energy and the forces at any geometry, a Hessian (analytic where the engine has one, else
central differences of its gradients) and, through :meth:`Calculator.single_point`, the engine's own
properties at a geometry (orbitals and charges for xTB, the SCF report for DFT, forces for an ML
potential). xTB (``tools_server.qc.xtb``), DFT (``tools_server.qc.dft``) and every ML potential
(:class:`AseCalculator` around the model's ASE calculator) implement it, so optimisation, frequencies,
thermochemistry, the task procedure and the conformer search (:mod:`tools_server.engines`) are written
once and a caller switches engines with one argument::

    calc = get_calculator("xtb", mol)          # or "dft", "ani2x", "aimnet2", "mace_off", "sevennet"
    result = run_task(calc, mol, TaskOptions(task="frequencies"), out_dir, "mol0")

Each domain registers the factories of its engines with :func:`register_calculator` when its package is
imported (no module is named in a string here). Units (see :mod:`tools_server.engines.units`):
coordinates in Bohr, energies in Hartree, gradients in Hartree/Bohr, forces its negative. A non-finite
energy or gradient is never passed on: it raises :class:`CalculatorError` with code ``engine_error``.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tools_server.engines.units import angstrom_per_bohr, ev_per_hartree
from tools_server.plugin import ToolError


class CalculatorError(ToolError):
    """An engine failure with a stable code (``not_converged``, ``engine_error`` ...). A
    :class:`~tools_server.plugin.ToolError` (picklable, so it crosses process pools): it reaches the
    client as it is, or becomes the error of its batch item."""


@dataclass
class SinglePoint:
    """The energy at one geometry, its gradient when the engine had it anyway (None otherwise), and the
    engine's own properties (keys with their units in the name: ``homo_ev``, ``max_force_ev_a`` ...)."""

    energy_hartree: float
    gradient: Any = None
    properties: dict[str, Any] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)


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
        from tools_server.engines.thermo import finite_difference_hessian

        hess = finite_difference_hessian(lambda x: self.energy_gradient(x)[1], coords_bohr, progress=progress)
        return hess, f"central differences (0.005 Bohr) of analytic {self.name} gradients"

    def single_point(self, coords_bohr: Any, *, with_gradient: bool = False) -> SinglePoint:
        """The result of a single point at ``coords_bohr``: this default is the energy and gradient;
        engines add their properties. ``with_gradient``: the caller needs the gradient (an engine whose
        gradient costs extra computes it only then)."""
        energy, gradient = self.energy_gradient(coords_bohr)
        return SinglePoint(energy, gradient)

    def to_ase(self) -> Any:
        """An ASE calculator of this model (eV, Å), for ASE's optimisers and dynamics."""
        return _ase_view(self)


class AseCalculator(Calculator):
    """Any ASE calculator (the ML potentials: ANI-2x, AIMNet2, MACE-OFF, SevenNet) as a Calculator."""

    def __init__(
        self, ase_calc: Any, numbers: list[int], name: str = "ASE calculator", *, inline_forces: bool = False
    ) -> None:
        self.ase_calc = ase_calc
        self.numbers = list(numbers)
        self.name = name
        self.inline_forces = inline_forces

    def calculate(self, coords_bohr: Any) -> tuple[float, Any]:
        import numpy as np
        from ase import Atoms

        bohr, hartree = angstrom_per_bohr(), ev_per_hartree()
        atoms = Atoms(numbers=self.numbers, positions=np.asarray(coords_bohr, dtype=float) * bohr)
        atoms.calc = self.ase_calc
        energy = float(atoms.get_potential_energy()) / hartree
        gradient = -np.asarray(atoms.get_forces(), dtype=float) * bohr / hartree
        return energy, gradient

    def single_point(self, coords_bohr: Any, *, with_gradient: bool = False) -> SinglePoint:
        """Energy, and the forces in the model's own unit (eV/Å): their largest and RMS norm, and every
        force inline when :attr:`inline_forces` (small molecules)."""
        import numpy as np

        energy, gradient = self.energy_gradient(coords_bohr)
        forces = -gradient * ev_per_hartree() / angstrom_per_bohr()
        norms = np.linalg.norm(forces, axis=1) if len(forces) else np.zeros(0)
        props: dict[str, Any] = {
            "energy_ev": round(energy * ev_per_hartree(), 6),
            "max_force_ev_a": round(float(norms.max()) if len(norms) else 0.0, 6),
            "rms_force_ev_a": round(float(np.sqrt((norms**2).mean())) if len(norms) else 0.0, 6),
        }
        if self.inline_forces:
            props["forces_ev_a"] = [[round(float(x), 6) for x in row] for row in forces]
        return SinglePoint(energy, gradient, props)

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


#: A factory builds the Calculator of one engine for one molecule: ``factory(mol, engine=name, **options)``.
Factory = Callable[..., Calculator]
_FACTORIES: dict[str, Factory] = {}


def register_calculator(name: str, factory: Factory) -> None:
    """Offer ``factory`` under ``name`` to :func:`get_calculator`; a domain calls this when its package is
    imported. Registering a name twice with another factory is refused."""
    existing = _FACTORIES.get(name)
    if existing is not None and existing is not factory:
        raise ValueError(f"calculator {name!r} is registered twice")
    _FACTORIES[name] = factory


def calculator_names() -> list[str]:
    """The engines registered so far (the installed domains' after :func:`get_calculator` loaded them)."""
    return sorted(_FACTORIES)


def get_calculator(engine: str, mol: Any, **options: Any) -> Calculator:
    """A Calculator of ``engine`` for ``mol`` (a :class:`tools_server.molecules.Molecule`); ``options`` go
    to the engine (``method``, ``solvent`` for xTB; ``functional``, ``basis`` for DFT; ``model``,
    ``device`` for ML potentials). An engine not registered yet loads the installed domains first."""
    if engine not in _FACTORIES:
        _load_domains()
    factory = _FACTORIES.get(engine)
    if factory is None:
        known = ", ".join(calculator_names()) or "none"
        raise CalculatorError("invalid_input", f"Unknown engine {engine!r}; known: {known}")
    return factory(mol, engine=engine, **options)


def _load_domains() -> None:
    """Import every installed tool domain (the ``spu.tools`` entry points), so each registers its
    calculators; a domain that fails to import is skipped here (the tool registry reports it)."""
    from importlib import metadata

    from tools_server.plugin import ENTRY_POINT_GROUP

    for ep in metadata.entry_points(group=ENTRY_POINT_GROUP):
        try:
            ep.load()
        except Exception:
            continue
