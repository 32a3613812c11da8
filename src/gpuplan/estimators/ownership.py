"""Owning one GPU against renting it: total cost of ownership, break-even use, payback.

Owning one GPU for N years (M = 12 N months), used h GPU-hours a month, costs

    own(h) = purchase + hosting x M + electricity_per_hour x h x M - resale
    electricity_per_hour = board power (W) / 1000 x PUE x USD/kWh

and renting the same hours costs rent(h) = price_per_hour x h x M. Both are straight lines in h, so
they cross once, at the break-even use

    h* = (purchase - resale + hosting x M) / (M x (price_per_hour - electricity_per_hour)),

above which buying is cheaper (none when the rent does not even cover the electricity). At a given
h the payback is the months of use until the rent saved, less electricity and hosting, repays the
purchase less its resale at the end of the horizon: (purchase - resale) / (h x (price - electricity)
- hosting). At h = h* it equals M.

Every default below is a named constant with its source. Not counted: the host's own power (CPU,
memory, fans; `hosting` covers the host's parts only), staff time, space rent, the cost of capital,
the draw of an idle GPU between jobs, and the rental side's storage and egress charges.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Final

from gpuplan.errors import InvalidSettingError
from gpuplan.estimators.cost import CostEnergy, power_w
from gpuplan.specs.gpu import GPU
from gpuplan.specs.prices import OWN_POWER

MAX_HOURS_PER_MONTH: Final = 31 * 24.0  # the longest month: 744 h
AVG_HOURS_PER_MONTH: Final = 365.25 * 24.0 / 12.0  # 730.5 h: what "share of the month" divides by
MAX_YEARS: Final = 20.0  # beyond any GPU's service life; a guard against typos
MIN_YEARS: Final = 1.0 / 365.0  # one day: a shorter horizon is no ownership question (and 1/years overflows)

# PUE (facility power / IT power). Uptime Institute's industry average from its annual Global Data
# Center Survey: "In 2023, industry average PUE stood at 1.58" ("Large data centers are mostly more
# efficient, analysis confirms", Uptime Intelligence update 221, 2023-11-23,
# https://intelligence.uptimeinstitute.com/resource/large-data-centers-are-mostly-more-efficient-analysis-confirms;
# 1.55-1.59 since 2020). gpuplan takes it because a department's server room is the kind of small,
# older site that holds that average up; a workstation under a desk has no cooling plant (PUE ~1.0)
# and a hyperscale hall runs 1.1-1.2: pass --pue. The higher default makes owning look dearer, not cheaper.
DEFAULT_PUE: Final = 1.58

# USD per kWh: the US commercial-sector average price for 2022, revenue / sales from the EIA's
# Electric Power Monthly: Table 5.2 (release 2023-03-24, https://www.eia.gov/electricity/monthly/epm_table_grapher.php?t=epmt_5_2)
# gives commercial revenue $172,257 million; Table 5.1 (release 2024-08-23,
# http://www.eia.gov/electricity/monthly/epm_table_grapher.cfm?t=epmt_5_1) gives commercial sales
# 1,390,873 thousand MWh. 172,257e6 USD / 1,390,873e6 kWh = 0.1238 USD/kWh. States range from
# 7.4 (North Dakota) to 39 (Hawaii) cents in EIA's Electric Power Annual 2023: pass --usd-per-kwh.
DEFAULT_USD_PER_KWH: Final = 172_257e6 / 1_390_873e6

# The host a GPU sits in, per GPU slot: the CPUs ($8,477), DRAM ($4,932) and NVMe SSD ($1,350.55)
# of an 8-GPU server like AWS p4d.24xlarge, priced from Intel ARK, memory.net and Newegg in
# edwinlim0919/sustainable-deep-learning nvidia-gpu/tensorrt-llm/plotting/cost_data.py
# (commit 067bba1b, 2024-06-24): $14,759.55 / 8 GPUs = $1,845 per slot, spread over a 3-year server
# life (the default horizon) = $51.25 a month. Chassis, power supplies and network are not in it,
# so it is a floor; a colocation rack or a university's recharge rate goes in --hosting-usd-per-month.
HOST_USD_PER_GPU_SLOT: Final = (8_477.00 + 4_932.00 + 1_350.55) / 8
HOST_LIFE_MONTHS: Final = 36.0
DEFAULT_HOSTING_USD_PER_MONTH: Final = HOST_USD_PER_GPU_SLOT / HOST_LIFE_MONTHS

# A GeForce card (its driver licence bars datacenter deployment: the catalog's geforce_eula) sits in a
# desk-side workstation, and gets a workstation's defaults. PUE is total facility power / IT equipment
# power (The Green Grid, White Paper 49, "PUE: a comprehensive examination of the metric", 2012); a
# desktop has no cooling or power plant of its own to add to its draw, so 1.0 (the room's air
# conditioning is not counted, as for a server room's share of a building's).
WORKSTATION_PUE: Final = 1.0
# Its host: every part but the card of a one-GPU deep-learning desktop, priced on PCPartPicker on
# 2016-09-30 (i5-6600K, cooler, Z170 board, 32 GB DDR4, 500 GB SSD, case, 850 W PSU, DVD and Wi-Fi:
# $1,672.25 less the GTX 1080's $699.99 = $972.26; deeplearningathome.com/2016/09/Building-PC-For-Deep-Learning-Hardware.html).
# A 2019 three-GPU build agrees per slot: ($6,200 - $3,570 of RTX 2080 Ti) / 3 = $877
# (l7.curtisnorthcutt.com/build-pro-deep-learning-workstation). Spread over the same 3-year life.
WORKSTATION_HOST_USD: Final = 1_672.25 - 699.99
WORKSTATION_HOSTING_USD_PER_MONTH: Final = WORKSTATION_HOST_USD / HOST_LIFE_MONTHS  # $27.01

# Resale: straight-line depreciation to zero over 6 years, the useful life CoreWeave's S-1 gives its
# "technology equipment" including NVIDIA GPUs (Bizety, "GPU depreciation: CoreWeave vs Nebius",
# 2025-09-23, https://bizety.com/2025/09/23/gpu-depreciation-coreweave-vs-nebius; Nebius uses 4
# years). So a card sold after 3 years fetches 50% of its price. Used-market prices sit at or above
# that line: ChipVERSUS average prices against MSRP give GeForce RTX 3090 Ti $1,100 of $1,999 (55%
# after ~3.5 years), RTX A6000 $3,500 of $4,649 (75% after ~5 years), Tesla T4 $1,000 of $1,880
# (53% after ~7 years), but Quadro RTX 6000 $1,800 of $6,300 (29%); https://chipversus.com/hardware/gpu/l4.
GPU_BOOK_LIFE_YEARS: Final = 6.0

# Power while a job runs: the board limit (TDP). Training holds a GPU near it (an 8x H100 node peaked
# at ~8.4 kW of its 10.2 kW rating, arXiv 2506.14551; see estimators/cost.py).
TRAINING_BUSY_SHARE: Final = 1.0

# One line per default, for the JSON and the table (the comments above hold the full sources).
BASIS: Final = {
    "board_power_w": "the GPU's TDP from the catalog: training holds a GPU near its board limit",
    "pue": "Uptime Institute's 2023 industry-average data-centre PUE, 1.58 (a desk-side workstation: ~1.0)",
    "usd_per_kwh": "US commercial-sector average 2022, EIA Electric Power Monthly tables 5.1 and 5.2",
    "hosting_usd_per_month": "CPUs, DRAM and SSD of an 8-GPU server per GPU slot ($1,845) over a 3-year life",
    "resale_fraction": "straight-line depreciation over 6 years (the GPU useful life in CoreWeave's S-1)",
}
# A GeForce card's defaults where they differ (above): a workstation, with the server's figures to pass
WORKSTATION_BASIS: Final = {
    "pue": "no cooling plant at a desk, 1.0 (a server room: --pue 1.58)",
    "hosting_usd_per_month": "a one-GPU desktop's other parts ($972) over 3 years (a server slot: --hosting-usd-per-month 51.25)",
}
HOST_BASIS: Final = {
    False: "a server in a data centre",
    True: "a desk-side workstation (GeForce: its driver licence bars data centres)",
}
NOT_COUNTED: Final = "host power, staff time, space rent, cost of capital, idle draw, cloud storage and egress"


def host_defaults(workstation: bool) -> tuple[float, float, dict[str, str]]:
    """(PUE, hosting USD a month, basis lines) for a card in a workstation (GeForce) or a server."""
    if workstation:
        return WORKSTATION_PUE, WORKSTATION_HOSTING_USD_PER_MONTH, {**BASIS, **WORKSTATION_BASIS}
    return DEFAULT_PUE, DEFAULT_HOSTING_USD_PER_MONTH, dict(BASIS)


def default_resale_fraction(years: float) -> float:
    """Share of the purchase price a card fetches after `years`: straight line over GPU_BOOK_LIFE_YEARS."""
    return max(0.0, 1.0 - years / GPU_BOOK_LIFE_YEARS)


def board_power_w(gpu: GPU) -> float:
    """Watts one GPU draws while a training job runs (estimators.cost.power_w at full load: its TDP)."""
    return power_w(gpu, TRAINING_BUSY_SHARE)


@dataclass(frozen=True)
class Ownership:
    """Owning one GPU: plain values in USD, hours and watts."""

    purchase_usd: float
    years: float
    hours_per_month: float  # GPU-hours used a month, 0-744
    board_power_w: float  # while in use
    pue: float = DEFAULT_PUE
    usd_per_kwh: float = DEFAULT_USD_PER_KWH
    hosting_usd_per_month: float = DEFAULT_HOSTING_USD_PER_MONTH
    resale_fraction: float | None = None  # None: default_resale_fraction(years)

    @property
    def months(self) -> float:
        return 12.0 * self.years

    @property
    def resale(self) -> float:
        return default_resale_fraction(self.years) if self.resale_fraction is None else self.resale_fraction


def _check(name: str, value: float, low: float, high: float, what: str, low_open: bool = False) -> None:
    ok = math.isfinite(value) and (value > low if low_open else value >= low) and value <= high
    if not ok:
        bound = f"above {low:g}" if low_open else f"at least {low:g}"
        raise InvalidSettingError(
            f"The '{name}' parameter must be {bound} and at most {high:,.10g} {what}. Got {value:g} instead."
        )


def check_ownership(o: Ownership) -> None:
    """One InvalidSettingError line, naming the parameter, its range and the value, for a bad setting."""
    _check("price", o.purchase_usd, 0, 1e8, "USD", low_open=True)
    _check("years", o.years, MIN_YEARS, MAX_YEARS, "years (one day to 20 years)")
    _check("hours_per_month", o.hours_per_month, 0, MAX_HOURS_PER_MONTH, "GPU-hours (31 days x 24 h)")
    _check("board_power_w", o.board_power_w, 0, 1e5, "W", low_open=True)
    _check("pue", o.pue, 1.0, 3.0, "(facility power / IT power)")
    _check("usd_per_kwh", o.usd_per_kwh, 0, 10.0, "USD/kWh")
    _check("hosting_usd_per_month", o.hosting_usd_per_month, 0, 1e6, "USD a month")
    if o.resale_fraction is not None:
        _check("resale_fraction", o.resale_fraction, 0, 1.0, "(share of the purchase price)")


def check_rent(usd_per_hour: float, name: str = "rent_usd_per_hour") -> None:
    _check(name, usd_per_hour, 0, 1e4, "USD per GPU-hour", low_open=True)


def electricity_usd_per_hour(o: Ownership) -> float:
    """USD of electricity per GPU-hour used: board power x PUE x price."""
    return o.board_power_w / 1000.0 * o.pue * o.usd_per_kwh


@dataclass(frozen=True)
class OwnershipCost:
    """What owning costs over the horizon, term by term (USD; resale is a credit)."""

    purchase_usd: float
    hosting_usd: float
    electricity_usd: float
    energy_kwh: float  # at the wall: GPU energy x PUE
    resale_usd: float
    total_usd: float
    usd_per_year: float
    usd_per_used_hour: float | None  # None when no hours are used
    used_hours: float


def _ratio(num: float, den: float) -> float | None:
    """num / den, or None where den is not positive or the quotient overflows (a vanishing use or
    margin: no finite break-even or per-hour figure exists)."""
    if den <= 0:
        return None
    q = num / den
    return q if math.isfinite(q) else None


def ownership_cost(o: Ownership) -> OwnershipCost:
    check_ownership(o)
    used = o.hours_per_month * o.months
    kwh = o.board_power_w / 1000.0 * o.pue * used
    electricity = kwh * o.usd_per_kwh
    hosting = o.hosting_usd_per_month * o.months
    resale = o.resale * o.purchase_usd
    total = o.purchase_usd + hosting + electricity - resale
    return OwnershipCost(
        purchase_usd=o.purchase_usd,
        hosting_usd=hosting,
        electricity_usd=electricity,
        energy_kwh=kwh,
        resale_usd=resale,
        total_usd=total,
        usd_per_year=total / o.years,
        usd_per_used_hour=_ratio(total, used),
        used_hours=used,
    )


def rental_cost(usd_per_hour: float, hours_per_month: float, years: float) -> float:
    """USD to rent the same GPU-hours over the horizon."""
    return usd_per_hour * hours_per_month * 12.0 * years


def break_even_hours_per_month(o: Ownership, rent_usd_per_hour: float) -> float | None:
    """GPU-hours a month above which owning costs less than renting; None if the rent never covers
    the electricity (renting is then cheaper at any use). May exceed 744: then it is never reached."""
    check_ownership(o)
    check_rent(rent_usd_per_hour)
    margin = rent_usd_per_hour - electricity_usd_per_hour(o)
    if margin <= 0:
        return None
    fixed = o.purchase_usd * (1.0 - o.resale) + o.hosting_usd_per_month * o.months
    return _ratio(fixed, o.months * margin)


def payback_months(o: Ownership, rent_usd_per_hour: float) -> float | None:
    """Months of use at o.hours_per_month until the rent saved repays the purchase less its resale;
    None when owning saves nothing a month (the rent saved does not cover electricity and hosting)."""
    check_ownership(o)
    check_rent(rent_usd_per_hour)
    saving = o.hours_per_month * (rent_usd_per_hour - electricity_usd_per_hour(o)) - o.hosting_usd_per_month
    if saving <= 0:
        return None
    return _ratio(o.purchase_usd * (1.0 - o.resale), saving)


@dataclass(frozen=True)
class RentComparison:
    usd_per_hour: float
    total_usd: float
    usd_per_year: float
    break_even_hours_per_month: float | None
    break_even_share_of_month: float | None  # of an average month (730.5 h)
    payback_months: float | None
    buy_is_cheaper: bool  # at o.hours_per_month over the horizon


def compare(o: Ownership, rent_usd_per_hour: float) -> RentComparison:
    """Renting the same hours at `rent_usd_per_hour` against owning `o`."""
    own = ownership_cost(o)
    total = rental_cost(rent_usd_per_hour, o.hours_per_month, o.years)
    h_star = break_even_hours_per_month(o, rent_usd_per_hour)
    return RentComparison(
        usd_per_hour=rent_usd_per_hour,
        total_usd=total,
        usd_per_year=total / o.years,
        break_even_hours_per_month=h_star,
        break_even_share_of_month=h_star / AVG_HOURS_PER_MONTH if h_star is not None else None,
        payback_months=payback_months(o, rent_usd_per_hour),
        buy_is_cheaper=own.total_usd < total,
    )


def own_power_cost(ce: CostEnergy, usd_per_kwh: float = DEFAULT_USD_PER_KWH) -> CostEnergy:
    """A job on GPUs the user already owns costs no rent: its cost is their electricity, the GPU
    energy of the estimate x `usd_per_kwh` (default: EIA 2022 US commercial average, above); the
    host, cooling (PUE) and the cards' purchase are left to `gpuplan rent-vs-buy`."""
    ratio = None if not ce.usd else ce.energy_kwh * usd_per_kwh / ce.usd
    return replace(
        ce,
        usd=ce.energy_kwh * usd_per_kwh,
        usd_per_gpu_hour=ce.avg_power_w / 1000 * usd_per_kwh,
        price_source=f"your own GPUs: {OWN_POWER} at ${usd_per_kwh:.3f}/kWh",
        usd_per_million_tokens=None if ratio is None or ce.usd_per_million_tokens is None
        else ce.usd_per_million_tokens * ratio,
    )  # fmt: skip
