"""An OpenMM ``System`` carrying RDKit's MMFF94 parameters, for small-molecule liquids and solutions.

Why MMFF94: the usual OpenMM routes to small-molecule parameters (GAFF and SMIRNOFF through
``openmmforcefields``) need AmberTools or the OpenFF toolkit, neither of which installs from PyPI. RDKit does,
and it exposes every MMFF94 parameter it assigns (``MMFFGetMoleculeProperties``). This module writes those
parameters into OpenMM forces with MMFF's own functional forms:

* bond stretch with the quartic correction, angle bend with the cubic term (linear centres use
  ``143.9325 ka (1 + cos θ)``), stretch-bend, Wilson out-of-plane, three-term torsions;
* buffered 14-7 van der Waals with MMFF's combination rules, read pair by pair from RDKit;
* charges from MMFF's bond-charge increments; 1-2 and 1-3 pairs excluded, 1-4 electrostatics scaled by 0.75.

With ``periodic=False`` electrostatics use MMFF's buffered Coulomb ``332.0716 qi qj / (r + 0.05 Å)`` without
cut-off, so the energy equals RDKit's ``MMFFGetMoleculeForceField(...).CalcEnergy()`` (tests check this to
1e-6 relative). With ``periodic=True`` electrostatics use PME (plain Coulomb: the 0.05 Å buffer is dropped,
which changes a 3 Å contact energy by under 2 %) and van der Waals a switched cut-off with the long-range
dispersion correction. See docs/md.md.
"""

from __future__ import annotations

from typing import Any

KCAL_TO_KJ = 4.184
#: MMFF's conversion from md/Å to kcal/mol/Å² (RDKit's MDYNE_A_TO_KCAL_MOL).
MDYNE_A_TO_KCAL = 143.9325
#: MMFF's electrostatic constant in kcal Å / (mol e²), as RDKit uses it.
MMFF_COULOMB = 332.0716
#: MMFF atom types whose angles use the linear form (MMFFPROP.PAR column ``lin``).
LINEAR_TYPES = frozenset({4, 42, 53, 61})

_DEG = "57.29577951308232"


def mmff_properties(mol: Any) -> Any:
    """RDKit's MMFF94 properties for ``mol`` (explicit hydrogens); ``None`` if a type is missing."""
    from rdkit.Chem import AllChem

    props = AllChem.MMFFGetMoleculeProperties(mol, mmffVariant="MMFF94")
    if props is None or not AllChem.MMFFHasAllMoleculeParams(mol):
        return None
    return props


def build_mmff_system(
    mol: Any,
    props: Any,
    *,
    periodic: bool = False,
    box_nm: tuple[float, float, float] | None = None,
    cutoff_nm: float = 1.0,
    rigid_water: bool = True,
) -> Any:
    """An ``openmm.System`` for ``mol`` (one RDKit molecule, possibly many fragments) with MMFF94 terms.

    ``periodic`` needs ``box_nm``. Fragments that are water get rigid geometry (constraints) when
    ``rigid_water`` so a 2 fs step stays stable.
    """
    import openmm
    from rdkit import Chem

    n = mol.GetNumAtoms()
    system = openmm.System()
    for atom in mol.GetAtoms():
        system.addParticle(atom.GetMass())
    if periodic:
        if box_nm is None:
            raise ValueError("periodic systems need box_nm")
        a, b, c = box_nm
        system.setDefaultPeriodicBoxVectors(openmm.Vec3(a, 0, 0), openmm.Vec3(0, b, 0), openmm.Vec3(0, 0, c))

    bond_r0: dict[tuple[int, int], float] = {}
    _add_bonds(system, mol, props, bond_r0)
    linear = {i for i in range(n) if props.GetMMFFAtomType(i) in LINEAR_TYPES}
    _add_angles(system, mol, props, bond_r0, linear)
    _add_oop(system, mol, props)
    _add_torsions(system, mol, props)

    frags = Chem.GetMolFrags(mol, asMols=False, sanitizeFrags=False)
    pairs12_13: list[tuple[int, int]] = []
    pairs14: list[tuple[int, int]] = []
    for frag in frags:
        _topological_pairs(mol, frag, pairs12_13, pairs14)
    charges = [props.GetMMFFPartialCharge(i) for i in range(n)]
    # Every nonbonded force gets the same exclusions (1-2, 1-3, 1-4; OpenMM requires identical lists);
    # the 1-4 pairs come back as bonded terms: full 14-7 vdW and 0.75-scaled electrostatics.
    _add_vdw(system, mol, props, pairs12_13, pairs14, periodic, cutoff_nm)
    if periodic:
        _add_pme(system, charges, pairs12_13, pairs14, cutoff_nm)
    else:
        _add_buffered_coulomb(system, charges, pairs12_13, pairs14)
    if rigid_water:
        _constrain_waters(system, mol, frags)
    return system


def _add_bonds(system: Any, mol: Any, props: Any, bond_r0: dict[tuple[int, int], float]) -> None:
    import openmm

    force = openmm.CustomBondForce(
        f"{KCAL_TO_KJ}*{MDYNE_A_TO_KCAL}*0.5*kb*dr^2*(1 + cs*dr + 7/12*cs^2*dr^2); dr = 10*r - r0; cs = -2.0"
    )
    force.addPerBondParameter("kb")
    force.addPerBondParameter("r0")
    for bond in mol.GetBonds():
        i, j = bond.GetBeginAtomIdx(), bond.GetEndAtomIdx()
        _, kb, r0 = props.GetMMFFBondStretchParams(mol, i, j)
        force.addBond(i, j, [kb, r0])
        bond_r0[(i, j)] = bond_r0[(j, i)] = r0
    force.setName("MMFFBondStretch")
    system.addForce(force)


def _angle_triples(mol: Any) -> list[tuple[int, int, int]]:
    triples = []
    for atom in mol.GetAtoms():
        j = atom.GetIdx()
        nbrs = sorted(nb.GetIdx() for nb in atom.GetNeighbors())
        for a in range(len(nbrs)):
            for b in range(a + 1, len(nbrs)):
                triples.append((nbrs[a], j, nbrs[b]))
    return triples


def _add_angles(system: Any, mol: Any, props: Any, bond_r0: dict, linear: set[int]) -> None:
    import openmm

    c2 = f"{KCAL_TO_KJ}*{MDYNE_A_TO_KCAL}/{_DEG}^2"
    bend = openmm.CustomAngleForce(f"{c2}*0.5*ka*d^2*(1 - 0.006981*d); d = (theta - theta0)*{_DEG}")
    bend.addPerAngleParameter("ka")
    bend.addPerAngleParameter("theta0")
    bend.setName("MMFFAngleBend")
    lin = openmm.CustomAngleForce(f"{KCAL_TO_KJ}*{MDYNE_A_TO_KCAL}*ka*(1 + cos(theta))")
    lin.addPerAngleParameter("ka")
    lin.setName("MMFFAngleBendLinear")
    sb = openmm.CustomCompoundBondForce(
        3,
        f"{KCAL_TO_KJ}*{MDYNE_A_TO_KCAL}/{_DEG}*(kijk*(10*distance(p1,p2) - rij)"
        f" + kkji*(10*distance(p3,p2) - rkj))*(angle(p1,p2,p3) - theta0)*{_DEG}",
    )
    for name in ("kijk", "kkji", "rij", "rkj", "theta0"):
        sb.addPerBondParameter(name)
    sb.setName("MMFFStretchBend")
    import math

    for i, j, k in _angle_triples(mol):
        params = props.GetMMFFAngleBendParams(mol, i, j, k)
        if params is None:
            continue
        _, ka, theta0_deg = params
        theta0 = math.radians(theta0_deg)
        if j in linear:
            lin.addAngle(i, j, k, [ka])
            continue
        bend.addAngle(i, j, k, [ka, theta0])
        sbp = props.GetMMFFStretchBendParams(mol, i, j, k)
        if sbp is not None:
            _, kijk, kkji = sbp
            sb.addBond([i, j, k], [kijk, kkji, bond_r0[(i, j)], bond_r0[(k, j)], theta0])
    for force in (bend, lin, sb):
        system.addForce(force)


def _add_oop(system: Any, mol: Any, props: Any) -> None:
    import openmm

    # Wilson angle of bond j-l out of the plane i-j-k, from Cartesian coordinates (p2 is the centre j).
    expr = (
        f"{KCAL_TO_KJ}*{MDYNE_A_TO_KCAL}/{_DEG}^2*0.5*koop*chi^2;"
        f"chi = {_DEG}*asin(min(1, max(-1, (nx*lx + ny*ly + nz*lz)/(nn*ll))));"
        "nn = sqrt(nx^2 + ny^2 + nz^2); ll = sqrt(lx^2 + ly^2 + lz^2);"
        "nx = ay*bz - az*by; ny = az*bx - ax*bz; nz = ax*by - ay*bx;"
        "ax = x1 - x2; ay = y1 - y2; az = z1 - z2;"
        "bx = x3 - x2; by = y3 - y2; bz = z3 - z2;"
        "lx = x4 - x2; ly = y4 - y2; lz = z4 - z2"
    )
    force = openmm.CustomCompoundBondForce(4, expr)
    force.addPerBondParameter("koop")
    force.setName("MMFFOutOfPlane")
    for atom in mol.GetAtoms():
        if atom.GetDegree() != 3:
            continue
        j = atom.GetIdx()
        a, b, c = (nb.GetIdx() for nb in atom.GetNeighbors())
        koop = props.GetMMFFOopBendParams(mol, a, j, b, c)
        if koop is None:
            continue
        for i, k, out in ((a, b, c), (a, c, b), (b, c, a)):
            force.addBond([i, j, k, out], [koop])
    system.addForce(force)


def _add_torsions(system: Any, mol: Any, props: Any) -> None:
    import openmm

    force = openmm.CustomTorsionForce(
        f"{KCAL_TO_KJ}*0.5*(v1*(1 + cos(theta)) + v2*(1 - cos(2*theta)) + v3*(1 + cos(3*theta)))"
    )
    for name in ("v1", "v2", "v3"):
        force.addPerTorsionParameter(name)
    force.setName("MMFFTorsion")
    for bond in mol.GetBonds():
        j, k = bond.GetBeginAtomIdx(), bond.GetEndAtomIdx()
        for nb_j in mol.GetAtomWithIdx(j).GetNeighbors():
            i = nb_j.GetIdx()
            if i == k:
                continue
            for nb_k in mol.GetAtomWithIdx(k).GetNeighbors():
                m = nb_k.GetIdx()
                if m in (j, i):
                    continue
                params = props.GetMMFFTorsionParams(mol, i, j, k, m)
                if params is None:
                    continue
                _, v1, v2, v3 = params
                force.addTorsion(i, j, k, m, [v1, v2, v3])
    system.addForce(force)


def _topological_pairs(mol: Any, frag: tuple[int, ...], pairs12_13: list, pairs14: list) -> None:
    """Pairs within one fragment at shortest-path distance 1-2 (excluded) and 3 (1-4), as MMFF counts them."""
    from collections import deque

    members = set(frag)
    for start in frag:
        dist = {start: 0}
        queue = deque([start])
        while queue:
            u = queue.popleft()
            if dist[u] >= 3:
                continue
            for nb in mol.GetAtomWithIdx(u).GetNeighbors():
                v = nb.GetIdx()
                if v in members and v not in dist:
                    dist[v] = dist[u] + 1
                    queue.append(v)
        for other, d in dist.items():
            if other <= start:
                continue
            if d in (1, 2):
                pairs12_13.append((start, other))
            elif d == 3:
                pairs14.append((start, other))


def _add_vdw(
    system: Any, mol: Any, props: Any, excluded: list, pairs14: list, periodic: bool, cutoff_nm: float
) -> None:
    """Buffered 14-7 with MMFF's pair parameters tabulated per pair of MMFF atom types."""
    import openmm

    types = [props.GetMMFFAtomType(i) for i in range(mol.GetNumAtoms())]
    representative: dict[int, int] = {}
    for idx, t in enumerate(types):
        representative.setdefault(t, idx)
    order = sorted(representative)
    index = {t: n for n, t in enumerate(order)}
    size = len(order)
    rstar = [0.0] * (size * size)
    eps = [0.0] * (size * size)
    for a, ta in enumerate(order):
        for b, tb in enumerate(order):
            _, _, r_ij, e_ij = props.GetMMFFVdWParams(representative[ta], representative[tb])
            rstar[a + size * b] = r_ij
            eps[a + size * b] = e_ij
    force = openmm.CustomNonbondedForce(
        f"{KCAL_TO_KJ}*e*(1.07*rs/(R + 0.07*rs))^7*(1.12*rs^7/(R^7 + 0.12*rs^7) - 2);"
        "R = 10*r; rs = rstar(t1, t2); e = eps(t1, t2)"
    )
    force.addTabulatedFunction("rstar", openmm.Discrete2DFunction(size, size, rstar))
    force.addTabulatedFunction("eps", openmm.Discrete2DFunction(size, size, eps))
    force.addPerParticleParameter("t")
    for t in types:
        force.addParticle([float(index[t])])
    for i, j in excluded + pairs14:
        force.addExclusion(i, j)
    vdw14 = openmm.CustomBondForce(
        f"{KCAL_TO_KJ}*e*(1.07*rs/(R + 0.07*rs))^7*(1.12*rs^7/(R^7 + 0.12*rs^7) - 2); R = 10*r"
    )
    vdw14.addPerBondParameter("rs")
    vdw14.addPerBondParameter("e")
    for i, j in pairs14:
        k = index[types[i]] + size * index[types[j]]
        vdw14.addBond(i, j, [rstar[k], eps[k]])
    vdw14.setName("MMFFVdW14")
    system.addForce(vdw14)
    if periodic:
        force.setNonbondedMethod(openmm.CustomNonbondedForce.CutoffPeriodic)
        force.setCutoffDistance(cutoff_nm)
        force.setUseSwitchingFunction(True)
        force.setSwitchingDistance(cutoff_nm - 0.1)
        force.setUseLongRangeCorrection(True)
    else:
        force.setNonbondedMethod(openmm.CustomNonbondedForce.NoCutoff)
    force.setName("MMFFVdW")
    system.addForce(force)


def _add_buffered_coulomb(system: Any, charges: list[float], excluded: list, pairs14: list) -> None:
    import openmm

    k = KCAL_TO_KJ * MMFF_COULOMB
    force = openmm.CustomNonbondedForce(f"{k}*q1*q2/(10*r + 0.05)")
    force.addPerParticleParameter("q")
    for q in charges:
        force.addParticle([q])
    for i, j in excluded + pairs14:
        force.addExclusion(i, j)
    force.setNonbondedMethod(openmm.CustomNonbondedForce.NoCutoff)
    force.setName("MMFFElectrostatics")
    system.addForce(force)
    scale14 = openmm.CustomBondForce(f"0.75*{k}*qq/(10*r + 0.05)")
    scale14.addPerBondParameter("qq")
    for i, j in pairs14:
        scale14.addBond(i, j, [charges[i] * charges[j]])
    scale14.setName("MMFFElectrostatics14")
    system.addForce(scale14)


def _add_pme(system: Any, charges: list[float], excluded: list, pairs14: list, cutoff_nm: float) -> None:
    import openmm

    force = openmm.NonbondedForce()
    for q in charges:
        force.addParticle(q, 1.0, 0.0)
    for i, j in excluded:
        force.addException(i, j, 0.0, 1.0, 0.0)
    for i, j in pairs14:
        force.addException(i, j, 0.75 * charges[i] * charges[j], 1.0, 0.0)
    force.setNonbondedMethod(openmm.NonbondedForce.PME)
    force.setCutoffDistance(cutoff_nm)
    force.setUseDispersionCorrection(False)
    force.setName("MMFFElectrostaticsPME")
    system.addForce(force)


def _constrain_waters(system: Any, mol: Any, frags: tuple) -> None:
    """Rigid water: constrain O-H and H-H distances to their starting (MMFF-minimised) values."""
    conf = mol.GetConformer()
    for frag in frags:
        if len(frag) != 3:
            continue
        symbols = sorted(mol.GetAtomWithIdx(i).GetSymbol() for i in frag)
        if symbols != ["H", "H", "O"]:
            continue
        for a in range(3):
            for b in range(a + 1, 3):
                i, j = frag[a], frag[b]
                d = (conf.GetAtomPosition(i) - conf.GetAtomPosition(j)).Length() / 10.0
                system.addConstraint(i, j, d)


def hbond_constraints(system: Any, mol: Any, props: Any) -> int:
    """Constrain every bond to hydrogen at its MMFF rest length (for a 2 fs step); returns how many."""
    constrained = {
        tuple(sorted((system.getConstraintParameters(c)[0], system.getConstraintParameters(c)[1])))
        for c in range(system.getNumConstraints())
    }
    count = 0
    for bond in mol.GetBonds():
        i, j = bond.GetBeginAtomIdx(), bond.GetEndAtomIdx()
        if "H" not in (bond.GetBeginAtom().GetSymbol(), bond.GetEndAtom().GetSymbol()):
            continue
        if tuple(sorted((i, j))) in constrained:
            continue
        _, _, r0 = props.GetMMFFBondStretchParams(mol, i, j)
        system.addConstraint(i, j, r0 / 10.0)
        count += 1
    return count
