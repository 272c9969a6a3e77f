"""The screen's composition family: statistics of tabulated elemental properties over a formula.

A formula (``Ti0.5Zr0.5Nb1``, ``Li1.2Sc0.2Ti1.8(PO4)3``, a lone element symbol) gives, with ``cᵢ`` the
atomic fractions of its elements:

* **per element** its atomic fraction and its amount in the formula as written (an element absent from
  a formula: 0);
* the alloy descriptors the screen had before: valence-electron concentration (mendeleev's ``nvalence``),
  mean Slater radius and its mismatch ``sqrt(Σ cᵢ (1 - rᵢ/r̄)²)``, mean Pauling electronegativity and its
  mismatch ``sqrt(Σ cᵢ (χᵢ - χ̄)²)``;
* the number of elements and the ideal configurational entropy ``-Σ cᵢ ln cᵢ`` (in units of R);
* for every property of ``ELEMENT_PROPERTIES`` (mendeleev's tables), five statistics over the formula's
  elements: the fraction-weighted mean ``Σ cᵢ pᵢ``, the minimum, the maximum, the range (maximum less
  minimum) and the fraction-weighted spread ``sqrt(Σ cᵢ (pᵢ - p̄)²)``, as Magpie computes them (Ward et al.,
  npj Comput Mater 2:16028, 2016).

A property mendeleev lacks for one of a formula's elements leaves that formula without its five
statistics (None), so the group holding it is left out of those entries.
"""

from __future__ import annotations

import functools
import math
import re
from typing import Any

#: The readable alloy entries: key -> label.
COMPOSITION_DESCRIPTORS = {
    "vec": "valence-electron concentration",
    "radius_mean": "mean atomic radius",
    "radius_mismatch": "atomic-radius mismatch",
    "electronegativity_mean": "mean electronegativity",
    "electronegativity_mismatch": "electronegativity mismatch",
    "elements": "number of elements",
    "mixing_entropy": "configurational entropy (R)",
}
#: Tabulated properties of an element: key -> label with unit. Columns of mendeleev's ``elements`` table,
#: except ``ionization_energy`` (the neutral atom's row of its ``ionizationenergies`` table),
#: ``melting_point`` and ``boiling_point`` (its ``phasetransitions`` table, the row without an allotrope,
#: else the element's first row) and ``valence_electrons`` (``nvalence``).
ELEMENT_PROPERTIES = {
    "atomic_number": "atomic number",
    "atomic_weight": "atomic weight (u)",
    "period": "period",
    "group_id": "group",
    "mendeleev_number": "Mendeleev number",
    "pettifor_number": "Pettifor number",
    "valence_electrons": "valence electrons",
    "atomic_radius": "atomic radius, Slater (pm)",
    "atomic_radius_rahm": "atomic radius, Rahm (pm)",
    "covalent_radius_pyykko": "covalent radius, Pyykko (pm)",
    "covalent_radius_cordero": "covalent radius, Cordero (pm)",
    "vdw_radius": "van der Waals radius (pm)",
    "metallic_radius": "metallic radius (pm)",
    "en_pauling": "Pauling electronegativity",
    "en_allen": "Allen electronegativity",
    "en_ghosh": "Ghosh electronegativity",
    "en_miedema": "Miedema electronegativity (V)",
    "miedema_electron_density": "Miedema electron density (d.u.)",
    "miedema_molar_volume": "Miedema molar volume (cm3/mol)",
    "electron_affinity": "electron affinity (eV)",
    "ionization_energy": "first ionization energy (eV)",
    "dipole_polarizability": "dipole polarizability (bohr3)",
    "density": "density (g/cm3)",
    "lattice_constant": "lattice constant (angstrom)",
    "melting_point": "melting point (K)",
    "boiling_point": "boiling point (K)",
    "fusion_heat": "heat of fusion (kJ/mol)",
    "evaporation_heat": "heat of evaporation (kJ/mol)",
    "heat_of_formation": "heat of formation (kJ/mol)",
    "specific_heat_capacity": "specific heat capacity (J/(g K))",
    "molar_heat_capacity": "molar heat capacity (J/(mol K))",
    "thermal_conductivity": "thermal conductivity (W/(m K))",
}
STATISTICS = {"mean": "mean", "min": "minimum", "max": "maximum", "range": "range", "spread": "spread"}

_FORMULA_TOKEN = re.compile(r"([A-Z][a-z]?)(\d*\.?\d*)|(\()|(\))(\d*\.?\d*)")


def parse_formula(text: str) -> dict[str, float] | None:
    """Atom counts of a formula (``Li1.2Sc0.2Ti1.8(PO4)3`` -> Li 1.2, Sc 0.2, Ti 1.8, P 3, O 12), or None."""
    text = text.replace(" ", "")
    if not text or (not text[0].isupper() and text[0] != "("):
        return None
    stack: list[dict[str, float]] = [{}]
    pos = 0
    for match in _FORMULA_TOKEN.finditer(text):
        if match.start() != pos:
            return None
        pos = match.end()
        element, amount, opening, closing, multiplier = match.groups()
        if element:
            stack[-1][element] = stack[-1].get(element, 0.0) + (float(amount) if amount else 1.0)
        elif opening:
            stack.append({})
        elif closing:
            if len(stack) < 2:
                return None
            inner = stack.pop()
            factor = float(multiplier) if multiplier else 1.0
            for el, n in inner.items():
                stack[-1][el] = stack[-1].get(el, 0.0) + n * factor
    if pos != len(text) or len(stack) != 1 or not stack[0] or any(v <= 0 for v in stack[0].values()):
        return None
    if not all(symbol in element_table() for symbol in stack[0]):
        return None  # "V39G" is a substitution, not vanadium and a "G"
    return stack[0]


def _known(x: Any) -> float | None:
    return None if x is None or x != x else float(x)  # NaN marks a missing value


@functools.cache
def element_table() -> dict[str, dict[str, float | None]]:
    """Per element symbol: the ``ELEMENT_PROPERTIES`` values but ``valence_electrons`` (None where mendeleev
    has none)."""
    from mendeleev.fetch import fetch_table

    elements = fetch_table("elements")
    ionization = fetch_table("ionizationenergies")
    first = {
        int(r.atomic_number): _known(r.ionization_energy)
        for r in ionization[ionization["ion_charge"] == 0].itertuples()
    }
    phases: dict[int, Any] = {}
    for row in fetch_table("phasetransitions").sort_values("id").itertuples():
        number = int(row.atomic_number)
        if number not in phases or (_plain(row) and not _plain(phases[number])):
            phases[number] = row
    table: dict[str, dict[str, float | None]] = {}
    for row in elements.itertuples():
        number = int(row.atomic_number)
        values = {key: _known(getattr(row, key)) for key in ELEMENT_PROPERTIES if hasattr(row, key)}
        values["ionization_energy"] = first.get(number)
        phase = phases.get(number)
        values["melting_point"] = _known(phase.melting_point) if phase is not None else None
        values["boiling_point"] = _known(phase.boiling_point) if phase is not None else None
        table[row.symbol] = values
    return table


def _plain(row: Any) -> bool:
    """Whether a phase-transition row names no allotrope."""
    return row.allotrope is None or row.allotrope != row.allotrope


def element_property(symbol: str, key: str) -> float | None:
    """One ``ELEMENT_PROPERTIES`` value of an element (None where mendeleev has none)."""
    if key == "valence_electrons":
        return valence_electrons(symbol)
    return element_table()[symbol][key]


@functools.cache
def valence_electrons(symbol: str) -> float:
    """Valence electrons as VEC counts them: mendeleev's ``nvalence`` (s + d electrons in the d block).

    For groups 1-18 that is the group number, less 10 in the p block; only f-block elements (no group)
    ask mendeleev's slower per-element lookup (half a second each).
    """
    group = element_table()[symbol]["group_id"]
    if group is not None and symbol != "He":  # helium sits in group 18 with two electrons
        return group - 10 if group > 12 else group
    from mendeleev import element

    return float(element(symbol).nvalence())


def composition_descriptors(formula: str) -> dict[str, float | None] | None:
    """The composition panel for one formula (module docstring), or None when it does not parse.

    Keys: ``fraction_<El>`` and ``amount_<El>`` per element, the ``COMPOSITION_DESCRIPTORS`` keys, and
    ``<statistic>:<property>`` for each of ``STATISTICS`` and ``ELEMENT_PROPERTIES``. A fresh dict each call.
    """
    found = _composition(formula)
    return None if found is None else dict(found)


@functools.lru_cache(maxsize=8192)
def _composition(formula: str) -> tuple[tuple[str, float | None], ...] | None:
    counts = parse_formula(formula)
    if counts is None:
        return None
    table = element_table()
    total = sum(counts.values())
    frac = {el: n / total for el, n in counts.items()}
    out: dict[str, float | None] = {f"fraction_{el}": c for el, c in frac.items()}
    out |= {f"amount_{el}": n for el, n in counts.items()}
    out["vec"] = sum(c * valence_electrons(el) for el, c in frac.items())
    radius = _statistics(frac, {el: table[el]["atomic_radius"] for el in frac})
    if radius is not None:
        mean = radius["mean"]
        out["radius_mean"] = mean
        out["radius_mismatch"] = math.sqrt(
            sum(c * (1 - table[el]["atomic_radius"] / mean) ** 2 for el, c in frac.items())  # type: ignore[operator]
        )
    chi = _statistics(frac, {el: table[el]["en_pauling"] for el in frac})
    if chi is not None:
        out["electronegativity_mean"] = chi["mean"]
        out["electronegativity_mismatch"] = chi["spread"]
    out["elements"] = float(len(frac))
    out["mixing_entropy"] = -sum(c * math.log(c) for c in frac.values())
    for key in ELEMENT_PROPERTIES:
        stats = _statistics(frac, {el: element_property(el, key) for el in frac})
        for name in STATISTICS:
            out[f"{name}:{key}"] = None if stats is None else stats[name]
    return tuple(out.items())


def _statistics(fractions: dict[str, float], values: dict[str, float | None]) -> dict[str, float] | None:
    """Fraction-weighted mean and spread, minimum, maximum and range of one property (None if any is
    unknown)."""
    if any(v is None for v in values.values()):
        return None
    known: dict[str, float] = {el: v for el, v in values.items() if v is not None}
    mean = sum(c * known[el] for el, c in fractions.items())
    low, high = min(known.values()), max(known.values())
    spread = math.sqrt(sum(c * (known[el] - mean) ** 2 for el, c in fractions.items()))
    return {"mean": mean, "min": low, "max": high, "range": high - low, "spread": spread}


def composition_label(key: str) -> str:
    """The entry name of a :func:`composition_descriptors` key (``max:melting_point`` -> ``maximum
    melting point (K)``)."""
    if key.startswith("fraction_"):
        return f"{key.removeprefix('fraction_')} fraction"
    if key.startswith("amount_"):
        return f"{key.removeprefix('amount_')} amount"
    if ":" in key:
        statistic, prop = key.split(":", 1)
        return f"{STATISTICS[statistic]} {ELEMENT_PROPERTIES[prop]}"
    return COMPOSITION_DESCRIPTORS.get(key, key)
