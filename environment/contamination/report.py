"""Audit results as a markdown table, a CSV table and a heatmap PNG (matplotlib, Agg backend)."""

from __future__ import annotations

import csv
import math
from pathlib import Path

from environment.contamination.audit import AuditResult, CellAudit

CSV_COLUMNS = (
    "model", "benchmark", "reasoning", "n_items", "n_audited", "n_label_excluded", "n_prediction_unparsed",
    "m1", "m2", "m3", "hit1", "hit2", "hit3", "r12", "r23", "null_r12", "null_r23", "p_r12", "p_r23",
    "q_r12", "q_r23", "significant_r12", "significant_r23", "flagged", "flagged_by", "r12_only",
    "pearson_r", "reference_r", "below_reference", "honest_sims", "honest_n_errors", "honest_error_scale",
    "honest_r12", "honest_r23", "honest_flag_rate_r12", "honest_flag_rate_r23", "honest_p_r12",
    "honest_p_r23", "beyond_honest",
)  # fmt: skip


def _cell_label(cell: CellAudit) -> str:
    return f"{cell.model} · {cell.reasoning}" if cell.reasoning else cell.model


def _num(value: float, digits: int = 3) -> str:
    missing = value is None or (isinstance(value, float) and math.isnan(value))
    return "\u2013" if missing else f"{value:.{digits}f}"


def _p(value: float) -> str:
    if isinstance(value, float) and math.isnan(value):
        return "\u2013"
    return f"{value:.2e}" if value < 1e-3 else f"{value:.3f}"


def _flag_text(cell: CellAudit) -> str:
    if not cell.flagged:
        return "no"
    text = f"**{cell.flagged_by}**" + (" (R12 alone)" if cell.r12_only else "")
    if cell.beyond_honest is not None:
        text += ", beyond honest" if cell.beyond_honest else ", within honest"
    return text


def _honest_text(cell: CellAudit, name: str) -> str:
    value = getattr(cell, f"honest_{name}")
    if not cell.honest_sims or math.isnan(value):
        return "\u2013"
    return f"{value:.3f} ({_num(getattr(cell, f'honest_flag_rate_{name}') * 100, 0)}%)"


def markdown_table(result: AuditResult) -> str:
    """One row per cell: counts, retentions beside their nulls, BH-adjusted p-values, which test flagged
    the cell, the honest-noise control, correlations; then notes (flags resting on R12 alone)."""
    r12_only = len(result.r12_only)
    summary = (
        f"Digit-level retention audit: {len(result.cells)} cells, {result.n_tests} tests, "
        f"Benjamini-Hochberg at {result.alpha}; {len(result.flagged)} cell(s) flagged"
    )
    summary += f", {r12_only} of them on R12 alone." if r12_only else "."
    lines = [summary]
    if result.honest_sims:
        lines += [
            "",
            (
                f"Honest control: {result.honest_sims} simulated predictors per cell with the model's own "
                "error spread and no retrieval; its mean retention and, in brackets, how often its own "
                "test is significant. *Beyond honest*: a significant retention that the control's "
                f"evidence matches in at most {result.alpha:.0%} of simulations."
            ),
        ]
    lines += [
        "",
        (
            "| model | benchmark | n | m1 | m2 | m3 | hit3 | R12 | null R12 | q R12 | honest R12 | R23 "
            "| null R23 | q R23 | honest R23 | flagged by | r model | r first-figure |"
        ),
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|:---:|---:|---:|",
    ]
    for c in result.cells:
        lines.append(
            f"| {_cell_label(c)} | {c.benchmark} | {c.n_audited} | {c.m1} | {c.m2} | {c.m3} | "
            f"{_num(c.hit3 * 100 if not math.isnan(c.hit3) else math.nan, 1)}% | {_num(c.r12)} | "
            f"{_num(c.null_r12)} | {_p(c.q_r12)} | {_honest_text(c, 'r12')} | {_num(c.r23)} | "
            f"{_num(c.null_r23)} | {_p(c.q_r23)} | {_honest_text(c, 'r23')} | {_flag_text(c)} | "
            f"{_num(c.pearson_r)} | {_num(c.reference_r)} |"
        )
    if result.notes:
        lines.append("")
    lines.extend(f"- {note}" for note in result.notes)
    return "\n".join(lines) + "\n"


def write_csv(result: AuditResult, path: Path) -> None:
    with open(path, "w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=CSV_COLUMNS)
        writer.writeheader()
        for cell in result.cells:
            row = cell.as_dict()
            writer.writerow({k: "" if row[k] is None else row[k] for k in CSV_COLUMNS})


def write_heatmap(result: AuditResult, path: Path) -> None:
    """Share of items matched at three figures per cell; flagged cells carry a star, or a dagger when the
    flag rests on R12 alone."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    rows = sorted({_cell_label(c) for c in result.cells})
    cols = sorted({c.benchmark for c in result.cells})
    grid = np.full((len(rows), len(cols)), np.nan)
    text = [["" for _ in cols] for _ in rows]
    for c in result.cells:
        i, j = rows.index(_cell_label(c)), cols.index(c.benchmark)
        grid[i, j] = c.hit3 * 100
        mark = ("†" if c.r12_only else "*") if c.flagged else ""
        text[i][j] = ("\u2013" if math.isnan(c.hit3) else f"{c.hit3 * 100:.1f}") + mark
    fig, ax = plt.subplots(figsize=(3.2 + 1.1 * len(cols), 2.0 + 0.45 * len(rows)), dpi=120)
    cmap = matplotlib.colormaps["magma_r"].with_extremes(bad="#dddddd")
    image = ax.imshow(
        np.ma.masked_invalid(grid),
        cmap=cmap,
        vmin=0,
        vmax=max(10.0, np.nanmax(grid, initial=0)),
        aspect="auto",
    )
    ax.set_xticks(range(len(cols)), cols, rotation=45, ha="right")
    ax.set_yticks(range(len(rows)), rows)
    for i in range(len(rows)):
        for j in range(len(cols)):
            value = grid[i, j]
            dark = not np.isnan(value) and value > 0.6 * image.norm.vmax
            ax.text(
                j, i, text[i][j], ha="center", va="center", fontsize=8, color="white" if dark else "black"
            )
    fig.colorbar(image, ax=ax, label="hit3: matched at 3 figures (%)")
    ax.set_title(
        f"Verbatim retrieval\n* = flagged, † = flagged on R12 alone (Benjamini-Hochberg, FDR {result.alpha})",
        fontsize=10,
    )
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
