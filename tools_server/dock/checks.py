"""``spu doctor`` checks for AutoDock Vina and Meeko: a tiny real computation each, against a known value."""

from __future__ import annotations

from tools_server.plugin import DoctorCheck

CHECKS: tuple[DoctorCheck, ...] = (
    DoctorCheck(
        name="vina",
        what="AutoDock Vina (docking)",
        # One receptor carbon at the origin, one ligand carbon 4 Å away: surface distance 0.2 Å, so
        # gauss1 0.852, gauss2 0.141, hydrophobic 1, repulsion 0; with Vina's weights -0.066 kcal/mol.
        code="""
import os, tempfile, importlib.metadata as md
from vina import Vina
work = tempfile.mkdtemp()
rec = os.path.join(work, "r.pdbqt")
with open(rec, "w") as fh:
    fh.write("ATOM      1  C   GLY A   1       0.000   0.000   0.000  1.00  0.00     0.000 C \\n")
atom = "ATOM      1  C   UNL     1       4.000   0.000   0.000  1.00  0.00     0.000 C "
lig = "ROOT\\n" + atom + "\\nENDROOT\\nTORSDOF 0\\n"
v = Vina(sf_name="vina", cpu=1, seed=1, verbosity=0)
v.set_receptor(rec)
v.set_ligand_from_string(lig)
v.compute_vina_maps(center=[2, 0, 0], box_size=[12, 12, 12])
e = float(v.score()[0])
assert abs(e - -0.066) < 0.002, f"C...C at 4 Å scores {e:.3f} kcal/mol, expected -0.066"
report(version=md.version("vina"), detail=f"C...C at 4 Å: Vina score {e:.3f} kcal/mol")
""",
        fix="pip install 'spu-scaffold[dock]' (vina)",
    ),
    DoctorCheck(
        name="meeko",
        what="Meeko (ligand and receptor PDBQT)",
        code="""
import importlib.metadata as md
from rdkit import Chem
from rdkit.Chem import AllChem
from meeko import MoleculePreparation, PDBQTWriterLegacy
mol = Chem.AddHs(Chem.MolFromSmiles("CCO"))
AllChem.EmbedMolecule(mol, randomSeed=1)
pdbqt, ok, err = PDBQTWriterLegacy.write_string(MoleculePreparation().prepare(mol)[0])
assert ok, err
atoms = [line for line in pdbqt.splitlines() if line.startswith(("ATOM", "HETATM"))]
assert len(atoms) == 4, f"ethanol PDBQT has {len(atoms)} atoms, expected 4 (3 heavy and the OH hydrogen)"
report(version=md.version("meeko"), detail="ethanol PDBQT: 3 heavy atoms and the polar H")
""",
        fix="pip install 'spu-scaffold[dock]' (meeko)",
    ),
)
