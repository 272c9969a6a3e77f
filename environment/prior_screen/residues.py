"""Properties of one amino-acid residue, for the screen's per-site entries of sequence variants.

* volume: the residue volume in Å³ in proteins, Zamyatnin AA, Prog Biophys Mol Biol 24:107-123 (1972),
  Table 3 (no installed package carries this table);
* hydrophobicity: Kyte & Doolittle, J Mol Biol 157:105-132 (1982), as Biopython ships it;
* side-chain charge at pH 7 from Biopython's pKa values (``IsoelectricPoint``: K, R, H positive; D, E,
  C, Y negative), by the Henderson-Hasselbalch fraction;
* substitution score: BLOSUM62 (Biopython) between the site's reference residue and this one (the
  reference against itself scores its diagonal entry): the wild type a substitution list names, or for
  bare sequences the residue most common at the site.
"""

from __future__ import annotations

import functools

#: Residue volumes in Å³ (Zamyatnin 1972).
VOLUME_A3 = {
    "A": 88.6,
    "R": 173.4,
    "N": 114.1,
    "D": 111.1,
    "C": 108.5,
    "Q": 143.8,
    "E": 138.4,
    "G": 60.1,
    "H": 153.2,
    "I": 166.7,
    "L": 166.7,
    "K": 168.6,
    "M": 162.9,
    "F": 189.9,
    "P": 112.7,
    "S": 89.0,
    "T": 116.1,
    "W": 227.8,
    "Y": 193.6,
    "V": 140.0,
}
PROPERTIES = {
    "volume": "residue volume",
    "hydrophobicity": "hydrophobicity (Kyte-Doolittle)",
    "charge": "side-chain charge at pH 7",
    "blosum62": "BLOSUM62 score",
}
PH = 7.0


def side_chain_charge(residue: str, ph: float = PH) -> float:
    """Mean charge of the residue's side chain at ``ph`` from Biopython's pKa values (0 if it has none)."""
    from Bio.SeqUtils.IsoelectricPoint import negative_pKs, positive_pKs

    if residue in positive_pKs:
        return 1.0 / (1.0 + 10.0 ** (ph - positive_pKs[residue]))
    if residue in negative_pKs:
        return -1.0 / (1.0 + 10.0 ** (negative_pKs[residue] - ph))
    return 0.0


@functools.cache
def _blosum62():
    from Bio.Align import substitution_matrices

    return substitution_matrices.load("BLOSUM62")


def value(key: str, residue: str, reference: str) -> float | None:
    """Property ``key`` (one of ``PROPERTIES``) of ``residue`` at a site whose reference residue is
    ``reference``; None for a letter that is not one of the 20 amino acids."""
    if residue not in VOLUME_A3 or reference not in VOLUME_A3:
        return None
    if key == "volume":
        return VOLUME_A3[residue]
    if key == "hydrophobicity":
        from Bio.SeqUtils.ProtParamData import kd

        return float(kd[residue])
    if key == "charge":
        return float(f"{side_chain_charge(residue):.10g}")
    if key == "blosum62":
        return float(_blosum62()[reference][residue])
    raise KeyError(key)
