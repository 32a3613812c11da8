"""Rental prices: every listed catalog GPU resolves, offers keep their source."""

from __future__ import annotations

import pytest

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


def test_v100_32gb_priced_from_its_own_listing(catalog: Catalog) -> None:
    """A 32 GB V100 is priced from a 32 GB listing (AWS p3dn.24xlarge, 8 x V100 32GB, $31.212/h in
    us-east-1 in the skypilot-catalog snapshot), never from a 16 GB one (Lambda gpu_8x_v100, GCP V100)."""
    rows = [p for p in load_prices(catalog) if p.gpu == "V100 SXM2 32GB"]
    assert rows and all("p3dn.24xlarge" in p.provider and "32GB" in p.provider for p in rows)
    on_demand = price_per_hour(catalog.get("V100 SXM2 32GB"), catalog)
    assert on_demand is not None and on_demand.usd_per_hour == pytest.approx(31.212 / 8, abs=1e-4)
    sixteen = price_per_hour(catalog.get("V100 SXM2 16GB"), catalog)
    assert sixteen is not None and sixteen.usd_per_hour == pytest.approx(4.4 / 8)  # Lambda gpu_8x_v100
    assert all("16GB" in p.provider for p in load_prices(catalog) if p.gpu == "V100 SXM2 16GB")
