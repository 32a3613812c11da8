"""What one GPU costs to buy: a dated, sourced table shipped as data (data/prices/purchase.csv).

The file documents its own format in its header comment: one row per GPU with the price in USD,
its kind (launch `msrp`, manufacturer `list`, or `street` price at a date), the date and the
source. Every row must name a catalog GPU; a malformed row is an error, for the bundled file as for
a user's own (same columns), whose rows replace the bundled ones for the GPUs they name.
"""

from __future__ import annotations

import csv
import datetime as dt
import io
import math
import re
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Final

from gpuplan.errors import InvalidSettingError, UnknownGPUError
from gpuplan.safeio import clip, clip_repr
from gpuplan.specs.gpu import Catalog
from gpuplan.specs.workload import read_user_text

PURCHASE_COLUMNS: Final = ("gpu", "price_usd", "kind", "date", "source")
PURCHASE_KINDS: Final = ("msrp", "list", "street")
_DATE = re.compile(r"\d{4}(-\d{2}(-\d{2})?)?")  # ISO 8601 at the source's precision
# One card's price: the dearest in the bundled table is a few tens of thousands of USD; 100
# million is rent-vs-buy's own --price bound (estimators/ownership.py), so a file and the option
# agree, and a typo or 1e300 is named by its line instead of failing later without one.
MAX_PRICE_USD: Final = 100_000_000


@dataclass(frozen=True)
class PurchasePrice:
    gpu: str  # catalog name
    usd: float  # one card
    kind: str  # msrp | list | street
    date: str  # YYYY, YYYY-MM or YYYY-MM-DD
    source: str
    origin: str  # the file it was read from


@lru_cache(maxsize=1)
def _bundled_text() -> str:
    return (resources.files("gpuplan") / "data" / "prices" / "purchase.csv").read_text(encoding="utf-8")


def _check_date(text: str, where: str) -> str:
    if not _DATE.fullmatch(text):
        raise InvalidSettingError(f"{where}: date {clip_repr(text)} is not ISO 8601 (YYYY, YYYY-MM or YYYY-MM-DD).")
    parts = [int(p) for p in text.split("-")] + [1, 1]
    try:
        dt.date(parts[0], parts[1], parts[2])
    except ValueError:
        raise InvalidSettingError(f"{where}: date {clip_repr(text)} is not a calendar date.") from None
    return text


def parse_purchase_prices(text: str, catalog: Catalog, origin: str) -> dict[str, PurchasePrice]:
    """Rows of a purchase-price file by catalog GPU name; any bad row is one InvalidSettingError line."""
    numbered = [(i, line) for i, line in enumerate(text.splitlines(), start=1) if line.strip()]
    numbered = [(i, line) for i, line in numbered if not line.lstrip().startswith("#")]
    if not numbered:
        raise InvalidSettingError(f"{origin}: no header line. Columns: {', '.join(PURCHASE_COLUMNS)}.")
    try:
        rows = list(csv.reader(io.StringIO("\n".join(line for _, line in numbered)), strict=True))
    except csv.Error as exc:
        hint = "" if "field limit" in str(exc) else "; a quoted field is not closed?"  # csv's 128 KB field cap
        raise InvalidSettingError(f"{origin}: not valid CSV ({clip(str(exc))}){hint}") from None
    if len(rows) != len(numbered):  # a quoted field ran over a line end
        raise InvalidSettingError(f"{origin}: a quoted field is not closed on its line; one row per line.")
    header = [h.strip() for h in rows[0]]
    missing = [c for c in PURCHASE_COLUMNS if c not in header]
    if missing:
        raise InvalidSettingError(
            f"{origin}: not a purchase-price file: missing column(s) {', '.join(missing)}. "
            f"Columns: {', '.join(PURCHASE_COLUMNS)}."
        )
    col = {name: header.index(name) for name in PURCHASE_COLUMNS}
    out: dict[str, PurchasePrice] = {}
    for (line_no, _), row in zip(numbered[1:], rows[1:], strict=True):
        where = f"{origin} line {line_no}"
        if len(row) != len(header):
            raise InvalidSettingError(f"{where}: {len(row)} fields, the header has {len(header)} (quote commas).")
        cell = {name: row[i].strip() for name, i in col.items()}
        gpu = catalog.find(cell["gpu"])
        if gpu is None:
            raise UnknownGPUError(f"{where}: GPU {clip_repr(cell['gpu'])} is not in the catalog (see `gpuplan gpus`).")
        try:
            usd = float(cell["price_usd"])
        except ValueError:
            raise InvalidSettingError(f"{where}: price_usd {clip_repr(cell['price_usd'])} is not a number.") from None
        if not (math.isfinite(usd) and 0 < usd <= MAX_PRICE_USD):
            raise InvalidSettingError(
                f"{where}: price_usd must be a positive number of US dollars, at most {MAX_PRICE_USD:,}. "
                f"Got {clip(cell['price_usd'])}."
            )
        if cell["kind"] not in PURCHASE_KINDS:
            raise InvalidSettingError(
                f"{where}: kind must be one of {', '.join(PURCHASE_KINDS)}. Got {clip_repr(cell['kind'])} instead."
            )
        if not cell["source"]:
            raise InvalidSettingError(f"{where}: the source is empty; say where the price comes from.")
        if gpu.name in out:
            raise InvalidSettingError(f"{where}: {gpu.name} is listed twice; keep one row per GPU.")
        date = _check_date(cell["date"], where)
        out[gpu.name] = PurchasePrice(gpu.name, usd, cell["kind"], date, cell["source"], origin)
    return out


def bundled_purchase_prices(catalog: Catalog) -> dict[str, PurchasePrice]:
    """The bundled table (purchase.csv), by catalog GPU name."""
    return parse_purchase_prices(_bundled_text(), catalog, "purchase.csv")


def purchase_prices(catalog: Catalog, user_file: Path | None = None) -> dict[str, PurchasePrice]:
    """The bundled table with a user's file (same columns) replacing the rows of the GPUs it names."""
    table = bundled_purchase_prices(catalog)
    if user_file is not None:
        text = read_user_text(user_file, "purchase-price file", f"Columns: {', '.join(PURCHASE_COLUMNS)}.")
        table.update(parse_purchase_prices(text, catalog, user_file.name))
    return table
