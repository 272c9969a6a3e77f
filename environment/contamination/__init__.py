"""Contamination audits for benchmarks built from published values.

- ``digits``, ``null``, ``audit``: the digit-level retention audit (nested matches at 1, 2 and 3
  significant figures, retentions R12 and R23 against a molecule-blind null, binomial tests, BH).
- ``blinding``: the six blinding levels (label transform, property-name masking, SMILES substitution).
- ``simulate``: planted-retrieval cells for checking an audit's power and false discovery rate.
- ``cli``: ``spu contamination audit`` and ``spu contamination blind``.
"""
