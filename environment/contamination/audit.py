"""The digit-level retention audit: per-cell nested matches, retentions against the molecule-blind null,
one-sided binomial tests, Benjamini-Hochberg across every test of a run, and the first-figure reference.

A *cell* is one model on one benchmark (optionally at one reasoning level). Input rows carry one
prediction and the published label per item; see ``load_table`` for the CSV columns.
"""

from __future__ import annotations

import csv
import hashlib
import math
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from decimal import Decimal
from pathlib import Path

from environment.contamination.control import honest_control, scaled_errors
from environment.contamination.digits import (
    DigitKey,
    digit_key,
    first_figure_value,
    match_depth,
    nested_matches,
    parse_decimal,
    written_figures,
)
from environment.contamination.null import null_retention

REQUIRED_COLUMNS = ("model", "benchmark", "item_id", "prediction", "label")
OPTIONAL_COLUMNS = ("reasoning",)


@dataclass(frozen=True)
class Prediction:
    """One row of the audit table: a model's prediction for one item and the item's published label.

    ``prediction`` and ``label`` are kept as written (text) so their significant figures are not lost.
    """

    model: str
    benchmark: str
    item_id: str
    prediction: str
    label: str
    reasoning: str = ""

    @property
    def cell(self) -> tuple[str, str, str]:
        return (self.model, self.benchmark, self.reasoning)


@dataclass
class CellAudit:
    """Statistics of one cell. Counts are over the audited items (label with enough written figures)."""

    model: str
    benchmark: str
    reasoning: str
    n_items: int
    n_audited: int
    n_label_excluded: int
    n_prediction_unparsed: int
    m1: int
    m2: int
    m3: int
    hit1: float
    hit2: float
    hit3: float
    r12: float
    r23: float
    null_r12: float
    null_r23: float
    p_r12: float
    p_r23: float
    q_r12: float = math.nan
    q_r23: float = math.nan
    significant_r12: bool = False
    significant_r23: bool = False
    pearson_r: float = math.nan
    reference_r: float = math.nan
    honest_sims: int = 0
    honest_n_errors: int = 0
    honest_error_scale: float = math.nan
    honest_r12: float = math.nan
    honest_r23: float = math.nan
    honest_flag_rate_r12: float = math.nan
    honest_flag_rate_r23: float = math.nan
    honest_p_r12: float = math.nan
    honest_p_r23: float = math.nan
    beyond_honest: bool | None = None

    @property
    def flagged(self) -> bool:
        """Retrieval detected: at least one retention significantly above its null after BH."""
        return self.significant_r12 or self.significant_r23

    @property
    def flagged_by(self) -> str:
        """Which test flagged the cell: ``"R12"``, ``"R23"``, ``"R12+R23"`` or ``""``."""
        return "+".join(
            name for name, hit in (("R12", self.significant_r12), ("R23", self.significant_r23)) if hit
        )

    @property
    def r12_only(self) -> bool:
        """Flagged on R12 alone: the weaker evidence, since an accurate honest model can retain the second
        figure (see the honest-noise control)."""
        return self.significant_r12 and not self.significant_r23

    @property
    def below_reference(self) -> bool | None:
        """Whether the model's correlation stays below the first-figure reference's (None if undefined)."""
        if math.isnan(self.pearson_r) or math.isnan(self.reference_r):
            return None
        return self.pearson_r < self.reference_r

    def as_dict(self) -> dict:
        out = asdict(self)
        out["flagged"] = self.flagged
        out["flagged_by"] = self.flagged_by
        out["r12_only"] = self.r12_only
        out["below_reference"] = self.below_reference
        return {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in out.items()}


@dataclass
class AuditResult:
    """All cells of one run and the settings they were computed with."""

    cells: list[CellAudit]
    alpha: float
    seed: int
    min_label_figures: int
    null_splits: int
    n_tests: int = 0
    honest_sims: int = 0
    notes: list[str] = field(default_factory=list)

    @property
    def flagged(self) -> list[CellAudit]:
        return [c for c in self.cells if c.flagged]

    @property
    def r12_only(self) -> list[CellAudit]:
        return [c for c in self.cells if c.r12_only]

    def as_dict(self) -> dict:
        return {
            "alpha": self.alpha,
            "seed": self.seed,
            "min_label_figures": self.min_label_figures,
            "null_splits": self.null_splits,
            "n_cells": len(self.cells),
            "n_tests": self.n_tests,
            "honest_sims": self.honest_sims,
            "n_flagged": len(self.flagged),
            "n_flagged_r12_only": len(self.r12_only),
            "n_flagged_beyond_honest": sum(1 for c in self.flagged if c.beyond_honest),
            "notes": list(self.notes),
            "cells": [c.as_dict() for c in self.cells],
        }


def load_table(path: Path) -> list[Prediction]:
    """Read the audit CSV: columns model, benchmark, item_id, prediction, label, and optionally reasoning.

    Other columns are ignored. Raises ValueError on a missing column, an empty table, or an item that
    appears twice in one cell.
    """
    with open(path, newline="", encoding="utf-8-sig") as handle:
        reader = csv.DictReader(handle)
        header = [h.strip() for h in (reader.fieldnames or [])]
        missing = [c for c in REQUIRED_COLUMNS if c not in header]
        if missing:
            raise ValueError(f"{path}: missing column(s) {', '.join(missing)}; found {', '.join(header)}")
        rows = []
        for raw in reader:
            row = {(k or "").strip(): (v or "").strip() for k, v in raw.items() if k is not None}
            rows.append(
                Prediction(
                    model=row["model"],
                    benchmark=row["benchmark"],
                    item_id=row["item_id"],
                    prediction=row["prediction"],
                    label=row["label"],
                    reasoning=row.get("reasoning", ""),
                )
            )
    if not rows:
        raise ValueError(f"{path}: no rows")
    return rows


def _control_seed(seed: int, cell: tuple[str, str, str]) -> list[int]:
    # one stream per cell, fixed by the run seed and the cell's names, never by row order
    digest = hashlib.sha256("\x1f".join(("honest-control", *cell)).encode("utf-8")).digest()
    return [seed, int.from_bytes(digest[:8], "big")]


def _cell_seed(seed: int, benchmark: str) -> list[int]:
    # The split depends on the run seed and the benchmark, not on row order or the model: every model
    # audited on the same labels is tested against the same null.
    digest = hashlib.sha256(benchmark.encode("utf-8")).digest()
    return [seed, int.from_bytes(digest[:8], "big")]


def _pearson(x: Sequence[float], y: Sequence[float]) -> float:
    import numpy as np

    if len(x) < 3:
        return math.nan
    xa, ya = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if np.ptp(xa) == 0 or np.ptp(ya) == 0:
        return math.nan
    return float(np.corrcoef(xa, ya)[0, 1])


def _binomial_p(successes: int, trials: int, null: float) -> float:
    from scipy.stats import binomtest

    if trials == 0 or math.isnan(null):
        return math.nan
    return float(binomtest(successes, trials, p=min(max(null, 0.0), 1.0), alternative="greater").pvalue)


_Item = tuple[str, DigitKey, DigitKey | None, Decimal, Decimal | None]


def _audited_items(rows: Sequence[Prediction], min_label_figures: int) -> tuple[list[_Item], int, int]:
    """(item id, label digits, prediction digits, label, prediction) of each audited row of one cell, with
    the counts of labels excluded (too few figures) and predictions that do not parse."""
    first = rows[0]
    seen: set[str] = set()
    audited: list[_Item] = []
    label_excluded = unparsed = 0
    for row in rows:
        if row.cell != first.cell:
            raise ValueError("audit_cell needs the rows of a single cell")
        if row.item_id in seen:
            raise ValueError(f"item {row.item_id!r} appears twice in cell {'/'.join(filter(None, row.cell))}")
        seen.add(row.item_id)
        label_value = parse_decimal(row.label)
        label = digit_key(label_value)
        if label is None or written_figures(label_value) < min_label_figures:
            label_excluded += 1
            continue
        predicted_value = parse_decimal(row.prediction)
        unparsed += predicted_value is None
        audited.append((row.item_id, label, digit_key(predicted_value), label_value, predicted_value))
    return audited, label_excluded, unparsed


def audit_cell(
    rows: Sequence[Prediction],
    seed: int = 0,
    min_label_figures: int = 3,
    null_splits: int = 20,
    honest_sims: int = 0,
    alpha: float = 0.05,
) -> CellAudit:
    """Statistics of one cell before multiple-testing correction (``q_*`` and ``significant_*`` unset).

    ``honest_sims`` > 0 also runs the honest-noise control (``environment.contamination.control``) with
    that many simulated predictors.
    """
    first = rows[0]
    audited, label_excluded, unparsed = _audited_items(rows, min_label_figures)
    audited.sort(key=lambda item: item[0])
    labels = [item[1] for item in audited]
    counts = nested_matches([item[2] for item in audited], labels)
    null = null_retention(labels, seed=_cell_seed(seed, first.benchmark), splits=null_splits)

    numeric = [(float(p), float(y), key) for _, key, _, y, p in audited if p is not None]
    pearson_r = _pearson([p for p, _, _ in numeric], [y for _, y, _ in numeric])
    reference_r = _pearson([first_figure_value(k) for _, _, k in numeric], [y for _, y, _ in numeric])
    model_p12 = _binomial_p(counts.m2, counts.m1, null.r12)
    model_p23 = _binomial_p(counts.m3, counts.m2, null.r23)
    control = honest_control(
        labels,
        [float(item[3]) for item in audited],
        scaled_errors(
            [None if item[4] is None else float(item[4]) for item in audited],
            [float(item[3]) for item in audited],
            labels,
            [match_depth(item[2], item[1]) for item in audited],
        ),
        null.r12,
        null.r23,
        model_p12,
        model_p23,
        sims=honest_sims,
        seed=_control_seed(seed, first.cell),
        alpha=alpha,
    )
    return CellAudit(
        model=first.model,
        benchmark=first.benchmark,
        reasoning=first.reasoning,
        n_items=len(rows),
        n_audited=counts.n,
        n_label_excluded=label_excluded,
        n_prediction_unparsed=unparsed,
        m1=counts.m1,
        m2=counts.m2,
        m3=counts.m3,
        hit1=counts.hit(1),
        hit2=counts.hit(2),
        hit3=counts.hit(3),
        r12=counts.r12,
        r23=counts.r23,
        null_r12=null.r12,
        null_r23=null.r23,
        p_r12=model_p12,
        p_r23=model_p23,
        pearson_r=pearson_r,
        reference_r=reference_r,
        honest_sims=control.sims,
        honest_n_errors=control.n_errors,
        honest_error_scale=control.error_scale,
        honest_r12=control.r12,
        honest_r23=control.r23,
        honest_flag_rate_r12=control.flag_rate_r12,
        honest_flag_rate_r23=control.flag_rate_r23,
        honest_p_r12=control.p_r12,
        honest_p_r23=control.p_r23,
    )


def benjamini_hochberg(cells: Sequence[CellAudit], alpha: float) -> int:
    """Adjust every retention p-value of the run together (BH) and mark the significant ones.

    Retentions that could not be tested (no matches to retain) are left out of the family. The two
    retentions of a cell come from nested counts on the same items and are positively dependent, under
    which BH still controls the false discovery rate. Returns the number of tests in the family.
    """
    from scipy.stats import false_discovery_control

    tests = [
        (cell, name)
        for cell in cells
        for name in ("r12", "r23")
        if not math.isnan(getattr(cell, f"p_{name}"))
    ]
    if not tests:
        return 0
    adjusted = false_discovery_control([getattr(cell, f"p_{name}") for cell, name in tests], method="bh")
    for (cell, name), q in zip(tests, adjusted, strict=True):
        setattr(cell, f"q_{name}", float(q))
        setattr(cell, f"significant_{name}", bool(q <= alpha))
    return len(tests)


def _beyond_honest(cell: CellAudit, alpha: float) -> bool | None:
    """Whether a flag exceeds what honest accuracy produces: some significant retention that the honest
    control reaches in at most ``alpha`` of its simulations. None when unflagged or without a control."""
    if not cell.flagged or cell.honest_sims == 0:
        return None
    verdicts = [
        getattr(cell, f"honest_p_{name}") <= alpha
        for name in ("r12", "r23")
        if getattr(cell, f"significant_{name}") and not math.isnan(getattr(cell, f"honest_p_{name}"))
    ]
    return any(verdicts) if verdicts else None


def run_audit(
    rows: Iterable[Prediction],
    alpha: float = 0.05,
    seed: int = 0,
    min_label_figures: int = 3,
    null_splits: int = 20,
    honest_sims: int = 200,
) -> AuditResult:
    """Audit every cell in ``rows`` and correct all their retention tests together at FDR ``alpha``.

    ``honest_sims``: simulations of the honest-noise control per cell (0 turns it off).
    """
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must lie in (0, 1), got {alpha}")
    if min_label_figures < 1:
        raise ValueError("min_label_figures must be at least 1")
    if honest_sims < 0:
        raise ValueError("honest_sims must be 0 (off) or more")
    by_cell: dict[tuple[str, str, str], list[Prediction]] = {}
    for row in rows:
        by_cell.setdefault(row.cell, []).append(row)
    cells = [
        audit_cell(by_cell[key], seed, min_label_figures, null_splits, honest_sims, alpha)
        for key in sorted(by_cell)
    ]
    n_tests = benjamini_hochberg(cells, alpha)
    for cell in cells:
        cell.beyond_honest = _beyond_honest(cell, alpha)
    result = AuditResult(
        cells=cells,
        alpha=alpha,
        seed=seed,
        min_label_figures=min_label_figures,
        null_splits=null_splits,
        n_tests=n_tests,
        honest_sims=honest_sims,
    )
    for cell in cells:
        name = "/".join(filter(None, (cell.model, cell.benchmark, cell.reasoning)))
        if cell.n_audited == 0:
            result.notes.append(
                f"{name}: no label has {min_label_figures} written significant figures; nothing audited"
            )
        if cell.r12_only:
            note = (
                f"{name}: flagged on R12 alone (R23 not significant). An accurate model without retrieval "
                "can retain the second figure"
            )
            if cell.honest_sims:
                verdict = "more than" if cell.beyond_honest else "no more than"
                note += (
                    f"; an honest predictor with this model's error spread reaches R12 {cell.honest_r12:.3f} "
                    f"(model {cell.r12:.3f}; significant in {cell.honest_flag_rate_r12:.0%} of "
                    f"{cell.honest_sims} simulations; Monte Carlo p {cell.honest_p_r12:.3f}), so the flag "
                    f"shows {verdict} honest accuracy produces"
                )
            else:
                note += "; run the honest-noise control (--honest-sims) to see whether accuracy explains it"
            result.notes.append(note + ".")
    return result
