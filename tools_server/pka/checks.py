"""``spu doctor`` checks for PROPKA and PDB2PQR: a tiny real computation each, compared with a known value."""

from __future__ import annotations

from tools_server.plugin import DoctorCheck

#: Writes Asp 29 of chain A of PDB entry 1HPX, alone, to ``path``: nothing shifts its pKa, so PROPKA must
#: return its model values (Asp 3.80, N-terminus 8.00).
_WRITE_ASP = """
import os, tempfile
ASP = [("N", 8.553, -4.583, 21.348), ("CA", 9.180, -5.276, 22.474), ("C", 10.682, -5.257, 22.425),
       ("O", 11.331, -5.405, 23.455), ("CB", 8.757, -6.745, 22.550), ("CG", 7.263, -7.010, 22.667),
       ("OD1", 6.511, -6.187, 23.206), ("OD2", 6.850, -8.086, 22.223)]
work = tempfile.mkdtemp()
path = os.path.join(work, "asp.pdb")
with open(path, "w") as fh:
    for i, (name, x, y, z) in enumerate(ASP, start=1):
        xyz = f"{x:8.3f}{y:8.3f}{z:8.3f}"
        fh.write(f"ATOM  {i:5d}  {name:<3s} ASP A  29    {xyz}  1.00  0.00           {name[0]}\\n")
    fh.write("END\\n")
os.chdir(work)
"""

CHECKS: tuple[DoctorCheck, ...] = (
    DoctorCheck(
        name="propka",
        what="PROPKA 3 (protein pKa values)",
        code=_WRITE_ASP
        + """
import contextlib, io, importlib.metadata as md
import propka.run
with contextlib.redirect_stdout(io.StringIO()):
    mol = propka.run.single(path, optargs=["--quiet"], write_pka=False)
pkas = {g.residue_type: round(float(g.pka_value), 2) for g in mol.conformations["AVR"].groups}
assert abs(pkas.get("ASP", 0) - 3.80) < 0.01, f"lone Asp pKa {pkas.get('ASP')}, expected 3.80"
assert abs(pkas.get("N+", 0) - 8.00) < 0.01, f"N-terminus pKa {pkas.get('N+')}, expected 8.00"
report(version=md.version("propka"), detail="lone Asp: pKa 3.80, N-terminus 8.00 (the model values)")
""",
        fix="pip install 'spu-scaffold[pka]' (propka)",
    ),
    DoctorCheck(
        name="pdb2pqr",
        what="PDB2PQR (protonation states, PQR files)",
        code=_WRITE_ASP
        + """
import contextlib, io, importlib.metadata as md
from pdb2pqr.main import build_main_parser, main_driver
out = os.path.join(work, "asp.pqr")
args = build_main_parser().parse_args(["--ff=AMBER", "--titration-state-method=propka", "--with-ph=7.0",
                                       "--log-level=ERROR", path, out])
with contextlib.redirect_stdout(io.StringIO()):
    main_driver(args)
atoms = [line for line in open(out) if line.startswith("ATOM")]
q = sum(float(line.split()[-2]) for line in atoms)
assert len(atoms) == 14 and abs(q) < 1e-3, f"{len(atoms)} atoms, charge {q:.3f} e; expected 14 and 0"
report(version=md.version("pdb2pqr"), detail=f"lone Asp at pH 7: {len(atoms)} atoms, total charge {q:+.2f} e")
""",
        fix="pip install 'spu-scaffold[pka]' (pdb2pqr)",
    ),
)
