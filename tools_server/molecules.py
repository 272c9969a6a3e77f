"""Molecule input shared by every chemistry and quantum-chemistry tool, and what the domains share about
their inputs: the type of a molecule argument (:data:`MoleculeText`), element symbols
(:func:`element_symbol`) and a molecule's cache key (:func:`cache_key`). Domains import these from here,
never from each other.

One string names one molecule. Accepted forms, detected in this order:

* a path to an ``.sdf``, ``.mol`` or ``.xyz`` file (for example an artifact written by an earlier tool);
  ``path.sdf#3`` picks the fourth record of a multi-record SDF (records count from 0);
* a molblock (text holding ``M  END`` or a ``V2000``/``V3000`` counts line);
* XYZ text (a line with the atom count, a comment line, then ``Symbol x y z`` lines in Å; the two header
  lines may be omitted);
* otherwise a SMILES string.

SMILES are canonicalised first and 3D coordinates are built from the canonical SMILES with RDKit's ETKDG
(fixed seed) and relaxed with MMFF94 (UFF where MMFF has no parameters), so the same molecule always gives
the same starting geometry. Charge and spin multiplicity are checked against the electron count, and the
elements against what a method supports. Problems raise :class:`MoleculeError` with one of the stable
codes ``invalid_smiles``, ``invalid_input``, ``charge_multiplicity_mismatch``, ``unsupported_element``.

Only RDKit and NumPy are imported here, inside functions, so the module is cheap to import.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tools_server.plugin import INVISIBLE_RE, ToolError, file_reference

#: ETKDG seed: fixed so a SMILES always gives the same 3D start (and cached results stay reproducible).
EMBED_SEED = 0xF00D
_FILE_SUFFIXES = (".sdf", ".mol", ".xyz", ".sd")
#: The type of a molecule argument: a SMILES, a molblock, XYZ text, or a path to a molecule file (read with
#: :func:`tools_server.plugin.read_input`, so every such field is raced by the path tests too).
MoleculeText = file_reference("molecule")
_XYZ_LINE = re.compile(r"^\s*([A-Z][a-z]?|\d{1,3})\s+(\S+)\s+(\S+)\s+(\S+)\s*$")


class MoleculeError(ToolError):
    """A molecule that cannot be used, with a stable error code (one of ``tools_server.plugin.ERROR_CODES``).
    A :class:`~tools_server.plugin.ToolError`: raised where the problem is found, it reaches the client as
    it is, or becomes the error of its batch item."""


@dataclass
class Molecule:
    """A 3D molecule ready for a quantum-chemistry engine. Coordinates in Å."""

    numbers: list[int]
    coords_angstrom: Any  # numpy array (n_atoms, 3)
    charge: int = 0
    multiplicity: int = 1
    smiles: str | None = None
    source: str = "smiles"
    rdmol: Any = None  # RDKit Mol with explicit H and one conformer, when known (for SDF output)
    notes: list[str] = field(default_factory=list)

    @property
    def symbols(self) -> list[str]:
        from rdkit.Chem import GetPeriodicTable

        table = GetPeriodicTable()
        return [table.GetElementSymbol(int(z)) for z in self.numbers]

    @property
    def n_atoms(self) -> int:
        return len(self.numbers)

    @property
    def n_electrons(self) -> int:
        return int(sum(self.numbers)) - self.charge

    @property
    def unpaired(self) -> int:
        return self.multiplicity - 1

    def formula(self) -> str:
        """Hill formula (C, then H if any, then the rest alphabetically; all alphabetical without carbon)."""
        counts: dict[str, int] = {}
        for s in self.symbols:
            counts[s] = counts.get(s, 0) + 1
        first = [el for el in ("C", "H") if el in counts] if "C" in counts else []
        order = first + sorted(k for k in counts if k not in first)
        return "".join(f"{el}{counts[el] if counts[el] > 1 else ''}" for el in order)

    def with_coords(self, coords_angstrom: Any) -> Molecule:
        import numpy as np

        return Molecule(
            numbers=list(self.numbers),
            coords_angstrom=np.asarray(coords_angstrom, dtype=float).reshape(-1, 3),
            charge=self.charge,
            multiplicity=self.multiplicity,
            smiles=self.smiles,
            source=self.source,
            rdmol=self.rdmol,
        )

    def to_xyz(self, comment: str = "") -> str:
        lines = [str(self.n_atoms), comment.replace("\n", " ")]
        for sym, (x, y, z) in zip(self.symbols, self.coords_angstrom, strict=True):
            lines.append(f"{sym:<2s} {x:16.10f} {y:16.10f} {z:16.10f}")
        return "\n".join(lines) + "\n"

    def to_molblock(self, title: str = "") -> str | None:
        """The molecule at its current coordinates as a molblock, or None when the bonds are unknown."""
        if self.rdmol is None:
            return None
        from rdkit import Chem
        from rdkit.Geometry import Point3D

        mol = Chem.Mol(self.rdmol)
        conf = mol.GetConformer()
        for i, (x, y, z) in enumerate(self.coords_angstrom):
            conf.SetAtomPosition(i, Point3D(float(x), float(y), float(z)))
        if title:
            mol.SetProp("_Name", title)
        return Chem.MolToMolBlock(mol)


# --------------------------------------------------------------------------------------------------
# RDKit parsing (2D), used by the cheminformatics tools
# --------------------------------------------------------------------------------------------------


class _Collect(logging.Handler):
    def __init__(self, sink: list[str]) -> None:
        super().__init__(logging.DEBUG)
        self.sink = sink

    def emit(self, record: logging.LogRecord) -> None:
        line = re.sub(r"^\[[0-9:]+\]\s*", "", record.getMessage()).strip()
        if line and not line.startswith("*") and line not in self.sink:
            self.sink.append(line)


@contextlib.contextmanager
def rdkit_messages() -> Iterator[list[str]]:
    """Collect RDKit's warnings and errors (its log) into a list instead of printing them."""
    from rdkit import rdBase

    messages: list[str] = []
    logger = logging.getLogger("rdkit")
    handler = _Collect(messages)
    rdBase.LogToPythonLogger()
    saved, logger.handlers = logger.handlers, [handler]
    propagate, logger.propagate = logger.propagate, False
    try:
        yield messages
    finally:
        logger.handlers = saved
        logger.propagate = propagate


def detect_format(text: str) -> str:
    """``file``, ``molblock``, ``xyz`` or ``smiles``."""
    stripped = text.strip()
    if "\n" not in stripped and _looks_like_path(stripped):
        return "file"
    if "M  END" in text or re.search(r"V[23]000", text):
        return "molblock"
    lines = [ln for ln in stripped.splitlines() if ln.strip()]
    if lines and (lines[0].strip().isdigit() or all(_XYZ_LINE.match(ln) for ln in lines)):
        return "xyz"
    return "smiles"


def _looks_like_path(text: str) -> bool:
    base = text.split("#", 1)[0]
    return base.lower().endswith(_FILE_SUFFIXES) and ("/" in base or "\\" in base or Path(base).exists())


def read_file_text(spec: str) -> tuple[str, str, int]:
    """(text, suffix, record index) of a file reference ``path[#index]``: a regular file under the allowed
    roots, read once from its checked descriptor (:func:`tools_server.plugin.read_input`), never through a
    link."""
    return _read_reference(spec)[:3]


def _read_reference(spec: str) -> tuple[str, str, int, str]:
    """:func:`read_file_text` and the SHA-256 of the bytes read."""
    from tools_server.plugin import read_input

    base, _, index = spec.strip().partition("#")
    try:
        record = int(index) if index else 0
    except ValueError:
        raise MoleculeError("invalid_input", f"Record index after '#' must be an integer: {spec}") from None
    try:
        read = read_input(base, kind="molecule")
    except ToolError as exc:
        raise MoleculeError(exc.code, exc.message) from None
    text = read.data.decode("utf-8", errors="replace")
    return text, read.path.suffix.lower(), record, read.sha256


def _file_error(spec: str, exc: MoleculeError) -> MoleculeError:
    """A parse error for file content, without quoting the content."""
    base = spec.strip().partition("#")[0]
    return MoleculeError(exc.code, f"Could not read a molecule from {base} (its content is not shown)")


def _sdf_record(text: str, record: int) -> str:
    # Split on the "$$$$" lines only: a molblock's first (title) line may be empty and must survive.
    parts = re.split(r"^\$\$\$\$[ \t]*\r?\n?", text, flags=re.MULTILINE)
    blocks = [b for b in parts if "M  END" in b]
    if not 0 <= record < len(blocks):
        raise MoleculeError(
            "invalid_input", f"The SDF has {len(blocks)} records; record {record} does not exist"
        )
    return blocks[record]


def parse_rdkit(text: str, *, sanitize: bool = True) -> tuple[Any, list[str]]:
    """An RDKit Mol (as written: hydrogens implicit) and RDKit's warnings for a SMILES, molblock or file.

    XYZ input gets its bonds perceived with ``rdDetermineBonds`` (charge 0).
    """
    from rdkit import Chem

    kind = detect_format(text)
    if kind == "file":
        content, suffix, record = read_file_text(text)
        try:
            if suffix == ".xyz":
                return _rdkit_from_xyz(content), []
            mol, messages = parse_rdkit(_sdf_record(content, record), sanitize=sanitize)
        except MoleculeError as exc:
            raise _file_error(text, exc) from None
        return mol, messages
    check_size(text)
    if kind == "smiles":
        check_smiles_text(text)
    with rdkit_messages() as messages:
        if kind == "molblock":
            mol = Chem.MolFromMolBlock(text, sanitize=sanitize, removeHs=True)
        elif kind == "xyz":
            mol = _rdkit_from_xyz(text)
        else:
            smiles = text.strip()
            if not smiles or any(c.isspace() for c in smiles):
                mol = None
                messages.append("SMILES must be one token without spaces")
            else:
                mol = Chem.MolFromSmiles(smiles, sanitize=sanitize)
    if mol is None:
        useful = [m for m in messages if m.strip() != text.strip() and not set(m) <= set("~^ ")]
        detail = "; ".join(useful) or "RDKit could not read it"
        if kind == "smiles":
            raise MoleculeError("invalid_smiles", f"Invalid SMILES {text.strip()[:200]!r}: {detail}")
        raise MoleculeError("invalid_input", f"Could not read the {kind}: {detail}")
    return mol, messages


def _rdkit_from_xyz(text: str) -> Any:
    from rdkit import Chem
    from rdkit.Chem import rdDetermineBonds

    numbers, coords = parse_xyz(text)
    block = "\n".join(
        [str(len(numbers)), ""]
        + [
            f"{element_symbol(z)} {x:.8f} {y:.8f} {w:.8f}"
            for z, (x, y, w) in zip(numbers, coords, strict=True)
        ]
    )
    mol = Chem.MolFromXYZBlock(block)
    if mol is None:
        raise MoleculeError("invalid_input", "Could not read the XYZ block")
    try:
        rdDetermineBonds.DetermineBonds(mol, charge=0)
    except Exception as exc:
        raise MoleculeError(
            "invalid_input", f"Could not perceive bonds from the XYZ coordinates: {exc}"
        ) from None
    return Chem.RemoveHs(mol)


def element_symbol(z: int) -> str:
    """The element symbol of atomic number ``z`` (RDKit's periodic table)."""
    from rdkit.Chem import GetPeriodicTable

    return GetPeriodicTable().GetElementSymbol(int(z))


def parse_xyz(text: str) -> tuple[list[int], Any]:
    """Atomic numbers and coordinates (Å) from XYZ text, with or without the two header lines."""
    import numpy as np
    from rdkit.Chem import GetPeriodicTable

    table = GetPeriodicTable()
    lines = [ln for ln in text.strip().splitlines()]
    expected = None
    if lines and lines[0].strip().isdigit():
        expected = int(lines[0].strip())
        lines = lines[2:]
    numbers: list[int] = []
    coords: list[list[float]] = []
    for ln in lines:
        if not ln.strip():
            continue
        m = _XYZ_LINE.match(ln)
        if not m:
            raise MoleculeError("invalid_input", f"Not an XYZ atom line: {ln.strip()[:80]!r}")
        sym = m.group(1)
        try:
            z = int(sym) if sym.isdigit() else table.GetAtomicNumber(sym)
            xyz = [float(m.group(i)) for i in (2, 3, 4)]
        except (ValueError, RuntimeError):
            raise MoleculeError(
                "invalid_input", f"Unknown element or bad number in {ln.strip()[:80]!r}"
            ) from None
        if z <= 0:
            raise MoleculeError("invalid_input", f"Unknown element {sym!r}")
        numbers.append(z)
        coords.append(xyz)
    if not numbers:
        raise MoleculeError("invalid_input", "The XYZ block holds no atoms")
    if expected is not None and expected != len(numbers):
        raise MoleculeError(
            "invalid_input", f"The XYZ header says {expected} atoms but {len(numbers)} follow"
        )
    return numbers, np.asarray(coords, dtype=float)


def canonical_smiles(text: str) -> str:
    from rdkit import Chem

    mol, _ = parse_rdkit(text)
    return Chem.MolToSmiles(mol)


# --------------------------------------------------------------------------------------------------
# 3D molecules for quantum chemistry
# --------------------------------------------------------------------------------------------------


def load_molecule(
    text: str,
    *,
    charge: int | None = None,
    multiplicity: int | None = None,
    force_field: str = "MMFF",
) -> Molecule:
    """A validated 3D :class:`Molecule` from any accepted input string.

    ``charge`` None means: the formal charge of a SMILES or molblock, 0 for XYZ. ``multiplicity`` None
    means: radical electrons + 1 for SMILES/molblock, else the lowest one the electron parity allows.
    Coordinates are checked to be finite and in range (:mod:`tools_server.molecules`); engines check
    for coincident atoms after their own element checks (:func:`check_geometry`).
    """

    kind = detect_format(text)
    if kind == "file":
        content, suffix, record = read_file_text(text)
        try:
            check_size(content if suffix == ".xyz" else _sdf_record(content, record))
            if suffix == ".xyz":
                mol = _molecule_from_xyz(content)
            else:
                mol = _molecule_from_molblock(_sdf_record(content, record))
        except MoleculeError as exc:
            raise _file_error(text, exc) from None
        mol.source = "file"
        check_known_elements(mol.numbers)
        check_coordinates(mol.coords_angstrom)
        _apply_charge_and_spin(mol, charge, multiplicity)
        return mol
    check_size(text)
    if kind == "smiles":
        check_smiles_text(text)
    if kind == "molblock":
        mol = _molecule_from_molblock(text)
    elif kind == "xyz":
        mol = _molecule_from_xyz(text)
    else:
        mol = _molecule_from_smiles(text, force_field)
    check_known_elements(mol.numbers)
    check_coordinates(mol.coords_angstrom)
    _apply_charge_and_spin(mol, charge, multiplicity)
    return mol


def _rdkit_spin_defaults(rdmol: Any) -> tuple[int, int]:
    from rdkit import Chem
    from rdkit.Chem import Descriptors

    return Chem.GetFormalCharge(rdmol), Descriptors.NumRadicalElectrons(rdmol) + 1


def _apply_charge_and_spin(mol: Molecule, charge: int | None, multiplicity: int | None) -> None:
    if mol.rdmol is not None:
        formal, radical_mult = _rdkit_spin_defaults(mol.rdmol)
        if charge is not None and charge != formal:
            raise MoleculeError(
                "charge_multiplicity_mismatch",
                f"charge {charge} disagrees with the structure's formal charge {formal}; write the charge "
                "into "
                "the SMILES/molblock (e.g. [NH4+]) or leave charge unset",
            )
        mol.charge = formal
        default_mult = radical_mult
    else:
        mol.charge = 0 if charge is None else int(charge)
        default_mult = 1 + (mol.n_electrons % 2)
    if multiplicity is None:
        multiplicity = default_mult
        if (multiplicity - 1) % 2 != mol.n_electrons % 2:
            multiplicity = 1 + (mol.n_electrons % 2)
        metals = sorted({element_symbol(z) for z in mol.numbers if _is_transition_metal(z)})
        if metals:
            mol.notes.append(
                f"multiplicity {multiplicity} is a default (radical electrons + 1, or the lowest the "
                f"electron count allows); the spin state of a transition metal ({', '.join(metals)}) is not "
                "inferred: pass multiplicity for another"
            )
    mol.multiplicity = int(multiplicity)
    validate_spin(mol.numbers, mol.charge, mol.multiplicity)


def _is_transition_metal(z: int) -> bool:
    """d- and f-block elements, whose spin states a structure does not tell."""
    return 21 <= z <= 30 or 39 <= z <= 48 or 57 <= z <= 80 or 89 <= z <= 112


def validate_spin(numbers: list[int], charge: int, multiplicity: int) -> None:
    """Raise ``charge_multiplicity_mismatch`` unless charge and 2S+1 fit the electron count."""
    n_electrons = int(sum(numbers)) - int(charge)
    if multiplicity < 1:
        raise MoleculeError("charge_multiplicity_mismatch", f"multiplicity must be >= 1, got {multiplicity}")
    if n_electrons < 0:
        raise MoleculeError("charge_multiplicity_mismatch", f"charge {charge} leaves {n_electrons} electrons")
    if (multiplicity - 1) % 2 != n_electrons % 2:
        parity = "odd" if n_electrons % 2 else "even"
        allowed = "2, 4, ..." if n_electrons % 2 else "1, 3, ..."
        raise MoleculeError(
            "charge_multiplicity_mismatch",
            f"{n_electrons} electrons ({parity}) at charge {charge} cannot have multiplicity {multiplicity}; "
            f"allowed: {allowed}",
        )
    if multiplicity - 1 > n_electrons:
        raise MoleculeError(
            "charge_multiplicity_mismatch",
            f"multiplicity {multiplicity} needs {multiplicity - 1} unpaired electrons but there are "
            f"{n_electrons}",
        )


def check_geometry(mol: Molecule) -> None:
    """Raise ``invalid_structure`` when atoms of ``mol`` sit at one point (run before any engine)."""
    check_no_coincident_atoms(mol.coords_angstrom)


def check_elements(numbers: list[int], *, max_z: int, method: str) -> None:
    """Raise ``unsupported_element`` for any atomic number above ``max_z``."""
    bad = sorted({int(z) for z in numbers if int(z) > max_z or int(z) < 1})
    if bad:
        names = ", ".join(f"{element_symbol(z)} (Z={z})" for z in bad)
        raise MoleculeError(
            "unsupported_element", f"{method} supports elements up to Z={max_z}; found {names}"
        )


#: The gap between the facing sides of two fragments of one structure as :func:`spread_fragments` places them.
FRAGMENT_GAP_ANGSTROM = 3.0


def spread_fragments(rdmol: Any, conf_id: int = -1) -> int:
    """Place the disconnected fragments of ``rdmol`` (a salt, a mixture, a metal ion and its ligands) side by
    side along x, :data:`FRAGMENT_GAP_ANGSTROM` apart, in conformer ``conf_id``; returns the fragment count.

    ETKDG embeds each fragment about the origin, so without this they overlap: water sat 0.3 Å into ethanol
    (``CCO.O``, below the coincident-atom check, so an engine got it), and ``[Na+].[Cl-]`` was one point."""
    import numpy as np
    from rdkit import Chem
    from rdkit.Geometry import Point3D

    fragments = Chem.GetMolFrags(rdmol, asMols=False, sanitizeFrags=False)
    if len(fragments) < 2:
        return len(fragments)
    conf = rdmol.GetConformer(conf_id)
    xyz = np.asarray(conf.GetPositions(), dtype=float)
    edge = 0.0
    for atoms in fragments:
        idx = list(atoms)
        part = xyz[idx] - xyz[idx].mean(axis=0)
        part[:, 0] += edge - part[:, 0].min()
        xyz[idx] = part
        edge = part[:, 0].max() + FRAGMENT_GAP_ANGSTROM
    for i, (x, y, z) in enumerate(xyz):
        conf.SetAtomPosition(i, Point3D(float(x), float(y), float(z)))
    return len(fragments)


def fragments_note(n_fragments: int, how: str = "") -> str:
    """The start of the warning a result of a multi-fragment structure carries."""
    return f"{n_fragments} disconnected fragments, placed {FRAGMENT_GAP_ANGSTROM:g} Å apart{how}"


def embed_3d(rdmol_h: Any, *, seed: int = EMBED_SEED) -> int:
    """Give a hydrogen-complete RDKit Mol one ETKDG conformer in place (random-coordinate fallback), its
    fragments side by side (:func:`spread_fragments`); returns the fragment count."""
    from rdkit.Chem import AllChem

    params = AllChem.ETKDGv3()
    params.randomSeed = seed
    if AllChem.EmbedMolecule(rdmol_h, params) != 0:
        params.useRandomCoords = True
        if AllChem.EmbedMolecule(rdmol_h, params) != 0:
            raise MoleculeError("invalid_input", "RDKit could not build 3D coordinates (ETKDG failed)")
    return spread_fragments(rdmol_h)


def relax_force_field(rdmol_h: Any, force_field: str = "MMFF", conf_id: int = -1) -> str | None:
    """Relax one conformer with MMFF94 (or UFF); returns the force field used, None if neither applies."""
    from rdkit.Chem import AllChem

    if force_field.upper().startswith("MMFF") and AllChem.MMFFHasAllMoleculeParams(rdmol_h):
        AllChem.MMFFOptimizeMolecule(rdmol_h, confId=conf_id, maxIters=2000)
        return "MMFF94"
    if AllChem.UFFHasAllMoleculeParams(rdmol_h):
        AllChem.UFFOptimizeMolecule(rdmol_h, confId=conf_id, maxIters=2000)
        return "UFF"
    return None


def _molecule_from_smiles(text: str, force_field: str) -> Molecule:
    import numpy as np
    from rdkit import Chem

    rdmol, _ = parse_rdkit(text)
    smiles = Chem.MolToSmiles(rdmol)
    # Build from the canonical SMILES so equal molecules get equal atom order and starting geometry.
    mol_h = Chem.AddHs(Chem.MolFromSmiles(smiles))
    for atom in mol_h.GetAtoms():
        if atom.GetAtomicNum() == 0:
            raise MoleculeError("invalid_smiles", "Dummy atoms (*) have no coordinates for quantum chemistry")
    with rdkit_messages():
        n_fragments = embed_3d(mol_h)
        used = relax_force_field(mol_h, force_field)
    notes = [] if used else ["no force-field parameters; ETKDG geometry used unrelaxed"]
    if n_fragments > 1:
        notes.append(
            fragments_note(n_fragments, f" ({used} relaxes each on its own)" if used else "")
            + "; the result is for them together. Give one connected structure (or an XYZ) for a complex."
        )
    coords = np.asarray(mol_h.GetConformer().GetPositions(), dtype=float)
    return Molecule(
        numbers=[a.GetAtomicNum() for a in mol_h.GetAtoms()],
        coords_angstrom=coords,
        smiles=smiles,
        source="smiles",
        rdmol=mol_h,
        notes=notes,
    )


def _molecule_from_molblock(block: str) -> Molecule:
    import numpy as np
    from rdkit import Chem

    with rdkit_messages() as messages:
        rdmol = Chem.MolFromMolBlock(block, removeHs=False)
    if rdmol is None:
        raise MoleculeError(
            "invalid_input", "Could not read the molblock: " + ("; ".join(messages) or "RDKit failed")
        )
    if rdmol.GetNumConformers() == 0 or not rdmol.GetConformer().Is3D():
        raise MoleculeError(
            "invalid_input", "The molblock has no 3D coordinates; pass a SMILES to have them built"
        )
    if any(a.GetTotalNumHs() for a in rdmol.GetAtoms()):
        raise MoleculeError(
            "invalid_input",
            "The molblock has implicit hydrogens; quantum chemistry needs every hydrogen with coordinates "
            "(add them, e.g. RDKit AddHs(addCoords=True))",
        )
    return Molecule(
        numbers=[a.GetAtomicNum() for a in rdmol.GetAtoms()],
        coords_angstrom=np.asarray(rdmol.GetConformer().GetPositions(), dtype=float),
        smiles=Chem.MolToSmiles(Chem.RemoveHs(rdmol)),
        source="molblock",
        rdmol=rdmol,
    )


def _molecule_from_xyz(text: str) -> Molecule:
    numbers, coords = parse_xyz(text)
    return Molecule(numbers=numbers, coords_angstrom=coords, source="xyz")


def cache_key(text: str) -> str:
    """What a molecule string contributes to a cache key, computed without RDKit or NumPy (it runs in the
    server process, before any job starts): the SMILES as written (stripped), rounded coordinates for XYZ
    text, a hash of the contents for a file or molblock. Two spellings of one molecule therefore get two
    cache entries; nothing that can crash or take long runs in the server. Too-large input raises
    :class:`MoleculeError` ``too_large``.
    """
    kind = detect_format(text)
    if kind == "file":
        try:
            _, suffix, record, digest = _read_reference(text)
        except MoleculeError:
            return "raw:" + hashlib.sha256(text.strip().encode()).hexdigest()
        return f"file:{suffix}:{record}:sha256:{digest}"
    check_size(text)
    if kind == "smiles":
        # several fragments: their geometry changed when they were placed apart (spread_fragments), so
        # results cached before under the plain key are not served for them
        return ("smiles:" if "." not in text else "smiles-apart:") + text.strip()
    if kind == "xyz" and (rounded := _rounded_xyz(text)) is not None:
        return "xyz:" + rounded
    return "raw:" + hashlib.sha256(text.strip().encode()).hexdigest()


def _rounded_xyz(text: str) -> str | None:
    """``symbol,x,y,z;...`` with coordinates rounded to 1e-5 Å, in pure Python; None if not plain XYZ."""
    lines = text.strip().splitlines()
    if lines and lines[0].strip().isdigit():
        lines = lines[2:]
    rows = []
    for ln in lines:
        if not ln.strip():
            continue
        m = _XYZ_LINE.match(ln)
        if not m:
            return None
        try:
            x, y, z = (float(m.group(i)) for i in (2, 3, 4))
        except ValueError:
            return None
        rows.append(f"{m.group(1)},{x:.5f},{y:.5f},{z:.5f}")
    return ";".join(rows) or None


#: Input size limits checked in pure Python before any engine sees a molecule (docs/server.md).
MAX_ATOMS = 2000
MAX_MOLECULE_CHARS = 2_000_000
_SMILES_ATOM = re.compile(r"\[[^\]]*\]|Br|Cl|[BCNOPSFIbcnops*]")


def count_atoms(text: str) -> int:
    """The atoms of a molecule string as its reader counts them: the atoms written in a SMILES (heavy atoms
    and bracket atoms), the counts line of a molblock, the atom lines of an XYZ block (after its two header
    lines, when the first holds the count)."""
    kind = detect_format(text)
    if kind == "smiles":
        return len(_SMILES_ATOM.findall(text))
    if kind == "molblock":
        m = re.search(r"^\s*(\d{1,3})\s*(\d{1,3}).*V2000", text, flags=re.MULTILINE)
        if m:
            return int(m.group(1))
        m = re.search(r"COUNTS\s+(\d+)", text)
        return int(m.group(1)) if m else text.count("\n")
    lines = text.strip().splitlines()
    header = 2 if lines and lines[0].strip().isdigit() else 0
    return sum(1 for line in lines[header:] if line.strip())


def check_size(text: str) -> None:
    """``too_large`` for a molecule string over :data:`MAX_MOLECULE_CHARS` or :data:`MAX_ATOMS`."""
    if len(text) > MAX_MOLECULE_CHARS:
        raise MoleculeError(
            "too_large", f"The molecule text has {len(text)} characters (limit {MAX_MOLECULE_CHARS})"
        )
    n = count_atoms(text)
    if n > MAX_ATOMS:
        raise MoleculeError("too_large", f"The molecule has {n} atoms (limit {MAX_ATOMS})")


def check_smiles_text(text: str) -> None:
    """SMILES is ASCII: RDKit silently skips other characters (``"C💥"`` would read as methane), so any
    non-ASCII character is ``invalid_smiles``, named by its code point."""
    smiles = text.strip()
    if smiles.isascii():
        return
    pos, ch = next((i, c) for i, c in enumerate(smiles) if not c.isascii())
    invisible = INVISIBLE_RE.match(ch)
    kind = "an invisible or direction control character" if invisible else "a non-ASCII character"
    raise MoleculeError(
        "invalid_smiles",
        f"Invalid SMILES: {kind} U+{ord(ch):04X} at position {pos}; SMILES uses ASCII characters only",
    )


# --------------------------------------------------------------------------------------------------
# Coordinate checks every engine runs before native code sees a structure (finite, in range, no
# coincident atoms, real elements)
# --------------------------------------------------------------------------------------------------

#: Two atoms closer than this (Å) are one point: the shortest real bond (H2) is 0.74 Å.
MIN_DISTANCE_ANGSTROM = 0.1
#: No molecular or protein system spans more than this (Å); beyond it a number is a unit or typing error.
MAX_COORDINATE_ANGSTROM = 1e5
#: The heaviest element an engine can know (oganesson): above it, or below 1, is no element.
MAX_Z = 118


def check_coordinates(coords_angstrom: Any, what: str = "coordinates") -> None:
    """Raise ``invalid_input`` unless every coordinate is finite and below the size limit."""
    import numpy as np

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
