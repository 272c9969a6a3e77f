"""Machine-learned interatomic potentials (ANI-2x, AIMNet2, MACE-OFF, SevenNet) through ASE."""
