"""Tool categories for the run timeline: one small table, kept here so the viewer needs no other part.

A tool not in the table falls into a category by its name's prefix, then into ``other``. The colours
are chosen to stay apart for readers with the common forms of colour blindness (Okabe-Ito palette).
"""

from __future__ import annotations

#: category -> (label shown in the page, colour)
CATEGORIES: dict[str, tuple[str, str]] = {
    "literature": ("literature / web", "#0072B2"),
    "database": ("database lookup", "#56B4E9"),
    "chemistry": ("chemistry", "#009E73"),
    "quantum": ("quantum chemistry", "#E69F00"),
    "md": ("molecular dynamics", "#D55E00"),
    "protein": ("protein", "#CC79A7"),
    "ranking": ("ranking", "#F0E442"),
    "code": ("code", "#555555"),
    "files": ("files", "#999999"),
    "submission": ("drafting / submission", "#000000"),
    "jobs": ("jobs and system", "#BBBBBB"),
    "other": ("other", "#DDDDDD"),
}

#: tool name -> category, for the tools of ``spu serve`` and the reference agent's built-in tools
TOOL_CATEGORY: dict[str, str] = {
    "web_search": "literature",
    "web_fetch": "literature",
    "literature_search": "literature",
    "pubchem_lookup": "database",
    "uniprot_lookup": "database",
    "pdb_lookup": "database",
    "chem_parse": "chemistry",
    "chem_descriptors": "chemistry",
    "chem_conformers": "chemistry",
    "chem_similarity": "chemistry",
    "chem_substructure": "chemistry",
    "chem_depict": "chemistry",
    "xtb_run": "quantum",
    "xtb_conformers": "quantum",
    "dft_run": "quantum",
    "md_run": "md",
    "md_analyze": "md",
    "protein_properties": "protein",
    "protein_embed": "protein",
    "protein_fold": "protein",
    "protein_variant_scores": "protein",
    "sequence_align": "protein",
    "antibody_number": "protein",
    "ranking_check": "ranking",
    "ranking_compare": "ranking",
    "ranking_aggregate": "ranking",
    "bash": "code",
    "python": "code",
    "read_file": "files",
    "write_file": "files",
    "submit_rankings": "submission",
    "system_info": "jobs",
    "jobs": "jobs",
    "job_wait": "jobs",
    "job_cancel": "jobs",
}

#: name prefix -> category, for tools added later or by plugins
PREFIX_CATEGORY: tuple[tuple[str, str], ...] = (
    ("web_", "literature"),
    ("literature_", "literature"),
    ("chem_", "chemistry"),
    ("xtb_", "quantum"),
    ("dft_", "quantum"),
    ("qc_", "quantum"),
    ("md_", "md"),
    ("protein_", "protein"),
    ("ranking_", "ranking"),
    ("job", "jobs"),
)


def category_of(tool: str) -> str:
    """The timeline category of a tool name (``other`` when nothing matches)."""
    if tool in TOOL_CATEGORY:
        return TOOL_CATEGORY[tool]
    if tool.endswith("_lookup"):
        return "database"
    for prefix, category in PREFIX_CATEGORY:
        if tool.startswith(prefix):
            return category
    return "other"
