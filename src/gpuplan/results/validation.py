"""Typed answers of `validate`: each published measurement against its prediction, and the medians.

Field names and order are the JSON contract (docs/api.md): `to_dict()` is the `--json` document.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gpuplan.results.base import Result, optional


@dataclass(frozen=True, kw_only=True)
class ValidationRow(Result):
    """One published measurement against gpuplan's prediction of it."""

    id: str
    category: str
    metric: str
    predicted: float
    published: float
    error: float  # signed fraction (predicted - published) / published; fit verdicts: 0 or +-1
    unit: str
    measured_as: str
    dominant: str  # the largest term of the prediction: what a miss is made of
    kind: str  # what was predicted, on which architecture (e.g. "decode/Hopper")
    workload: dict[str, Any]
    source: str = ""  # the row's source column
    stack: str = ""  # the software family of an everyday-stacks row (stacks.csv); "" elsewhere
    split: str = ""  # "fit" or "heldout" (stacks.csv): held-out rows never reach the error bars


@dataclass(frozen=True, kw_only=True)
class Skipped(Result):
    id: str
    category: str
    reason: str
    source: str = ""
    stack: str = ""


@dataclass(frozen=True, kw_only=True)
class Validation(Result):
    """`gpuplan validate`: every measurement gpuplan can express, and the errors by category and kind."""

    rows: list[ValidationRow]
    summary: dict[str, dict[str, float]]  # per category, the rows of no stack (the vendor files)
    by_kind: dict[str, dict[str, float]]  # per kind, the rows of no stack: what the error bars are made of
    skipped: list[Skipped]
    by_stack: dict[str, dict[str, float]] | None = optional()  # "stack / figure / split": n, medians
    by_source: dict[str, dict[str, float]] | None = optional()  # per source: n, skipped, medians
