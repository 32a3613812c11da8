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
    e.g. measured-h200, when `category` is given)."""
    from gpuplan.planner.validation import bundled_rows, file_rows, result_record, run_rows, summary, summary_by_kind

    rows = file_rows(file) if file is not None else bundled_rows()
    if category is not None:
        known = sorted({r["category"] for r in rows})
        if category not in known:
            raise InvalidSettingError(f"No validation rows of category {category!r}. Categories: {', '.join(known)}.")
        rows = [r for r in rows if r["category"] == category]
    results, skipped = run_rows(rows, catalog(ctx))
    return Validation(
        rows=[ValidationRow(**result_record(r)) for r in results],
        summary=summary(results),
        by_kind=summary_by_kind(results),
        skipped=[Skipped(id=s.id, category=s.category, reason=s.reason) for s in skipped],
    )


def residual_file(validation: Validation) -> dict[str, Any]:
    """The residuals file (error bars) from a `validate` result: bundled rows only, fit verdicts excluded."""
    pairs = []
    for r in validation.rows:
        if r.unit == "fits" or not r.kind:
            continue
        err = float(r.error)
        metric = r.metric.lower()
        if r.unit.strip().lower() in ("ms", "s") or "first_token" in metric or "per_output_token" in metric:
            err = 1.0 / (1.0 + err) - 1.0  # a time's error as its rate's: predicted/true speed - 1
        pairs.append((r.kind, err))
    return uncertainty.residual_table(pairs)
