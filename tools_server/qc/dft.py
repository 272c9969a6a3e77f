"""DFT and Hartree-Fock with PySCF (CPU) or gpu4pyscf (GPU).

Flow of :func:`run`: validate the molecule (charge, multiplicity, elements the basis defines) -> count
basis functions -> choose the device (``tools_server.qc.device``) -> estimate the CPU time and refuse with
``too_large_for_cpu`` when it cannot finish in the job's time limit -> SCF (retried once with level shift
and damping, then second-order Newton) -> the task: energy, optimize and frequencies through
:func:`tools_server.engines.task.run_task` with :class:`PyscfCalculator`, tddft on the converged SCF.

Units: energies in Hartree (eV for orbitals and excitations), wavelengths in nm, dipoles in Debye,
coordinates in Å, wavenumbers in cm⁻¹.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import Any

from tools_server.engines.calculator import Calculator, SinglePoint
from tools_server.molecules import Molecule, load_molecule
from tools_server.plugin import Engine, ToolError

#: Measured here: B3LYP/def2-SVP with density fitting on 2 cores, benzene (114 basis functions) 5 s, caffeine
#: (246) 34 s: time ~ N^2.5. Without density fitting caffeine took 94 s (x2.8).
_REF_NBASIS, _REF_SECONDS, _REF_CORES, _EXPONENT, _NO_DF_FACTOR = 114, 5.0, 2, 2.5, 2.8
#: Fixed cost of a job whatever its size (grids, basis set up, the first SCF iterations): water takes ~0.3 s.
_OVERHEAD_S = 0.3
#: Share of the SCF that does not speed up with more threads (Amdahl): caffeine took 34 s on 2 cores and 33 s
#: on 16, so most of the time (BLAS, which the workers keep single-threaded, and Python) is serial.
_SERIAL_FRACTION = 0.9
#: Above this many basis functions the CPU is refused whatever the time limit (memory and hours).
CPU_MAX_NBASIS = 2500
#: Refuse when the estimate exceeds this share of the time limit: the model was calibrated on an idle
#: machine, and on a busy one (bench/qc.py, other jobs running) wall times came out up to ~2.6x longer.
CPU_BUDGET_FRACTION = 0.4


def estimate_cpu_seconds(
    n_basis: int,
    n_atoms: int,
    task: str,
    *,
    cores: int,
    density_fitting: bool,
    n_states: int = 5,
    hf: bool = False,
) -> float:
    """The scaling law: wall time of the job on ``cores`` CPU cores of the reference machine (one SCF
    scaled by the task's work). :func:`estimate` corrects it for this machine."""
    slowdown = _amdahl(max(1, cores)) / _amdahl(_REF_CORES)
    scf = _OVERHEAD_S + _REF_SECONDS * (n_basis / _REF_NBASIS) ** _EXPONENT * slowdown
    if not density_fitting:
        scf *= _NO_DF_FACTOR
    if hf:
        scf *= 0.7
    factor = {
        "energy": 1.0,
        "optimize": 3.0 * max(8, n_atoms),  # ~n_atoms steps, each SCF + gradient
        "tddft": 1.0 + 0.6 * n_states,
        "frequencies": 3.0 * max(8, n_atoms) + 2.0 * n_atoms,  # optimisation, then a Hessian ~ n_atoms SCFs
    }[task]
    return scf * factor


def _amdahl(cores: int) -> float:
    return _SERIAL_FRACTION + (1 - _SERIAL_FRACTION) / cores


def cost_model() -> Any:
    """This machine's record of DFT runs on the CPU (a :class:`~tools_server.plugin.CostModel`)."""
    from tools_server.plugin import CostModel

    return CostModel("dft_cpu")


def _basis_defines(basis: str, symbol: str) -> bool:
    import warnings

    from pyscf.gto.basis import BasisNotFoundError, load

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            return bool(load(basis, symbol))
        except (BasisNotFoundError, KeyError, RuntimeError, ValueError):
            return False


def _basis_check(symbols: list[str], basis: str) -> None:
    missing = [s for s in sorted(set(symbols)) if not _basis_defines(basis, s)]
    if not missing:
        return
    if not _basis_defines(basis, "H") and not _basis_defines(basis, "C"):
        raise ToolError(
            "invalid_input",
            f"Unknown basis set {basis!r}",
            hint="Use a name PySCF knows: sto-3g, 6-31g*, 6-311+g**, def2-svp, def2-tzvp, cc-pvdz ...",
        )
    raise ToolError(
        "unsupported_element",
        f"Basis {basis} does not define {', '.join(missing)}",
        hint="Choose a basis that covers these elements (def2-SVP/def2-TZVP cover H-Rn with ECPs).",
    )


def build_mole(mol: Molecule, basis: str, max_memory_mb: int | None = None) -> Any:
    from pyscf import gto

    _basis_check(mol.symbols, basis)
    atoms = [
        (s, tuple(float(v) for v in xyz)) for s, xyz in zip(mol.symbols, mol.coords_angstrom, strict=True)
    ]
    kwargs: dict[str, Any] = {}
    if basis.lower().startswith("def2") and max(mol.numbers) > 36:
        kwargs["ecp"] = basis  # def2 sets use ECPs from Rb on
    pmol = gto.M(
        atom=atoms,
        basis=basis,
        charge=mol.charge,
        spin=mol.multiplicity - 1,
        unit="Angstrom",
        verbose=0,
        **kwargs,
    )
    if max_memory_mb:
        pmol.max_memory = max_memory_mb
    return pmol


def _is_hf(functional: str) -> bool:
    return functional.strip().lower() in ("hf", "rhf", "uhf", "scf")


def _check_functional(functional: str) -> None:
    if _is_hf(functional):
        return
    from pyscf.dft import libxc

    try:
        libxc.parse_xc(functional)
    except (KeyError, ValueError) as exc:
        raise ToolError(
            "invalid_input",
            f"Unknown functional {functional!r}: {exc}",
            hint="Use a libxc/PySCF name: B3LYP, PBE0, PBE, CAM-B3LYP, M062X, wB97X-V, TPSS, or HF.",
        ) from None


def _solvent_eps(name: str) -> float:
    try:
        return float(name)
    except ValueError:
        pass
    from pyscf.solvent import smd

    entry = smd.solvent_db.get(name.strip().lower())
    if entry is None:
        raise ToolError(
            "invalid_input",
            f"Unknown solvent {name!r}",
            hint="Use a name from the Minnesota solvent database (water, methanol, acetonitrile, "
            "dimethylsulfoxide, toluene ...) or a dielectric constant such as '78.4'.",
        )
    return float(entry[5])


def build_scf(pmol: Any, args: Any, device: str) -> Any:
    """The SCF object (CPU, then moved to the GPU when ``device == 'gpu'``)."""
    from pyscf import dft, scf

    open_shell = pmol.spin != 0
    if _is_hf(args.functional):
        mf = scf.UHF(pmol) if open_shell else scf.RHF(pmol)
    else:
        mf = dft.UKS(pmol) if open_shell else dft.RKS(pmol)
        mf.xc = args.functional
        mf.grids.level = args.grid_level
    if args.dispersion != "none":
        mf.disp = args.dispersion
    mf.conv_tol = args.conv_tol_hartree
    mf.max_cycle = 100
    if args.density_fitting:
        mf = mf.density_fit()
    if args.solvent:
        if args.solvent_model == "smd":
            mf = mf.SMD()
            mf.with_solvent.solvent = args.solvent.strip().lower()
            _solvent_eps(args.solvent)  # validates the name
        else:
            mf = mf.PCM()
            mf.with_solvent.eps = _solvent_eps(args.solvent)
    if device == "gpu":
        mf = mf.to_gpu()
    mf.verbose = 0
    return mf


def run_scf(mf: Any, warn: Any) -> dict[str, Any]:
    """Converge the SCF; on failure retry once with level shift + damping, then with Newton (second order)."""
    mf.kernel()
    report: dict[str, Any] = {
        "converged": bool(mf.converged),
        "cycles": getattr(mf, "cycles", None),
        "retried": False,
        "strategy": "DIIS",
    }
    if mf.converged:
        return report
    dm = mf.make_rdm1()
    mf.level_shift, mf.damp, mf.max_cycle = 0.25, 0.5, 300
    mf.kernel(dm0=dm)
    report.update(
        retried=True,
        strategy="DIIS + level shift 0.25 Eh + damping 0.5",
        converged=bool(mf.converged),
        cycles=getattr(mf, "cycles", None),
    )
    mf.level_shift, mf.damp = 0.0, 0.0
    if not mf.converged:
        try:
            newton = mf.newton()
            newton.kernel(dm0=mf.make_rdm1())
            if newton.converged:
                mf.__dict__.update(
                    {k: getattr(newton, k) for k in ("e_tot", "mo_energy", "mo_coeff", "mo_occ", "converged")}
                )
            report.update(
                strategy=report["strategy"] + ", then Newton (second order)", converged=bool(newton.converged)
            )
        except Exception as exc:
            report["strategy"] += f"; Newton not available ({type(exc).__name__})"
    if not report["converged"]:
        warn(
            "SCF did not converge after retries with level shift, damping and Newton; energies are unreliable"
        )
    return report


def _to_cpu(mf: Any) -> Any:
    return mf.to_cpu() if hasattr(mf, "to_cpu") else mf  # only gpu4pyscf objects have to_cpu


def _frontier_ev(mf: Any) -> dict[str, float | None]:
    import numpy as np
    from scipy.constants import physical_constants

    ev = physical_constants["Hartree energy in eV"][0]
    e = np.asarray(mf.mo_energy).reshape(-1)
    occ = np.asarray(mf.mo_occ).reshape(-1)
    homo = float(e[occ > 0].max()) if (occ > 0).any() else None
    lumo = float(e[occ == 0].min()) if (occ == 0).any() else None
    return {
        "homo_ev": None if homo is None else round(homo * ev, 4),
        "lumo_ev": None if lumo is None else round(lumo * ev, 4),
        "gap_ev": None if homo is None or lumo is None else round((lumo - homo) * ev, 4),
    }


def properties(mf: Any) -> dict[str, Any]:
    import numpy as np

    cpu = _to_cpu(mf)
    out: dict[str, Any] = _frontier_ev(cpu)
    try:
        dip = np.asarray(cpu.dip_moment(unit="Debye", verbose=0), dtype=float)
        out["dipole_debye"] = round(float(np.linalg.norm(dip)), 4)
        out["dipole_vector_debye"] = [round(float(v), 4) for v in dip]
    except Exception as exc:
        out["dipole_note"] = f"dipole not available ({type(exc).__name__})"
    try:
        charges = cpu.mulliken_pop(verbose=0)[1]
        if cpu.mol.natm <= 200:
            out["mulliken_charges_e"] = [round(float(q), 4) for q in charges]
    except Exception as exc:
        out["charges_note"] = f"Mulliken charges not available ({type(exc).__name__})"
    summary = getattr(mf, "scf_summary", {}) or {}
    if "dispersion" in summary:
        out["dispersion_energy_hartree"] = float(np.asarray(summary["dispersion"]).sum())
    return out


def tddft(mf: Any, args: Any) -> dict[str, Any]:
    import numpy as np
    from scipy.constants import c, h, physical_constants

    hartree_j = physical_constants["Hartree energy"][0]
    ev = physical_constants["Hartree energy in eV"][0]
    td = mf.TDA() if args.tda else mf.TDDFT() if not _is_hf(args.functional) else mf.TDHF()
    td.nstates = args.n_states
    if args.triplets:
        if mf.mol.spin != 0:
            raise ToolError(
                "invalid_input",
                "triplets=true needs a closed-shell (singlet) reference; an open-shell molecule gives "
                "spin-conserving excitations with triplets=false",
            )
        td.singlet = False
    td.verbose = 0
    td.kernel()
    energies = np.asarray(_to_numpy(td.e), dtype=float)
    try:
        strengths = np.asarray(_to_numpy(td.oscillator_strength(gauge="length")), dtype=float)
    except Exception:
        strengths = np.zeros_like(energies)
    converged = np.asarray(_to_numpy(getattr(td, "converged", [True] * len(energies)))).reshape(-1)
    states = []
    for k, e in enumerate(energies):
        states.append(
            {
                "state": k + 1,
                "energy_ev": round(float(e * ev), 4),
                "wavelength_nm": round(float(h * c / (e * hartree_j) * 1e9), 2) if e > 0 else None,
                "oscillator_strength": round(float(strengths[k]), 5) if k < len(strengths) else None,
                "converged": bool(converged[k]) if k < len(converged) else None,
            }
        )
    return {
        "method": ("TDA" if args.tda else "TDDFT" if not _is_hf(args.functional) else "TDHF"),
        "spin": _excitation_spin(mf, args.triplets),
        "states": states,
    }


def _excitation_spin(mf: Any, triplets: bool) -> str:
    if mf.mol.spin != 0:
        return "spin-conserving (unrestricted reference)"
    return "triplet" if triplets else "singlet"


def _to_numpy(x: Any) -> Any:
    return x.get() if hasattr(x, "get") and not isinstance(x, (list, dict)) else x


class PyscfCalculator(Calculator):
    """DFT or HF from a converged PySCF (or gpu4pyscf) SCF object: energies and analytic gradients at any
    geometry through PySCF's gradient scanner; PySCF's analytic Hessian where it has one for the setup;
    a single point elsewhere than the SCF's geometry converges a new SCF there (``args``: ``dft_run``'s)."""

    def __init__(
        self,
        mf: Any,
        scf_report: dict[str, Any],
        mol: Molecule,
        args: Any,
        device: str,
        warn: Callable[[str], None],
        name: str = "DFT",
    ) -> None:
        self.mf = mf
        self.scf_report = scf_report
        self.mol = mol
        self.args = args
        self.device = device
        self.warn = warn
        self.name = name
        self._scanner: Any = None

    def calculate(self, coords_bohr: Any) -> tuple[float, Any]:
        import numpy as np

        if self._scanner is None:
            self._scanner = self.mf.nuc_grad_method().as_scanner()
        e, g = self._scanner(self.mf.mol.set_geom_(np.asarray(coords_bohr), unit="Bohr", inplace=False))
        return float(e), np.asarray(_to_numpy(g))

    def _at_scf_geometry(self, coords_bohr: Any) -> bool:
        import numpy as np

        return bool(np.allclose(coords_bohr, self.mf.mol.atom_coords(unit="Bohr"), atol=1e-8))

    def single_point(self, coords_bohr: Any, *, with_gradient: bool = False) -> SinglePoint:
        """The SCF's energy and properties (:func:`properties`, and the SCF report as ``scf``) at
        ``coords_bohr``, converging a new SCF there when it is not the current one's geometry."""
        import numpy as np

        from tools_server.engines.units import angstrom_per_bohr

        if not self._at_scf_geometry(coords_bohr):
            moved = self.mol.with_coords(np.asarray(coords_bohr, dtype=float) * angstrom_per_bohr())
            self.mf = build_scf(build_mole(moved, self.args.basis), self.args, self.device)
            self.scf_report = run_scf(self.mf, self.warn)
            self._scanner = None
        gradient = np.asarray(_to_numpy(self.mf.nuc_grad_method().kernel())) if with_gradient else None
        return SinglePoint(float(self.mf.e_tot), gradient, {"scf": self.scf_report, **properties(self.mf)})

    def hessian(self, coords_bohr: Any, progress: Callable[[float], None] | None = None) -> tuple[Any, str]:
        """Analytic at the SCF's own geometry (``coords_bohr`` must be it), else differences of gradients."""
        import numpy as np

        n = self.mf.mol.natm
        if self._at_scf_geometry(coords_bohr):
            try:
                h = np.asarray(_to_numpy(self.mf.Hessian().kernel()))
                return h.transpose(0, 2, 1, 3).reshape(3 * n, 3 * n), "analytic Hessian"
            except (NotImplementedError, AttributeError, TypeError) as exc:
                self.warn(
                    f"no analytic Hessian for this setup ({type(exc).__name__}); used finite differences of "
                    "gradients"
                )
        return super().hessian(coords_bohr, progress)


def make_calculator(mol: Molecule, engine: str = "dft", **options: Any) -> PyscfCalculator:
    """A converged DFT :class:`~tools_server.engines.calculator.Calculator` for ``mol`` on the CPU;
    ``options`` are ``dft_run`` arguments (functional, basis, dispersion, solvent ...)."""
    from tools_server.molecules import check_elements, check_geometry
    from tools_server.qc.inputs import DftInput

    args = DftInput(molecule="C", **options)  # the defaults and checks of dft_run
    check_elements(mol.numbers, max_z=118, method="DFT")
    _check_functional(args.functional)
    check_geometry(mol)
    mf = build_scf(build_mole(mol, args.basis), args, "cpu")
    report = run_scf(mf, lambda message: None)
    if not report["converged"]:
        raise ToolError("not_converged", f"SCF did not converge ({report['strategy']})")
    return PyscfCalculator(
        mf, report, mol, args, "cpu", lambda message: None, f"{args.functional}/{args.basis}"
    )


def _engine_version(device: str) -> str | None:
    from tools_server.qc.device import GPU4PYSCF

    return GPU4PYSCF.version() if device == "gpu" else Engine("pyscf", "pyscf").version()


def run(args: Any, ctx: Any) -> dict[str, Any]:
    from tools_server.engines.task import TaskOptions, run_task
    from tools_server.molecules import check_elements, check_geometry
    from tools_server.qc.device import choose_device

    mol = load_molecule(args.molecule, charge=args.charge, multiplicity=args.multiplicity)
    check_elements(mol.numbers, max_z=118, method="DFT")
    _check_functional(args.functional)
    _basis_check(mol.symbols, args.basis)  # an element the basis lacks is named before the geometry
    check_geometry(mol)
    from pyscf import lib

    lib.num_threads(max(1, ctx.threads))
    pmol = build_mole(mol, args.basis)
    n_basis = int(pmol.nao_nr())
    hf = _is_hf(args.functional)
    choice = choose_device(args.device, n_basis, gpu_slot=ctx.gpu_available)
    law_s = estimate_cpu_seconds(
        n_basis,
        mol.n_atoms,
        args.task,
        cores=max(1, ctx.threads),
        density_fitting=args.density_fitting,
        n_states=args.n_states,
        hf=hf,
    )
    model = cost_model() if choice.device == "cpu" else None
    estimate_s = model.estimate(law_s) if model is not None else law_s
    limit_s = float(ctx.time_limit_s or 7200.0)
    if choice.device == "cpu" and (estimate_s > CPU_BUDGET_FRACTION * limit_s or n_basis > CPU_MAX_NBASIS):
        raise ToolError(
            "too_large_for_cpu",
            f"{args.task} with {args.functional}/{args.basis} on {mol.n_atoms} atoms ({n_basis} basis "
            "functions) "
            f"would take about {_human(estimate_s)} on {ctx.threads} CPU core(s); the limit is "
            f"{_human(limit_s)}",
            hint="Use xtb_run (seconds), a smaller basis (def2-SVP, 6-31G*), density_fitting=true, the "
            "energy task instead of optimize/frequencies, or a machine with a GPU and gpu4pyscf.",
            n_basis=n_basis,
            estimate_s=round(estimate_s),
            device_reason=choice.reason,
        )
    device_label = "cpu" if choice.device == "cpu" else f"gpu:{choice.gpu_name}"
    ctx.set_engine(
        "gpu4pyscf" if choice.device == "gpu" else "pyscf",
        _engine_version(choice.device),
        device=device_label,
        device_reason=choice.reason,
        n_basis=n_basis,
        estimate_cpu_s=round(estimate_s, 1),
        threads=ctx.threads,
    )
    ctx.progress(0.02, f"{n_basis} basis functions on {device_label}")
    started = time.perf_counter()
    mf = build_scf(pmol, args, choice.device)
    result: dict[str, Any] = {
        "method": "HF" if hf else args.functional,
        "basis": args.basis,
        "task": args.task,
        "dispersion": args.dispersion,
        "density_fitting": args.density_fitting,
        "solvation": f"{args.solvent_model.upper()}({args.solvent})" if args.solvent else "gas phase",
        "smiles": mol.smiles,
        "formula": mol.formula(),
        "n_atoms": mol.n_atoms,
        "n_basis": n_basis,
        "charge": mol.charge,
        "multiplicity": mol.multiplicity,
        "reference": ("U" if mol.multiplicity > 1 else "R") + ("HF" if hf else "KS"),
        "device": device_label,
        "device_reason": choice.reason,
    }
    scf_report = run_scf(mf, ctx.warn)
    if not scf_report["converged"] and args.task != "energy":
        raise ToolError(
            "not_converged",
            f"SCF did not converge ({scf_report['strategy']}); cannot run {args.task}",
            hint="Try another starting geometry (xtb_run optimize first), a smaller basis, or HF.",
        )
    calc = PyscfCalculator(
        mf, scf_report, mol, args, choice.device, ctx.warn, f"{result['method']}/{args.basis}"
    )
    options = TaskOptions(
        task="energy" if args.task == "tddft" else args.task,
        max_steps=args.max_steps,
        temperature_k=args.temperature_k,
        pressure_pa=args.pressure_pa,
    )

    def progress(fraction: float, message: str) -> None:
        ctx.progress(0.05 + 0.9 * fraction, message)

    done = run_task(calc, mol, options, ctx.artifact_path, "molecule", progress)
    result.update(done.as_item())
    if args.task == "tddft":
        ctx.progress(0.5, "TDDFT")
        result["excitations"] = tddft(calc.mf, args)
        if any(s["converged"] is False for s in result["excitations"]["states"]):
            ctx.warn("some TDDFT roots did not converge")
    if model is not None:  # the estimate against what this run took, in provenance; calibrates the next
        ctx.engine["cost"] = model.record(law_s, estimate_s, time.perf_counter() - started)
    return result


def _human(seconds: float) -> str:
    if not math.isfinite(seconds):
        return "forever"
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"
