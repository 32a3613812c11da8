"""`validate`: predicted against published, and the residual file the error bars come from."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from gpuplan.errors import InvalidSettingError
from gpuplan.estimators import uncertainty
from gpuplan.interfaces.api.catalog import catalog
from gpuplan.results import Skipped, Validation, ValidationRow
from gpuplan.specs.context import Context


def validate(file: str | Path | None = None, ctx: Context | None = None, category: str | None = None) -> Validation:
    """`gpuplan validate`: predicted vs published for every row gpuplan can express (of one category,
    e.g. measured-h200, when `category` is given). The bundled rows are the vendor files and the
    everyday-stacks file; the per-category and per-kind summaries cover the rows of no stack (as
    before the stacks came), the by-stack and by-source tables all of them."""
    from gpuplan.planner.validation import (
        bundled_rows,
        file_rows,
        result_record,
        run_rows,
        stack_rows,
        summary,
        summary_by_kind,
    )
    from gpuplan.planner.validation_stacks import by_source, by_stack

    rows = file_rows(file) if file is not None else bundled_rows() + stack_rows()
    if category is not None:
        known = sorted({r["category"] for r in rows})
        if category not in known:
            raise InvalidSettingError(f"No validation rows of category {category!r}. Categories: {', '.join(known)}.")
        rows = [r for r in rows if r["category"] == category]
    tags = {r["id"]: {k: r[k] for k in ("source", "stack", "split", "category")} for r in rows}
    results, skipped = run_rows(rows, catalog(ctx))
    skipped_ids = [s.id for s in skipped]
    return Validation(
        rows=[
            ValidationRow(
                **result_record(r), source=tags[r.id]["source"], stack=tags[r.id]["stack"], split=tags[r.id]["split"]
            )
            for r in results
        ],
        summary=summary(r for r in results if not tags[r.id]["stack"]),
        by_kind=summary_by_kind(r for r in results if not tags[r.id]["stack"]),
        skipped=[
            Skipped(
                id=s.id, category=s.category, reason=s.reason, source=tags[s.id]["source"], stack=tags[s.id]["stack"]
            )
            for s in skipped
        ],
        by_stack=by_stack(results, tags, skipped_ids),
        by_source=by_source(results, tags, skipped_ids),
    )


def residual_file(validation: Validation, stacks: bool = False) -> dict[str, Any]:
    """The residuals file (error bars) from a `validate` result: fit verdicts excluded. The
    everyday-stacks rows (planner/validation_stacks.py) count only when `stacks` is set, and then
    only their `fit` split: a held-out row never reaches the error bars."""
    pairs = []
    for r in validation.rows:
        if r.unit == "fits" or not r.kind or r.split == "heldout" or (r.stack and not stacks):
            continue
        err = float(r.error)
        metric = r.metric.lower()
        if r.unit.strip().lower() in ("ms", "s") or "first_token" in metric or "per_output_token" in metric:
            err = 1.0 / (1.0 + err) - 1.0  # a time's error as its rate's: predicted/true speed - 1
        pairs.append((r.kind, err))
    return uncertainty.residual_table(pairs)
