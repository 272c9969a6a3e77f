"""Docking: AutoDock Vina with Meeko ligand and receptor preparation, PDBFixer receptor cleaning."""
