"""Protein electrostatics: PROPKA pKa values and PDB2PQR protonation states."""
