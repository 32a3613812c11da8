"""Typed answer of `rent-vs-buy`: owning one GPU against renting it (USD, hours, watts, kWh)."""

from __future__ import annotations

from dataclasses import dataclass

from gpuplan.results.base import Result


@dataclass(frozen=True, kw_only=True)
class Purchase(Result):
    usd: float
    kind: str  # "user" (--price), or the price list's kind (street, list, used)
    date: str | None
    source: str


@dataclass(frozen=True, kw_only=True)
class OwnBreakdown(Result):
    purchase_usd: float
    hosting_usd: float
    electricity_usd: float
    resale_usd: float  # negative: money back at the end


@dataclass(frozen=True, kw_only=True)
class Owning(Result):
    total_usd: float
    usd_per_year: float
    usd_per_used_hour: float | None
    used_hours: float
    breakdown: OwnBreakdown
    energy_kwh: float


@dataclass(frozen=True, kw_only=True)
class RentOffer(Result):
    """Renting the same GPU-hours at one offer, and where buying overtakes it."""

    usd_per_hour: float
    price_source: str
    total_usd: float
    usd_per_year: float
    break_even_hours_per_month: float | None  # None: rent costs less than the electricity alone
    break_even_share_of_month: float | None
    break_even_reachable: bool
    payback_months: float | None
    cheaper: str  # "buy" or "rent"


@dataclass(frozen=True, kw_only=True)
class OwnSettings(Result):
    board_power_w: float
    pue: float
    usd_per_kwh: float
    electricity_usd_per_hour: float
    hosting_usd_per_month: float
    resale_fraction: float


@dataclass(frozen=True, kw_only=True)
class RentVsBuy(Result):
    """`gpuplan rent-vs-buy`: the cost of owning one card for `years` at `hours_per_month`, against
    renting on demand and on spot (None where no price is listed)."""

    gpu: str
    hours_per_month: float
    years: float
    purchase: Purchase
    own: Owning
    rent: dict[str, RentOffer | None]  # "on_demand", "spot"
    settings: OwnSettings
    basis: dict[str, str]  # where each setting comes from, and what is not counted
