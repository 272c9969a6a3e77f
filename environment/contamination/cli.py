"""``spu contamination audit|blind|unblind``. Exit codes: 0 ok, 1 ``--fail-on-flag`` and a cell was flagged,
2 usage error (unreadable input, missing column, bad value, an output this command did not write)."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Annotated

import typer

from spu_common.console import echo_json, fail, output_rule
from spu_common.jsonfiles import load_json_strict
from spu_common.outputs import claim_file, claim_folder

EXIT_FLAGGED = 1

contamination_app = typer.Typer(
    help="Contamination audits: digit-level retrieval test and blinding transforms.", no_args_is_help=True
)

JsonOpt = Annotated[bool, typer.Option("--json", help="Machine-readable JSON output.")]
ForceOpt = Annotated[
    bool, typer.Option("--force", help="Replace the output even if this command did not write it.")
]


@contamination_app.command("audit")
def audit_command(
    table: Annotated[
        Path,
        typer.Argument(
            help="CSV with columns model, benchmark, item_id, prediction, label and optionally reasoning; "
            "one row per prediction. Values are read as written (keep trailing zeros)."
        ),
    ],
    out: Annotated[
        Path, typer.Option("--out", "-o", help="Directory for audit.csv, audit.md, audit.json, heatmap.png.")
    ] = Path("contamination-audit"),
    alpha: Annotated[float, typer.Option(help="False discovery rate for Benjamini-Hochberg.")] = 0.05,
    seed: Annotated[int, typer.Option(help="Seed of the random halvings of the null.")] = 0,
    min_label_figures: Annotated[
        int, typer.Option(help="Audit only labels written with at least this many significant figures.")
    ] = 3,
    null_splits: Annotated[
        int, typer.Option(help="Random halvings averaged for the null (1 = a single split).")
    ] = 20,
    honest_sims: Annotated[
        int,
        typer.Option(
            help="Simulations of the honest-noise control per cell: a predictor with the model's own error "
            "spread and no retrieval (0 = off)."
        ),
    ] = 200,
    fail_on_flag: Annotated[bool, typer.Option(help="Exit 1 when any cell is flagged.")] = False,
    force: ForceOpt = False,
    as_json: JsonOpt = False,
) -> None:
    """Digit-level retention audit: nested matches at 1, 2, 3 significant figures per cell, retentions R12
    and R23 tested against the molecule-blind null, Benjamini-Hochberg across the run; which test flagged
    each cell, and an honest-noise control showing what the model's accuracy alone would retain."""
    from environment.contamination.audit import load_table, run_audit
    from environment.contamination.report import markdown_table, write_csv, write_heatmap

    if not table.is_file():
        raise fail(f"{table}: no such file")
    if null_splits < 1:
        raise fail("--null-splits must be at least 1")
    if honest_sims < 0:
        raise fail("--honest-sims must be 0 (off) or more")
    try:
        result = run_audit(
            load_table(table),
            alpha=alpha,
            seed=seed,
            min_label_figures=min_label_figures,
            null_splits=null_splits,
            honest_sims=honest_sims,
        )
    except (ValueError, UnicodeDecodeError, csv.Error) as exc:
        raise fail(str(exc)) from None
    with output_rule():
        claim_folder(out, "contamination-audit", force=force, inputs=[table])
    summary = result.as_dict()
    summary["outputs"] = {
        name: str(out / name) for name in ("audit.csv", "audit.md", "audit.json", "heatmap.png")
    }
    write_csv(result, out / "audit.csv")
    (out / "audit.md").write_text(markdown_table(result), encoding="utf-8")
    (out / "audit.json").write_text(json.dumps(summary, indent=2, ensure_ascii=False), encoding="utf-8")
    write_heatmap(result, out / "heatmap.png")
    if as_json:
        echo_json(summary)
    else:
        typer.echo(markdown_table(result))
        typer.echo(f"written: {', '.join(summary['outputs'].values())}")
    if fail_on_flag and result.flagged:
        raise typer.Exit(EXIT_FLAGGED)


def _read_items(
    path: Path, id_column: str | None, smiles_column: str, label_column: str, name_column: str | None
) -> list:
    from environment.contamination.blinding import Item

    with open(path, newline="", encoding="utf-8-sig") as handle:
        reader = csv.DictReader(handle)
        header = [h.strip() for h in reader.fieldnames or []]
        wanted = [c for c in (id_column, smiles_column, label_column, name_column) if c]
        missing = [c for c in wanted if c not in header]
        if missing:
            raise ValueError(f"{path}: missing column(s) {', '.join(missing)}; found {', '.join(header)}")
        items = []
        for number, raw in enumerate(reader, start=1):
            row = {(k or "").strip(): (v or "").strip() for k, v in raw.items() if k is not None}
            items.append(
                Item(
                    item_id=row[id_column] if id_column else str(number),
                    smiles=row[smiles_column],
                    label=row[label_column],
                    name=row[name_column] if name_column else "",
                )
            )
    return items


@contamination_app.command("blind")
def blind_command(
    dataset: Annotated[Path, typer.Argument(help="CSV with a SMILES column and a label column.")],
    property_name: Annotated[
        str, typer.Option("--property", help="Exact property name, e.g. 'log solubility (mol/L)'.")
    ],
    out: Annotated[Path, typer.Option("--out", "-o", help="Output directory.")] = Path("blinded"),
    hint: Annotated[
        str | None,
        typer.Option(
            "--hint", help="Vague property word for level 2, e.g. 'solubility' (default: --property)."
        ),
    ] = None,
    template: Annotated[
        Path | None,
        typer.Option(
            help="Prompt template file with {property}, {role}, {expertise}, {entity}, {entities}, "
            "{representation}, {features}, {structure}, {name} placeholders."
        ),
    ] = None,
    mask: Annotated[
        list[str] | None, typer.Option("--mask", help="Extra term to mask from level 2 on (repeatable).")
    ] = None,
    smiles_column: Annotated[str, typer.Option(help="Column holding SMILES.")] = "smiles",
    label_column: Annotated[str, typer.Option(help="Column holding the labels.")] = "label",
    id_column: Annotated[str | None, typer.Option(help="Column of item ids (default: row numbers).")] = None,
    name_column: Annotated[str | None, typer.Option(help="Column of molecule names (levels 1-4).")] = None,
    seed: Annotated[int, typer.Option(help="Seed of the SMILES substitution map.")] = 0,
    decimals: Annotated[int, typer.Option(help="Decimals written for transformed labels.")] = 2,
    force: ForceOpt = False,
    as_json: JsonOpt = False,
) -> None:
    """Six blinding levels (specific, specific-transformed, generic, generic-transformed, agnostic,
    agnostic-transformed): per level a dataset.csv, prompt_template.txt and prompts.jsonl, plus
    blinding.json with the label transform and SMILES map needed to undo them."""
    from environment.contamination.blinding import DEFAULT_TEMPLATE, blind

    if not dataset.is_file():
        raise fail(f"{dataset}: no such file")
    if template is not None and not template.is_file():
        raise fail(f"{template}: no such file")
    if not 0 <= decimals <= 12:
        raise fail("--decimals must lie between 0 and 12")
    try:
        items = _read_items(dataset, id_column, smiles_column, label_column, name_column)
        text = template.read_text(encoding="utf-8") if template else DEFAULT_TEMPLATE
        blinding = blind(items, property_name, hint, text, mask or [], seed=seed, decimals=decimals)
    except (ValueError, UnicodeDecodeError, csv.Error) as exc:
        raise fail(str(exc)) from None
    with output_rule():
        claim_folder(out, "blinding", force=force, inputs=[dataset, *([template] if template else [])])
    for level in blinding.levels:
        folder = out / level.level.slug
        folder.mkdir(exist_ok=True)
        with open(folder / "dataset.csv", "w", newline="", encoding="utf-8") as handle:
            writer = csv.DictWriter(handle, fieldnames=list(level.rows[0]))
            writer.writeheader()
            writer.writerows(level.rows)
        (folder / "prompt_template.txt").write_text(level.template, encoding="utf-8")
        with open(folder / "prompts.jsonl", "w", encoding="utf-8") as handle:
            handle.writelines(json.dumps(prompt, ensure_ascii=False) + "\n" for prompt in level.prompts)
    parameters = blinding.parameters()
    (out / "blinding.json").write_text(json.dumps(parameters, indent=2, ensure_ascii=False), encoding="utf-8")
    if as_json:
        echo_json({**parameters, "out": str(out)})
    else:
        transform = parameters["label_transform"]
        typer.echo(
            f"{parameters['n_items']} items blinded at 6 levels into {out}/ "
            f"({', '.join(lv['dir'] for lv in parameters['levels'])})."
        )
        typer.echo(
            f"label transform: t = 100 * ({transform['label_max']} - y) / "
            f"({transform['label_max']} - ({transform['label_min']})); parameters in {out / 'blinding.json'}"
        )


@contamination_app.command("unblind")
def unblind_command(
    parameters: Annotated[Path, typer.Argument(help="blinding.json written by `spu contamination blind`.")],
    predictions: Annotated[Path, typer.Argument(help="CSV of predictions made on a blinded level.")],
    out: Annotated[Path, typer.Option("--out", "-o", help="CSV to write.")],
    column: Annotated[
        str, typer.Option(help="Column of transformed values to map back (adds COLUMN_original).")
    ] = "prediction",
    structure_column: Annotated[
        str | None, typer.Option(help="Column of substituted structures to decode (adds COLUMN_smiles).")
    ] = None,
    force: ForceOpt = False,
    as_json: JsonOpt = False,
) -> None:
    """Undo the blinding for scoring: inverse label transform (exact decimal arithmetic) and SMILES decoding.
    Values that are not numbers are left empty in the new column."""
    from environment.contamination.blinding import LabelTransform, SmilesSubstitution, decimal_text
    from environment.contamination.digits import parse_decimal

    for path in (parameters, predictions):
        if not path.is_file():
            raise fail(f"{path}: no such file")
    try:
        params = load_json_strict(parameters)
        transform = LabelTransform.from_dict(params["label_transform"])
        substitution = SmilesSubstitution.from_dict(params["smiles_substitution"])
        with open(predictions, newline="", encoding="utf-8-sig") as handle:
            reader = csv.DictReader(handle)
            rows = list(reader)
            header = list(reader.fieldnames or [])
        for name in filter(None, (column, structure_column)):
            if name not in header:
                raise ValueError(f"{predictions}: no column {name!r}; found {', '.join(header)}")
        converted = 0
        for row in rows:
            value = parse_decimal(row[column])
            original = ""
            if value is not None:
                original = decimal_text(transform.inverse_exact(value))
                converted += 1
            row[f"{column}_original"] = original
            if structure_column:
                row[f"{structure_column}_smiles"] = substitution.decode(row[structure_column])
    except (ValueError, KeyError, json.JSONDecodeError, UnicodeDecodeError, csv.Error) as exc:
        raise fail(f"{type(exc).__name__}: {exc}") from None
    fields = header + [f"{column}_original"] + ([f"{structure_column}_smiles"] if structure_column else [])
    if out.resolve() in (parameters.resolve(), predictions.resolve()):
        raise fail(f"{out} is an input of this command: choose another file to write")
    with output_rule():
        claim_file(out, force=force)
    with open(out, "w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=fields)
        writer.writeheader()
        writer.writerows(rows)
    summary = {"rows": len(rows), "converted": converted, "out": str(out)}
    if as_json:
        echo_json(summary)
    else:
        typer.echo(f"{converted} of {len(rows)} values mapped back into {out}")


def register(app: typer.Typer) -> None:
    app.add_typer(contamination_app, name="contamination")
