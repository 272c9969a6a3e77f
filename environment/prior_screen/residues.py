"""Published property scales of the 20 amino acids, for the screen's per-site and per-substitution entries.

* volume: the residue volume in Å³ in proteins, Zamyatnin AA, Prog Biophys Mol Biol 24:107-123 (1972),
  Table 3 (no installed package carries this table);
* side-chain charge at pH 7 from Biopython's pKa values (``IsoelectricPoint``: K, R, H positive; D, E,
  C, Y negative), by the Henderson-Hasselbalch fraction;
* the 32 one-residue scales Biopython ships in ``Bio.SeqUtils.ProtParamData`` (``SCALES``, each with the
  citation Biopython gives): its 28 hydrophobicity scales (``gravy_scales``), flexibility, Hopp-Woods
  hydrophilicity, Emini surface accessibility and Janin interior-to-surface transfer energy;
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
#: Biopython's scales: key in ``gravy_scales`` (or the module attribute) -> (label, citation).
SCALES = {
    "KyteDoolitle": ("hydrophobicity (Kyte-Doolittle)", "Kyte & Doolittle, J Mol Biol 157:105-132 (1982)"),
    "Aboderin": ("hydrophobicity (Aboderin)", "Aboderin, Int J Biochem 2:537-544 (1971)"),
    "AbrahamLeo": ("hydrophobicity (Abraham-Leo)", "Abraham & Leo, Proteins 2:130-152 (1987)"),
    "Argos": ("hydrophobicity (Argos)", "Argos et al., Eur J Biochem 128:565-575 (1982)"),
    "BlackMould": ("hydrophobicity (Black-Mould)", "Black & Mould, Anal Biochem 193:72-82 (1991)"),
    "BullBreese": ("hydrophobicity (Bull-Breese)", "Bull & Breese, Arch Biochem Biophys 161:665-670 (1974)"),
    "Casari": ("hydrophobic potential (Casari-Sippl)", "Casari & Sippl, J Mol Biol 224:725-732 (1992)"),
    "Cid": ("hydrophobicity (Cid)", "Cid et al., Protein Eng 5:373-375 (1992)"),
    "Cowan3.4": ("hydrophobicity at pH 3.4 (Cowan)", "Cowan & Whittaker, Pept Res 3:75-80 (1990)"),
    "Cowan7.5": ("hydrophobicity at pH 7.5 (Cowan)", "Cowan & Whittaker, Pept Res 3:75-80 (1990)"),
    "Eisenberg": ("hydrophobicity (Eisenberg consensus)", "Eisenberg et al., J Mol Biol 179:125-142 (1984)"),
    "Engelman": ("transfer free energy (Engelman GES)", "Engelman et al., Annu Rev Biophys 15:321 (1986)"),
    "Fasman": ("hydrophobicity (Fasman)", "Fasman, Prediction of Protein Structure, Springer (1989)"),
    "Fauchere": ("hydrophobicity (Fauchere-Pliska)", "Fauchere & Pliska, Eur J Med Chem 18:369 (1983)"),
    "GoldSack": ("mixing free energy (Goldsack-Chalifoux)", "Goldsack & Chalifoux, J Theor Biol 39:645"),
    "Guy": ("transfer free energy (Guy)", "Guy, Biophys J 47:61-70 (1985)"),
    "Jones": ("hydrophobicity (Jones)", "Jones, J Theor Biol 50:167-183 (1975)"),
    "Juretic": ("hydrophobicity (Juretic)", "Juretic et al., Theor Comput Chem 5:405-445 (1998)"),
    "Kidera": ("hydrophobicity factor (Kidera)", "Kidera et al., J Protein Chem 4:23-55 (1985)"),
    "Miyazawa": ("contact energy (Miyazawa-Jernigan)", "Miyazawa & Jernigan, Macromolecules 18:534 (1985)"),
    "Parker": ("hydrophilicity (Parker)", "Parker et al., Biochemistry 25:5425-5431 (1986)"),
    "Ponnuswamy": ("hydrophobicity (Ponnuswamy)", "Ponnuswamy, Prog Biophys Mol Biol 59:57-103 (1993)"),
    "Rose": ("buried fraction (Rose)", "Rose et al., Science 229:834-838 (1985)"),
    "Roseman": ("hydrophobicity (Roseman)", "Roseman, J Mol Biol 200:513-522 (1988)"),
    "Sweet": ("optimal matching hydrophobicity (Sweet)", "Sweet & Eisenberg, J Mol Biol 171:479-488 (1983)"),
    "Tanford": ("hydrophobicity (Tanford)", "Tanford, J Am Chem Soc 84:4240-4274 (1962)"),
    "Wilson": ("hydrophobicity (Wilson HPLC)", "Wilson et al., Biochem J 199:31-41 (1981)"),
    "Zimmerman": ("hydrophobicity (Zimmerman)", "Zimmerman et al., J Theor Biol 21:170-201 (1968)"),
    "Flex": ("flexibility (Vihinen)", "Vihinen et al., Proteins 19:141-149 (1994)"),
    "hw": ("hydrophilicity (Hopp-Woods)", "Hopp & Woods, PNAS 78:3824-3828 (1981)"),
    "em": ("surface accessibility (Emini)", "Emini et al., J Virol 55:836-839 (1985)"),
    "ja": ("interior-to-surface transfer energy (Janin)", "Janin, Nature 277:491-492 (1979)"),
}
#: Every property of one residue: key -> label (``blosum62`` needs the site's reference residue).
PROPERTIES = {
    "volume": "residue volume",
    **{key: label for key, (label, _) in SCALES.items()},
    "charge": "side-chain charge at pH 7",
    "blosum62": "BLOSUM62 score",
}
PH = 7.0
AMINO_ACIDS = frozenset(VOLUME_A3)


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


@functools.cache
def scale(key: str) -> dict[str, float]:
    """One of Biopython's ``SCALES`` as ``{residue: value}``."""
    from Bio.SeqUtils import ProtParamData

    table = ProtParamData.gravy_scales.get(key) or getattr(ProtParamData, key)
    return {residue: float(table[residue]) for residue in AMINO_ACIDS}


def value(key: str, residue: str, reference: str) -> float | None:
    """Property ``key`` (one of ``PROPERTIES``) of ``residue`` at a site whose reference residue is
    ``reference``; None for a letter that is not one of the 20 amino acids."""
    if residue not in AMINO_ACIDS or reference not in AMINO_ACIDS:
        return None
    if key == "volume":
        return VOLUME_A3[residue]
    if key == "charge":
        return float(f"{side_chain_charge(residue):.10g}")
    if key == "blosum62":
        return float(_blosum62()[reference][residue])
    if key in SCALES:
        return scale(key)[residue]
    raise KeyError(key)
