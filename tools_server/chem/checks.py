"""The ``spu doctor`` checks of this domain: a tiny real computation per engine, compared with a known value.

RDKit parses benzoic acid (9 heavy atoms).
"""

from tools_server.plugin import DoctorCheck

CHECKS: tuple[DoctorCheck, ...] = (
    DoctorCheck(
        "rdkit",
        "RDKit (cheminformatics)",
        """
            from rdkit import Chem, rdBase
            mol = Chem.MolFromSmiles("OC(=O)c1ccccc1")
            n = mol.GetNumAtoms()
            assert n == 9, f"benzoic acid parsed with {n} heavy atoms, expected 9"
            report(version=rdBase.rdkitVersion, detail="benzoic acid: 9 heavy atoms")
            """,
        "pip install 'rdkit>=2024.3'",
        profile="core",
    ),
)
