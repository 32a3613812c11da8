"""Fill the explicit columns (workload, model_config, measure, skip_reason) of the bundled
measurement files from their prose, with the converter a user's file is read by
(planner/validation_prose.py). Run once to add them, and again after adding or editing a row:
every other byte of a file is kept (its line ends, its quoting), and tests/test_validation_columns.py
fails while a row's columns and its prose disagree.

Run: .venv/bin/python bench/fill_validation_columns.py [FILE.csv ...] (default: the bundled files).
"""

from __future__ import annotations

import argparse
import csv
import io
from pathlib import Path

from gpuplan.errors import GpuplanError
from gpuplan.planner.validation import BUNDLED_FILES, compared_as
from gpuplan.planner.validation_columns import EXPLICIT_COLUMNS, Row, columns_of
from gpuplan.planner.validation_perf import SPEED_CATEGORIES
from gpuplan.planner.validation_prose import prose_reading
from gpuplan.specs.gpu import Catalog, bundled_catalog

DATA = Path(__file__).resolve().parents[1] / "src" / "gpuplan" / "data" / "validation"


def row_columns(row: Row, catalog: Catalog) -> dict[str, str]:
    """A row's explicit columns as the converter reads its prose (a row it cannot express: the reason)."""
    compared = compared_as(row)
    if compared != "memory" and compared not in SPEED_CATEGORIES:
        raise SystemExit(f"{row['id']}: category {row['category']!r} is not one gpuplan predicts")
    try:
        return columns_of(prose_reading(row, compared, catalog))
    except (GpuplanError, ValueError, KeyError) as exc:
        return columns_of(None, str(exc).rstrip("."))


def fill(path: Path, catalog: Catalog) -> tuple[int, int]:
    """(rows, rows skipped) after writing the file's columns in place."""
    text = path.read_bytes().decode("utf-8")  # as it is: read_text would turn CRLF into LF
    newline = "\r\n" if "\r\n" in text else "\n"
    header, *body = list(csv.reader(io.StringIO(text, newline="")))
    prose_cols = [c for c in header if c not in EXPLICIT_COLUMNS]
    out = [prose_cols + list(EXPLICIT_COLUMNS)]
    skipped = 0
    for cells in body:
        fields = dict(zip(header, cells, strict=True))
        cols = row_columns(Row({k: fields[k].strip() for k in prose_cols}), catalog)
        skipped += bool(cols["skip_reason"])
        out.append([fields[k] for k in prose_cols] + [cols[k] for k in EXPLICIT_COLUMNS])
    buf = io.StringIO(newline="")
    csv.writer(buf, lineterminator=newline).writerows(out)
    path.write_bytes(buf.getvalue().encode("utf-8"))
    return len(body), skipped


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("files", nargs="*", type=Path, default=[DATA / n for n in BUNDLED_FILES])
    catalog = bundled_catalog()
    for path in ap.parse_args().files:
        n, skipped = fill(path, catalog)
        print(f"{path.name}: {n} rows, {skipped} with a skip reason")


if __name__ == "__main__":
    main()
