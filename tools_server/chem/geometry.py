"""Checks on atomic coordinates that every engine runs before native code sees them.

xTB, PySCF, the ML potentials, Vina and OpenMM all take NaN, infinite or absurd coordinates without
complaint (an ML potential even returns an energy for them), and atoms on top of each other give
meaningless numbers or a crash. So every structure is checked here first:

* every coordinate is a finite number below :data:`MAX_COORDINATE_ANGSTROM` in magnitude
  (``invalid_input``);
* no two atoms closer than :data:`MIN_DISTANCE_ANGSTROM` (``invalid_structure``);
* every atomic number is an element engines know (``unsupported_element``).

Problems raise :class:`~tools_server.chem.molecules.MoleculeError`; tools turn it into their error.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

#: Two atoms closer than this (Å) are one point: the shortest real bond (H2) is 0.74 Å.
MIN_DISTANCE_ANGSTROM = 0.1
#: No molecular or protein system spans more than this (Å); beyond it a number is a unit or typing error.
MAX_COORDINATE_ANGSTROM = 1e5
#: The heaviest element an engine can know (oganesson): above it, or below 1, is no element.
MAX_Z = 118

#: Error codes these checks raise beyond the shared ones (declared once, by the chem domain).
CODES = {
    "invalid_structure": "Two or more atoms sit at one point (closer than 0.1 Å): check the coordinates "
    "(units in Å, no duplicated lines) or rebuild the structure from a SMILES.",
}


def check_coordinates(coords_angstrom: Any, what: str = "coordinates") -> None:
    """Raise ``invalid_input`` unless every coordinate is finite and below the size limit."""
    import numpy as np

    from tools_server.chem.molecules import MoleculeError

    xyz = np.asarray(coords_angstrom, dtype=float)
    finite = np.isfinite(xyz)
    if not finite.all():
        k = int(np.argwhere(~finite)[0][0])
        raise MoleculeError(
            "invalid_input", f"The {what} hold a non-finite number (NaN or infinity) at atom {k}"
        )
    if xyz.size and float(np.abs(xyz).max()) > MAX_COORDINATE_ANGSTROM:
        k = int(np.argwhere(np.abs(xyz) > MAX_COORDINATE_ANGSTROM)[0][0])
        raise MoleculeError(
            "invalid_input",
            f"The {what} of atom {k} lie beyond {MAX_COORDINATE_ANGSTROM:g} Å: coordinates are in Å",
        )


def check_no_coincident_atoms(coords_angstrom: Any) -> None:
    """Raise ``invalid_structure`` when two atoms are closer than :data:`MIN_DISTANCE_ANGSTROM`."""
    import numpy as np
    from scipy.spatial import cKDTree

    from tools_server.chem.molecules import MoleculeError

    xyz = np.asarray(coords_angstrom, dtype=float).reshape(-1, 3)
    if len(xyz) < 2:
        return
    pairs = cKDTree(xyz).query_pairs(MIN_DISTANCE_ANGSTROM, output_type="ndarray")
    if len(pairs):
        i, j = sorted(int(v) for v in pairs[0])
        n_atoms = len(np.unique(pairs))
        raise MoleculeError(
            "invalid_structure",
            f"Atoms {i} and {j} are {float(np.linalg.norm(xyz[i] - xyz[j])):.3f} Å apart ({n_atoms} atoms "
            f"closer than {MIN_DISTANCE_ANGSTROM} Å to another): atoms at one point are not a structure",
        )


def check_known_elements(numbers: Sequence[int]) -> None:
    """Raise ``unsupported_element`` for atomic numbers that are no element (below 1 or above 118)."""
    from tools_server.chem.molecules import MoleculeError

    bad = sorted({int(z) for z in numbers if not 1 <= int(z) <= MAX_Z})
    if bad:
        raise MoleculeError("unsupported_element", f"No element has atomic number {', '.join(map(str, bad))}")


def check_structure(numbers: Sequence[int], coords_angstrom: Any, what: str = "coordinates") -> None:
    """All three checks, cheapest first."""
    check_known_elements(numbers)
    check_coordinates(coords_angstrom, what)
    check_no_coincident_atoms(coords_angstrom)


def first_non_finite(values: dict[str, Any]) -> str | None:
    """The name of the first entry of ``values`` (numbers or arrays) that is not finite, else None."""
    import numpy as np

    for name, value in values.items():
        if value is not None and not np.isfinite(np.asarray(value, dtype=float)).all():
            return name
    return None
