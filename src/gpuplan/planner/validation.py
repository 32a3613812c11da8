"""Predicted versus published: run every row of a measurement file gpuplan can express.

A measurement file has the columns of the project's `published.csv` (id, category, source,
source_ref, model, params_b, gpu, num_gpus, precision, task, seq_len, batch, extra_config,
metric, value, unit, notes; semicolons inside fields), which describe each setup in prose, and
may have the explicit columns (workload, model_config, measure, skip_reason:
planner/validation_columns.py) that spell out what gpuplan predicts. Every bundled row has them;
a row without them is read from its prose (planner/validation_prose.py). What a row measured
decides what is compared: `torch.cuda.max_memory_allocated` (the default for PyTorch trackers), the
allocator's reserved peak, or the whole device as nvidia-smi/NVML shows it. Rows that cannot be
expressed are listed with the reason; none is special-cased.
"""

from __future__ import annotations

import re
import statistics
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import Any, Final

from gpuplan.errors import GpuplanError, InvalidSettingError
from gpuplan.estimators.memory import estimate_memory
from gpuplan.planner.measured import PREFIX, is_measured
from gpuplan.planner.validation_columns import Reading, Row, explicit_reading, gpu_of, is_fit_verdict, model_of
from gpuplan.planner.validation_perf import SPEED_CATEGORIES, predict_speed
from gpuplan.planner.validation_prose import prose_reading
from gpuplan.planner.validation_stacks import STACK_FILES
from gpuplan.safeio import read_csv
from gpuplan.specs.gpu import Catalog
from gpuplan.specs.workload import make_workload, read_user_text

COLUMNS: Final = (
    "id",
    "category",
    "source",
    "source_ref",
    "model",
    "params_b",
    "gpu",
    "num_gpus",
    "precision",
    "task",
    "seq_len",
    "batch",
    "extra_config",
    "metric",
    "value",
    "unit",
    "notes",
)
BUNDLED_FILES: Final = ("published.csv", "memory-more.csv", "perf-more.csv", "multinode.csv")
# and every bundled measured-*.csv: our own runs on a lent GPU (planner/measured.py), a category each

_UNITS: Final = {"gb": 1e9, "gib": 2**30, "mb": 1e6, "mib": 2**20, "tb": 1e12, "bytes": 1.0, "b": 1.0}


@dataclass(frozen=True)
class Result:
    id: str
    category: str
    metric: str
    predicted: float
    published: float
    error: float  # signed fraction (predicted - published) / published; fit verdicts: 0 or +-1
    unit: str
    measured_as: str
    workload: dict[str, Any]
    dominant: str  # the largest term of the prediction, to say what a miss is made of
    kind: str = ""  # what was predicted, on which architecture (e.g. "decode/Hopper"): error bars group by it


@dataclass(frozen=True)
class Skipped:
    id: str
    category: str
    reason: str


def read_rows(text: str, origin: str) -> list[Row]:
    header, rows = read_csv(text, origin)  # a field over 128 KB, a row with extra fields: one line
    missing = [c for c in ("id", "category", "model", "metric", "value") if c not in header]
    if missing:
        raise InvalidSettingError(
            f"{origin}: not a measurement file: missing column(s) {', '.join(missing)}. Expected: {', '.join(COLUMNS)}."
        )
    return [Row({k: v.strip() for k, v in r.items()}) for _, r in rows]


def bundled_rows() -> list[Row]:
    rows: list[Row] = []
    base = resources.files("gpuplan") / "data" / "validation"
    for name in (*BUNDLED_FILES, *measured_files(base)):
        rows += read_rows((base / name).read_text(encoding="utf-8"), name)
    return rows


def measured_files(base: Traversable) -> list[str]:
    """The measured-*.csv files in a folder: our own runs, bundled as they are committed."""
    return sorted(f.name for f in base.iterdir() if f.name.startswith(PREFIX) and f.name.endswith(".csv"))


def stack_rows() -> list[Row]:
    """The everyday-stacks rows (planner/validation_stacks.py): their own file, with a `stack` and a
    `split` column; apart from bundled_rows so the vendor files' figures stay as they were."""
    base = resources.files("gpuplan") / "data" / "validation"
    rows: list[Row] = []
    for name in STACK_FILES:
        rows += read_rows((base / name).read_text(encoding="utf-8"), name)
    return rows


def file_rows(path: str | Path) -> list[Row]:
    p = Path(path)
    return read_rows(read_user_text(p, "measurement file"), p.name)


def _value_bytes(row: Row) -> float:
    unit = row["unit"].strip().lower().split()[0] if row["unit"].strip() else ""
    unit = unit.split("/")[0]
    if unit not in _UNITS:
        raise InvalidSettingError(f"unit {row['unit']!r} is not a memory unit")
    return float(row["value"]) * _UNITS[unit]


# --- running ----------------------------------------------------------------------------------


def reading(row: Row, compared: str, catalog: Catalog) -> Reading:
    """The row's explicit columns, else its prose read by the converter ("memory" or a speed
    category: `compared`). Raises where the row cannot be expressed."""
    explicit = explicit_reading(row)
    return explicit if explicit is not None else prose_reading(row, compared, catalog)


def run_rows(rows: Iterable[Row], catalog: Catalog) -> tuple[list[Result], list[Skipped]]:
    results: list[Result] = []
    skipped: list[Skipped] = []
    for row in rows:
        compared = compared_as(row)
        if compared in SPEED_CATEGORIES:
            out: Result | Skipped = _speed_row(row, compared, catalog)
        elif compared == "memory":
            out = _memory_row(row, catalog)
        else:
            out = Skipped(row["id"], row["category"], f"category {row['category']!r} is not one gpuplan predicts")
        if isinstance(out, Result):
            results.append(out)
        else:
            skipped.append(out)
    return results, skipped


def _memory_row(row: Row, catalog: Catalog) -> Result | Skipped:
    rid, cat = row["id"], row["category"]
    try:
        read = reading(row, "memory", catalog)
        model = model_of(read)
        gpu = gpu_of(read, catalog)
        wl = dict(read.workload)
        est = estimate_memory(model, make_workload(wl), gpu)
    except (GpuplanError, ValueError) as exc:
        return Skipped(rid, cat, str(exc).rstrip("."))
    biggest = max(est.lines, key=lambda x: x.bytes)
    dominant = f"{biggest.name} ({biggest.bytes / max(est.per_gpu_bytes, 1):.0%})"
    kind = f"memory/{gpu.architecture}"
    if is_fit_verdict(row):
        published = float(row["value"])
        predicted = 1.0 if est.fits else 0.0
        return Result(rid, cat, row["metric"], predicted, published, predicted - published, "fits", "device", wl,
                      dominant, kind)  # fmt: skip
    try:
        published = _value_bytes(row)
    except (InvalidSettingError, ValueError) as exc:
        return Skipped(rid, cat, str(exc).rstrip("."))
    how = str(read.measure.get("measured_as", "allocated"))
    predicted = {"allocated": est.allocated_bytes, "reserved": est.reserved_bytes, "device": est.per_gpu_bytes}[how]
    err = (predicted - published) / published
    return Result(rid, cat, row["metric"], predicted, published, err, "bytes", how, wl, dominant, kind)


def compared_as(row: Row) -> str:
    """The category whose comparison a row gets: its own, or for our measurements (measured-*) memory
    for a memory figure or fit verdict, else training throughput or inference by the row's task."""
    cat = row["category"]
    if not is_measured(cat):
        return cat
    unit = (row["unit"].strip().lower().split() or [""])[0]
    if unit in _UNITS or unit.startswith("boolean") or "fits" in row["metric"].lower():
        return "memory"
    return (
        "inference"
        if re.search(r"inference|generat|decode|prefill", row["task"], re.IGNORECASE)
        else "train_throughput"
    )


def _speed_row(row: Row, compared: str, catalog: Catalog) -> Result | Skipped:
    rid, cat = row["id"], row["category"]
    try:
        published = float(row["value"])
        read = reading(row, compared, catalog)
        model = model_of(read)
        gpu = gpu_of(read, catalog)
        pred = predict_speed({**row.fields, "category": compared}, read, model, gpu)
    except (GpuplanError, ValueError, KeyError) as exc:
        return Skipped(rid, cat, str(exc).rstrip("."))
    err = (pred.predicted - published) / published if published else 0.0
    return Result(rid, cat, row["metric"], pred.predicted, published, err, row["unit"], "speed", pred.workload,
                  pred.dominant, pred.kind)  # fmt: skip


def summary(results: Iterable[Result]) -> dict[str, dict[str, float]]:
    """Per category: n, median and mean absolute error (fit verdicts counted apart)."""
    groups: dict[str, list[float]] = {}
    for r in results:
        key = r.category if r.unit != "fits" else f"{r.category} (fit verdicts)"
        if is_measured(r.category) and r.unit != "fits":
            # our own runs: memory and time apart (their targets differ: 5% and 15% median error)
            key = f"{r.category} ({'memory' if r.unit == 'bytes' else 'time'})"
        groups.setdefault(key, []).append(abs(r.error))
    out: dict[str, dict[str, float]] = {}
    for key, errs in groups.items():
        out[key] = {
            "n": len(errs),
            "median_abs_error": statistics.median(errs),
            "mean_abs_error": statistics.fmean(errs),
        }
    return out


def summary_by_kind(results: Iterable[Result]) -> dict[str, dict[str, float]]:
    """Per kind of figure (what was predicted, model family, architecture): n, median and mean
    absolute error, and the median signed error (the bias)."""
    groups: dict[str, list[float]] = {}
    for r in results:
        if r.unit != "fits" and r.kind:
            groups.setdefault(r.kind, []).append(r.error)
    return {
        k: {
            "n": len(v),
            "median_abs_error": statistics.median(abs(e) for e in v),
            "mean_abs_error": statistics.fmean(abs(e) for e in v),
            "median_error": statistics.median(v),
        }
        for k, v in sorted(groups.items())
    }


def result_record(r: Result) -> Mapping[str, Any]:
    return {
        "id": r.id,
        "category": r.category,
        "metric": r.metric,
        "predicted": r.predicted,
        "published": r.published,
        "error": r.error,
        "unit": r.unit,
        "measured_as": r.measured_as,
        "dominant": r.dominant,
        "kind": r.kind,
        "workload": r.workload,
    }
