"""Hourly GPU rental prices: a dated, sourced snapshot shipped as data (data/prices/gpu-prices.csv).

Each row names the GPU as the catalog does (a parenthetical or "16GB/32GB" is allowed), the
provider and offer (on-demand or spot), the price per GPU-hour in USD, the catalog version it was
read from, and the source. Rows for accelerators the catalog lacks (TPUs) are kept in the
file and skipped here. Prices drift; `price_per_hour` takes the cheapest on-demand offer.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Final

from gpuplan.errors import InvalidSettingError, UnknownGPUError
from gpuplan.safeio import clip_repr, read_csv
from gpuplan.specs.gpu import GPU, Catalog
from gpuplan.specs.workload import read_user_text


@dataclass(frozen=True)
class Price:
    gpu: str  # catalog name
    provider: str
    usd_per_hour: float
    spot: bool
    version: str
    source: str


def _names(raw: str, catalog: Catalog) -> list[str]:
    base = re.sub(r"\(.*?\)", "", raw).strip()
    m = re.fullmatch(r"(.*?)(\d+GB)/(\d+GB)", base)
    cands = [f"{m.group(1)}{m.group(2)}", f"{m.group(1)}{m.group(3)}"] if m else [base]
    out = []
    for c in cands:
        g = catalog.find(c)
        if g is not None:
            out.append(g.name)
    return out


@lru_cache(maxsize=1)
def _rows_text() -> str:
    return (resources.files("gpuplan") / "data" / "prices" / "gpu-prices.csv").read_text(encoding="utf-8")


# A rental price is per GPU-hour: the dearest listing in the bundled snapshot is a few tens of USD
# (8-GPU nodes are divided by 8 there); a thousand is beyond any offer, and keeps a typo (a node
# price, a price in cents) or a NaN/inf from reaching the cost arithmetic.
MAX_USD_PER_GPU_HOUR: Final = 1_000
PRICE_COLUMNS: Final = ("gpu", "provider", "price_per_hour_usd", "date_or_version", "source")


def _parse(text: str, catalog: Catalog, origin: str, strict: bool) -> list[Price]:
    header, rows = read_csv(text, origin)  # a field over 128 KB, a row with extra fields: one line
    missing = [c for c in ("gpu", "price_per_hour_usd") if c not in header]
    if missing:
        raise InvalidSettingError(
            f"{origin}: not a price file: missing column(s) {', '.join(missing)}. Columns: {', '.join(PRICE_COLUMNS)}."
        )
    out: list[Price] = []
    for i, r in rows:
        try:
            usd = float(r["price_per_hour_usd"])
        except (TypeError, ValueError):
            if strict:
                raise InvalidSettingError(
                    f"{origin} line {i}: price_per_hour_usd {clip_repr(r['price_per_hour_usd'])} is not a number."
                ) from None
            continue
        if not (math.isfinite(usd) and 0 <= usd <= MAX_USD_PER_GPU_HOUR):
            if strict:
                raise InvalidSettingError(
                    f"{origin} line {i}: price_per_hour_usd {clip_repr(r['price_per_hour_usd'])} must be a finite number "
                    f"from 0 to {MAX_USD_PER_GPU_HOUR:,} (USD per GPU-hour)."
                )
            continue
        names = _names(r["gpu"] or "", catalog)
        if strict and not names:
            raise UnknownGPUError(
                f"{origin} line {i}: GPU {clip_repr(r['gpu'])} is not in the catalog (see `gpuplan gpus`)."
            )
        provider = r.get("provider") or "user price"
        for name in names:
            out.append(
                Price(
                    name,
                    provider,
                    usd,
                    bool(re.search(r"\bspot\b", provider, re.IGNORECASE)),
                    r.get("date_or_version") or "",
                    r.get("source") or origin,
                )
            )
    return out


def load_prices(catalog: Catalog) -> list[Price]:
    return _parse(_rows_text(), catalog, "gpu-prices.csv", strict=False)


def load_price_file(path: Path, catalog: Catalog) -> list[Price]:
    """A user's price file (the bundled file's columns): every row must name a catalog GPU."""
    return _parse(read_user_text(path, "price file"), catalog, path.name, strict=True)


def cheapest_prices(catalog: Catalog, *, spot: bool = False) -> dict[str, Price]:
    """The cheapest listed offer per catalog GPU name (on-demand unless `spot`)."""
    best: dict[str, Price] = {}
    for p in load_prices(catalog):
        if p.spot == spot and (p.gpu not in best or p.usd_per_hour < best[p.gpu].usd_per_hour):
            best[p.gpu] = p
    return best


def price_per_hour(gpu: GPU, catalog: Catalog, *, spot: bool = False) -> Price | None:
    """The cheapest listed offer for `gpu` (on-demand unless `spot`), or None if none is listed."""
    return cheapest_prices(catalog, spot=spot).get(gpu.name)


# what a job on the user's own GPUs costs in plans (estimators/ownership.py own_power_cost)
OWN_POWER: Final = "electricity only, GPU energy x the EIA 2022 US commercial average price"
