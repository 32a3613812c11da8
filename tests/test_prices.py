"""Rental prices: every listed catalog GPU resolves, offers keep their source."""

from __future__ import annotations

from gpuplan.specs.gpu import Catalog
from gpuplan.specs.prices import load_prices, price_per_hour


def test_prices_resolve_to_catalog_names(catalog: Catalog) -> None:
    prices = load_prices(catalog)
    assert len(prices) >= 55  # 66 rows, TPU/Quadro RTX 6000 rows have no catalog GPU
    assert all(p.usd_per_hour > 0 and p.source and p.version for p in prices)
    names = {p.gpu for p in prices}
    assert {"V100 SXM2 16GB", "V100 SXM2 32GB", "B200", "A10G", "L4", "H100 SXM5 80GB"} <= names


def test_cheapest_on_demand_and_spot(catalog: Catalog) -> None:
    h100 = price_per_hour(catalog.get("H100"), catalog)
    assert h100 is not None and h100.usd_per_hour == 2.99 and not h100.spot  # Lambda 8x and RunPod list 2.99
    spot = price_per_hour(catalog.get("H100"), catalog, spot=True)
    assert spot is not None and spot.usd_per_hour == 2.253  # GCP spot us-central1
    assert price_per_hour(catalog.get("L40S"), catalog).usd_per_hour == 0.86  # type: ignore[union-attr]
    assert price_per_hour(catalog.get("MI300X"), catalog) is None
