"""The procedure layer every energy model shares: calculators (:mod:`.calculator`), geometry optimisation
(:mod:`.optimize`), harmonic frequencies and thermochemistry (:mod:`.thermo`), the one-molecule task
(:mod:`.task`: single point, optimise, frequencies) and the conformer search (:mod:`.conformers`).

xTB and DFT (``tools_server.qc``) and the ML potentials (``tools_server.mlip``) provide calculators and
register their factories; the procedures here never name an engine. Units: :mod:`.units`.
"""
