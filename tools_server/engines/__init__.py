"""The procedure layer every energy model shares: calculators (:mod:`.calculator`), geometry optimisation
(:mod:`.optimize`), harmonic frequencies and thermochemistry (:mod:`.thermo`), the one-molecule task
(:mod:`.task`: single point, optimise, frequencies) and the conformer search (:mod:`.conformers`); and
proteins repaired and parameterised for OpenMM (:mod:`.protein_system`), which molecular dynamics and
docking share. Domains share code only through this layer, ``tools_server.molecules`` and the plugin facade.

xTB and DFT (``tools_server.qc``) and the ML potentials (``tools_server.mlip``) provide calculators and
register their factories; the procedures here never name an engine. Units: :mod:`.units`.
"""
