"""Protein tools: sequence properties, alignment, antibody numbering, ESM language models, ESMFold."""

from tools_server.plugin import Domain, Engine
from tools_server.protein.checks import CHECKS

DOMAIN = Domain(
    name="protein",
    tool_modules=("tools_server.protein.tools",),
    engines=(
        Engine("torch", "torch"),
        Engine("esm", "fair-esm"),
        Engine("transformers", "transformers"),
        Engine("Bio", "biopython"),
        Engine("anarcii", "anarcii"),
    ),
    doctor_checks=CHECKS,
    error_codes={
        "invalid_sequence": "Use the 20 standard one-letter amino-acid codes, without gaps or spaces.",
        "invalid_mutation": "Write mutations as <wild-type residue><1-based position><new residue>, e.g. "
        "A23V, and check the wild-type residue at that position.",
    },
)
