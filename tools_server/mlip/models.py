"""Machine-learned potentials as ASE calculators, with their weights found offline (never downloaded unless
allowed).

Layout under ``SPU_WEIGHTS_DIR`` (see docs/weights.md)::

    torchani/StateDicts/ani2x_state_dict.pt     TorchANI's own cache layout (TORCHANI_DATA_DIR points here)
    aimnet2/<name>.pt                           AIMNet2 v2 model files (default aimnet2_wb97m_d3_0.pt)
    mace/<name>.model                           MACE-OFF model files (default MACE-OFF23_small.model)
    sevennet/<name>.pth                         extra SevenNet checkpoints; SevenNet-0 ships in its wheel

``SPU_WEIGHTS_DOWNLOAD=1`` lets TorchANI, AIMNet2 and MACE fetch a missing model with their own
downloaders. Everything here runs in a worker process; engines are imported inside the functions.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from tools_server.plugin import ToolError, download_allowed, weights_dir, weights_missing

ENGINES = ("ani2x", "aimnet2", "mace_off", "sevennet")
_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,120}$")


@dataclass(frozen=True)
class ModelInfo:
    engine: str
    label: str
    elements: frozenset[int] | None  # None: checked by the engine itself
    charged: bool  # accepts a total charge other than zero
    level: str  # the reference method the model was trained to reproduce
    dist: str  # the distribution whose version goes into provenance


#: Published coverage of each model family (the papers' training sets).
INFO = {
    "ani2x": ModelInfo(
        "ani2x", "ANI-2x", frozenset({1, 6, 7, 8, 9, 16, 17}), False, "wB97X/6-31G(d)", "torchani"
    ),
    "aimnet2": ModelInfo(
        "aimnet2",
        "AIMNet2",
        frozenset({1, 5, 6, 7, 8, 9, 14, 15, 16, 17, 33, 34, 35, 53}),
        True,
        "wB97M-D3/def2-TZVPP",
        "aimnet",
    ),
    "mace_off": ModelInfo(
        "mace_off",
        "MACE-OFF23",
        frozenset({1, 6, 7, 8, 9, 15, 16, 17, 35, 53}),
        False,
        "wB97M-D3(BJ)/def2-TZVPPD",
        "mace-torch",
    ),
    "sevennet": ModelInfo("sevennet", "SevenNet", None, False, "PBE(+U) (Materials Project)", "sevenn"),
}

DEFAULT_MODEL = {
    "ani2x": "ani2x",
    "aimnet2": "aimnet2_wb97m_d3_0",
    "mace_off": "MACE-OFF23_small",
    "sevennet": "7net-0",
}
MACE_OFF_SIZES = {"MACE-OFF23_small": "small", "MACE-OFF23_medium": "medium", "MACE-OFF23_large": "large"}


def check_name(name: str) -> None:
    if not _NAME_RE.match(name):
        raise ToolError("invalid_input", f"{name!r} is not a model name (letters, digits, _ . - only).")


def ani_dir() -> Path:
    return weights_dir() / "torchani"


def ani_state_dict() -> Path:
    return ani_dir() / "StateDicts" / "ani2x_state_dict.pt"


def model_path(engine: str, name: str) -> Path | None:
    """Where the weights of ``name`` are expected (None for weights shipped inside a package)."""
    check_name(name)
    if engine == "ani2x":
        return ani_state_dict()
    if engine == "aimnet2":
        return weights_dir() / "aimnet2" / f"{name}.pt"
    if engine == "mace_off":
        return weights_dir() / "mace" / f"{name}.model"
    if engine == "sevennet":
        if name in ("7net-0", "SevenNet-0", "sevennet-0"):
            return None
        return weights_dir() / "sevennet" / f"{name}.pth"
    raise ToolError("invalid_input", f"Unknown MLIP engine {engine!r}; choose one of {', '.join(ENGINES)}.")


def check_engine(engine: str) -> None:
    import importlib.util

    module = {"ani2x": "torchani", "aimnet2": "aimnet", "mace_off": "mace", "sevennet": "sevenn"}[engine]
    if importlib.util.find_spec(module) is None:
        raise ToolError(
            "engine_unavailable",
            f"{INFO[engine].label} needs the {INFO[engine].dist} package, which is not installed.",
            hint="pip install 'spu-scaffold[mlip]'",
        )


def check_molecule(engine: str, numbers: list[int], charge: int, multiplicity: int) -> None:
    """Refuse elements and charges a model was never trained on, before anything is loaded."""
    from tools_server.molecules import element_symbol as _symbol

    info = INFO[engine]
    if info.elements is not None:
        bad = sorted({int(z) for z in numbers} - info.elements)
        if bad:
            allowed = " ".join(_symbol(z) for z in sorted(info.elements))
            raise ToolError(
                "unsupported_element",
                f"{info.label} covers {allowed}; the molecule has {', '.join(_symbol(z) for z in bad)}.",
                hint="Use AIMNet2 (14 elements incl. B, Si, P, As, Se, Br, I) or GFN2-xTB (xtb_run, H-Rn).",
            )
    if charge != 0 and not info.charged:
        raise ToolError(
            "unsupported_charge",
            f"{info.label} is trained on neutral molecules only; this one has total charge {charge:+d}.",
        )
    if multiplicity != 1:
        raise ToolError(
            "unsupported_charge",
            f"{info.label} here handles closed-shell singlets only; multiplicity {multiplicity} was asked.",
            hint="Use xtb_run or dft_run for open-shell molecules.",
        )


def check_model_species(engine: str, calc: Any, numbers: list[int]) -> None:
    """The loaded model's own element list (AIMNet2 files declare theirs; a model may cover fewer)."""
    from tools_server.molecules import element_symbol as _symbol

    species = getattr(calc, "implemented_species", None)
    if species is None:  # SevenNet: the atomic numbers of its type map
        species = list(getattr(calc, "type_map", None) or {}) or None
    if species is None:
        return
    allowed = {int(z) for z in species}
    bad = sorted({int(z) for z in numbers} - allowed)
    if bad:
        raise ToolError(
            "unsupported_element",
            f"This {INFO[engine].label} model covers {' '.join(_symbol(z) for z in sorted(allowed))}; the "
            f"molecule has {', '.join(_symbol(z) for z in bad)}.",
        )


def import_e3nn() -> None:
    """e3nn 0.4 reads its constants with torch.load, whose weights-only default (torch >= 2.6) refuses a
    pickled ``slice``; allow exactly that type while e3nn is first imported (MACE needs e3nn 0.4)."""
    import torch

    with torch.serialization.safe_globals([slice]):
        import e3nn.o3  # noqa: F401


def load_calculator(engine: str, name: str, device: str, charge: int = 0) -> Any:
    """An ASE calculator for ``engine``/``name`` on ``device``; raises weights_missing when absent."""
    path = model_path(engine, name)
    stamp = path.stat().st_mtime if path is not None and path.is_file() else 0.0
    if path is not None and not path.is_file() and not download_allowed():
        raise weights_missing(f"{INFO[engine].label} ({name})", path)
    if engine == "aimnet2":
        base = _aimnet_base(str(path), stamp, device)
        from aimnet.calculators import AIMNet2ASE

        return AIMNet2ASE(base, charge=charge, mult=1)
    return _calculator_cached(engine, name, str(path) if path else "", stamp, device)


@lru_cache(maxsize=2)
def _aimnet_base(path: str, mtime: float, device: str) -> Any:
    from aimnet.calculators import AIMNet2Calculator

    if Path(path).is_file():
        return AIMNet2Calculator(model=path, device=device)
    # downloading is allowed: AIMNet2's registry fetches the named model into its own cache
    return AIMNet2Calculator(model=Path(path).stem.replace("aimnet2_", "aimnet2-", 1).replace("_d3_", "-d3_"))


@lru_cache(maxsize=2)
def _calculator_cached(engine: str, name: str, path: str, mtime: float, device: str) -> Any:
    if engine == "ani2x":
        os.environ["TORCHANI_DATA_DIR"] = str(ani_dir())
        import torch
        import torchani

        model = torchani.models.ANI2x(device=device, dtype=torch.float64)
        return model.ase()
    if engine == "mace_off":
        import_e3nn()
        from mace.calculators import MACECalculator, mace_off

        if Path(path).is_file():
            return MACECalculator(model_paths=path, device=device, default_dtype="float64")
        size = MACE_OFF_SIZES.get(name)
        if size is None:
            raise weights_missing(f"MACE model {name}", Path(path))
        return mace_off(model=size, device=device, default_dtype="float64")
    if engine == "sevennet":
        import_e3nn()
        from sevenn.calculator import SevenNetCalculator

        return SevenNetCalculator(model=path or "7net-0", device=device)
    raise ToolError("invalid_input", f"Unknown MLIP engine {engine!r}.")


def make_calculator(
    mol: Any,
    engine: str = "aimnet2",
    model: str | None = None,
    device: str = "cpu",
    *,
    inline_forces: bool = False,
) -> Any:
    """The :class:`~tools_server.engines.calculator.Calculator` of an ML potential for ``mol``, after the
    element, charge and structure checks ``mlip_run`` makes (the model is loaded once per process)."""
    from tools_server.engines.calculator import AseCalculator
    from tools_server.molecules import check_geometry

    check_engine(engine)
    name = model or DEFAULT_MODEL[engine]
    check_name(name)
    check_molecule(engine, mol.numbers, mol.charge, mol.multiplicity)
    check_geometry(mol)
    calc = load_calculator(engine, name, device, charge=mol.charge)
    check_model_species(engine, calc, mol.numbers)
    return AseCalculator(
        calc, mol.numbers, name=f"{INFO[engine].label} ({name})", inline_forces=inline_forces
    )


def engine_version(engine: str) -> str | None:
    from importlib import metadata

    try:
        return metadata.version(INFO[engine].dist)
    except metadata.PackageNotFoundError:
        return None


def random_ani2x(seed: int = 0) -> Any:
    """ANI-2x's architecture (8 networks, 7 elements) as TorchANI assembles it, with random weights: for
    tests and benchmarks on machines without the published weights (it predicts nothing). Its
    ``state_dict()`` saved as ``ani_state_dict()`` is what :func:`load_calculator` loads."""
    import torch
    from torchani.arch import Assembler
    from torchani.utils import SYMBOLS_2X

    asm = Assembler(periodic_table_index=True)
    asm.set_symbols(SYMBOLS_2X)
    asm.set_global_cutoff_fn("cosine")
    asm.set_aev_computer(radial="ani2x", angular="ani2x", strategy="pyaev")
    asm.set_atomic_networks(ctor="ani2x")
    asm.set_neighborlist("all_pairs")
    asm.set_gsaes_as_self_energies("wb97x-631gd")
    torch.manual_seed(seed)
    return asm.assemble(8)
