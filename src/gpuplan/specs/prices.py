"""Hourly GPU rental prices: a dated, sourced snapshot shipped as data (data/prices/gpu-prices.csv).

Each row names the GPU as the catalog does (a parenthetical or "16GB/32GB" is allowed), the
provider and offer (on-demand or spot), the price per GPU-hour in USD, the catalog version it was
read from, and the source. Rows for accelerators the catalog lacks (TPUs, GH200) are kept in the
file and skipped here. Prices drift; `price_per_hour` takes the cheapest on-demand offer.
"""

from __future__ import annotations

import csv
import io
import re
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources

from gpuplan.specs.gpu import GPU, Catalog


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


def load_prices(catalog: Catalog) -> list[Price]:
    out: list[Price] = []
    for r in csv.DictReader(io.StringIO(_rows_text())):
        try:
            usd = float(r["price_per_hour_usd"])
        except (TypeError, ValueError):
            continue
        for name in _names(r["gpu"], catalog):
            out.append(
                Price(
                    name,
                    r["provider"],
                    usd,
                    bool(re.search(r"\bspot\b", r["provider"], re.IGNORECASE)),
                    r["date_or_version"],
                    r["source"],
                )
            )
    return out


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
