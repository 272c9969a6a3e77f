"""Protein tools: sequence properties, alignment, antibody numbering, ESM language models, ESMFold."""
