"""Molecular dynamics with OpenMM: proteins (amber14) and small-molecule liquids (MMFF94)."""
