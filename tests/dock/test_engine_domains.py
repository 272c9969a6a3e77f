"""The mlip, dock and pka domains load through the spu.tools entry points: engines, checks, codes."""

from __future__ import annotations

from tools_server.core.errors import ERROR_CODES
from tools_server.core.registry import load_registry


def test_engine_domains_register_tools_engines_checks_and_codes():
    registry = load_registry()
    assert {"mlip", "dock", "pka"} <= set(registry.domains)
    assert registry.domain_of["mlip_run"] == "mlip" and registry.domain_of["mlip_conformers"] == "mlip"
    assert registry.domain_of["dock"] == "dock" and registry.domain_of["protein_pka"] == "pka"
    engines = registry.engines()
    assert {"torchani", "aimnet", "mace", "sevenn", "vina", "meeko", "propka", "pdb2pqr"} <= set(engines)
    names = {c.name for c in registry.doctor_checks()}
    assert {"torchani", "aimnet", "mace", "sevenn", "vina", "meeko", "propka", "pdb2pqr"} <= names
    assert {"unsupported_charge", "empty_box", "no_protein", "weights_missing"} <= set(ERROR_CODES)
