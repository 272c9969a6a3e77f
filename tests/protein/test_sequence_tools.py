"""protein_properties against ExPASy ProtParam, sequence_align, mutation notation, antibody numbering."""

from __future__ import annotations

import pytest

from tools_server.core.context import ToolContext
from tools_server.core.errors import ToolError
from tools_server.protein.sequences import apply_mutations, clean_sequence, parse_mutations
from tools_server.protein.tools import (
    AntibodyNumberInput,
    ProteinPropertiesInput,
    SequenceAlignInput,
    antibody_number,
    protein_properties,
    sequence_align,
)

# Human ubiquitin (UniProt P0CG48, residues 1-76) and hen egg-white lysozyme (P00698, mature chain 19-147).
UBIQUITIN = "MQIFVKTLTGKTITLEVEPSDTIENVKAKIQDKEGIPPDQQRLIFAGKQLEDGRTLSDYNIQKESTLHLVLRLRGG"
LYSOZYME = (
    "KVFGRCELAAAMKRHGLDNYRGYSLGNWVCAAKFESNFNTQATNRNTDGSTDYGILQINSRWWCNDGRTPGSRNLCNIPCSALLSSDITASVNCAKKIVSDGNGMNAW"
    "VAWRNRCKGTDVQAWIRGCRL"
)
# Trastuzumab (Herceptin) variable domains, DrugBank DB00072 / IMGT mAb-DB.
TRASTUZUMAB_VH = (
    "EVQLVESGGGLVQPGGSLRLSCAASGFNIKDTYIHWVRQAPGKGLEWVARIYPTNGYTRYADSVKGRFTISADTSKNTAYLQMNSLRAED"
    "TAVYYCSRWGGDGFYAMDYWGQGTLVTVSS"
)
TRASTUZUMAB_VL = (
    "DIQMTQSPSSLSASVGDRVTITCRASQDVNTAVAWYQQKPGKAPKLLIYSASFLYSGVPSRFSGSRSGTDFTLTISSLQPEDFATYYCQQ"
    "HYTTPPTFGQGTKVEIK"
)


def _ctx(spu_env):
    return ToolContext("t", "j")


def test_protparam_matches_expasy(spu_env):
    out = protein_properties(ProteinPropertiesInput(sequences=[UBIQUITIN, LYSOZYME, "MKX1"]), _ctx(spu_env))
    ubq, lyz, bad = out.items
    # ExPASy ProtParam: ubiquitin MW 8564.84 Da, pI 6.56, epsilon280 1490 (one Tyr, no Trp/Cys), GRAVY -0.489.
    # Biopython's average residue masses differ from ExPASy's in the second decimal (0.1 Da here).
    assert ubq.molecular_mass_da == pytest.approx(8564.84, abs=0.2)
    assert ubq.isoelectric_point == pytest.approx(6.56, abs=0.01)
    assert ubq.extinction_coefficient_m1_cm1.model_dump() == {"cys_reduced": 1490, "cystines": 1490}
    assert ubq.gravy == pytest.approx(-0.489, abs=0.001)
    # Aliphatic index (Ikai 1980) by hand: A=2, V=4, I=7, L=9 of 76 -> (2 + 2.9*4 + 3.9*16)/76*100 = 100.00.
    assert ubq.aliphatic_index == pytest.approx(100.00, abs=0.01)
    # ExPASy ProtParam: lysozyme MW 14313.14 Da, pI 9.32, epsilon280 37970 (4 cystines) / 37470 (reduced).
    assert lyz.molecular_mass_da == pytest.approx(14313.14, abs=0.2)
    assert lyz.isoelectric_point == pytest.approx(9.32, abs=0.01)
    assert lyz.extinction_coefficient_m1_cm1.model_dump() == {"cys_reduced": 37470, "cystines": 37970}
    # Lysozyme is basic: positive net charge at pH 7; ubiquitin is near neutral (pI 6.56): slightly negative.
    assert lyz.charge_at_ph > 5 and -2 < ubq.charge_at_ph < 0
    # Instability index (Guruprasad 1990): both are stable proteins (< 40).
    assert ubq.instability_index < 40 and lyz.instability_index < 40
    assert bad.ok is False and bad.error.code == "invalid_sequence"


def test_instability_index_definition():
    from Bio.SeqUtils.ProtParam import ProteinAnalysis

    # II = 10/L * sum DIWV(x_i, x_i+1); DIWV(W, W) = 1.0 in Guruprasad's table, so "WW" scores 10/2*1.0 = 5.0.
    assert ProteinAnalysis("WW").instability_index() == pytest.approx(5.0)


def test_alignment_lists_substitutions_and_indels(spu_env):
    mutant = UBIQUITIN[:22] + "V" + UBIQUITIN[23:44] + "D" + UBIQUITIN[45:]
    out = sequence_align(SequenceAlignInput(reference=UBIQUITIN, query=mutant), _ctx(spu_env))
    assert out.substitutions == [f"{UBIQUITIN[22]}23V", f"{UBIQUITIN[44]}45D"]
    assert out.variant == f"{UBIQUITIN[22]}23V:{UBIQUITIN[44]}45D"
    assert out.identical == 74 and out.identity == pytest.approx(74 / 76, abs=1e-4)
    deleted = UBIQUITIN[:30] + UBIQUITIN[33:]
    out = sequence_align(SequenceAlignInput(reference=UBIQUITIN, query=deleted), _ctx(spu_env))
    assert len(out.deletions) == 3 and out.substitutions == []
    assert out.identity_over_reference == pytest.approx(73 / 76, abs=1e-4)


def test_mutation_notation():
    wt = "MKTAYIAK"
    muts = parse_mutations("A4V:K2R", wt)
    assert [str(m) for m in muts] == ["K2R", "A4V"]
    assert apply_mutations(wt, muts) == "MRTVYIAK"
    assert parse_mutations("WT", wt) == []
    for bad, needle in [
        ("A5V", "has Y at position 5"),
        ("A40V", "outside"),
        ("AV", "not a point mutation"),
        ("A4V:A4G", "twice"),
        ("A4B", "standard"),
    ]:
        with pytest.raises(ToolError) as err:
            parse_mutations(bad, wt)
        assert err.value.code == "invalid_mutation" and needle in err.value.message
    with pytest.raises(ToolError) as err:
        clean_sequence("MKT AY*")  # whitespace and a final stop are fine
        clean_sequence("MK-TAY")
    assert err.value.code == "invalid_sequence" and "'-' at 3" in err.value.message


@pytest.mark.parametrize("engine", ["anarcii", "anarci"])
def test_antibody_numbering_trastuzumab_imgt(spu_env, engine):
    # ANARCI used to fail here (and this test skipped): HMMER run through the hmmer wheel's launcher names
    # itself tmpXXXX_hmmscan in its output, and Biopython then parsed no domain coordinates.
    pytest.importorskip(engine)
    out = antibody_number(
        AntibodyNumberInput(sequences=[TRASTUZUMAB_VH, TRASTUZUMAB_VL, "MKT"], engine=engine), _ctx(spu_env)
    )
    vh, vl, bad = out.items
    h = vh.domains[0]
    assert h.chain_type == "H" and vl.domains[0].chain_type == "K"
    # IMGT CDRs of trastuzumab (IMGT/mAb-DB): CDR-H1 GFNIKDTY, CDR-H2 IYPTNGYT, CDR-H3 SRWGGDGFYAMDY;
    # CDR-L1 QDVNTA, CDR-L2 SAS, CDR-L3 QQHYTTPPT.
    assert h.regions["CDR1"].sequence == "GFNIKDTY"
    assert h.regions["CDR2"].sequence == "IYPTNGYT"
    assert h.regions["CDR3"].sequence == "SRWGGDGFYAMDY"
    light = vl.domains[0].regions
    assert (light["CDR1"].sequence, light["CDR2"].sequence, light["CDR3"].sequence) == (
        "QDVNTA",
        "SAS",
        "QQHYTTPPT",
    )
    assert bad.ok is False and bad.error.code in ("invalid_sequence", "too_large")


def test_antibody_numbering_trastuzumab_kabat(spu_env):
    out = antibody_number(
        AntibodyNumberInput(sequences=[TRASTUZUMAB_VH, TRASTUZUMAB_VL], scheme="kabat", engine="anarcii"),
        _ctx(spu_env),
    )
    heavy = out.items[0].domains[0].regions
    light = out.items[1].domains[0].regions
    # Kabat CDRs of trastuzumab (Carter et al., PNAS 1992, humanised 4D5; Kabat numbering):
    # H1 DTYIH, H2 RIYPTNGYTRYADSVKG, H3 WGGDGFYAMDY; L1 RASQDVNTAVA, L2 SASFLYS, L3 QQHYTTPPT.
    assert [heavy[c].sequence for c in ("CDR1", "CDR2", "CDR3")] == [
        "DTYIH",
        "RIYPTNGYTRYADSVKG",
        "WGGDGFYAMDY",
    ]
    assert [light[c].sequence for c in ("CDR1", "CDR2", "CDR3")] == ["RASQDVNTAVA", "SASFLYS", "QQHYTTPPT"]
    assert out.scheme == "kabat" and heavy["CDR1"].from_ == "H31"


def test_antibody_numbering_reports_engine_problems_clearly(spu_env, monkeypatch):
    from tools_server.protein import numbering

    class BrokenAnarci:
        @staticmethod
        def anarci(*a, **k):
            raise FileNotFoundError("hmmscan")

    with pytest.raises(ToolError) as err:
        numbering.number_sequences(BrokenAnarci, [TRASTUZUMAB_VH], "imgt")
    assert err.value.code == "engine_unavailable" and "hmmscan" in err.value.hint
