"""`rent-vs-buy`: owning a GPU against renting it, with the break-even use."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from gpuplan.errors import InvalidSettingError
from gpuplan.interfaces.api.catalog import catalog, context, prices
from gpuplan.results import OwnBreakdown, Owning, OwnSettings, Purchase, RentOffer, RentVsBuy
from gpuplan.specs.context import Context
from gpuplan.specs.gpu import GPU, Catalog

if TYPE_CHECKING:
    from gpuplan.estimators import ownership as ow


def _check_numbers(numbers: dict[str, float | None]) -> None:
    for name, value in numbers.items():
        if value is not None and (not isinstance(value, int | float) or isinstance(value, bool)):
            raise InvalidSettingError(f"The '{name}' parameter must be a number. Got {value!r} instead.")


def _purchase(gpu: GPU, cat: Catalog, price_usd: float | None, purchase_price_file: str | Path | None) -> Purchase:
    """The card's price: the caller's, else the bundled (or the user's) purchase-price list."""
    from gpuplan.specs.purchase import PURCHASE_COLUMNS, purchase_prices

    if price_usd is not None:
        return Purchase(usd=float(price_usd), kind="user", date=None, source="--price")
    table = purchase_prices(cat, Path(purchase_price_file) if purchase_price_file else None)
    row = table.get(gpu.name)
    if row is None:
        raise InvalidSettingError(
            f"No purchase price for {gpu.name} in purchase.csv. Pass --price USD, or --purchase-prices FILE "
            f"with columns {', '.join(PURCHASE_COLUMNS)}. Listed: {', '.join(sorted(table))}."
        )
    return Purchase(usd=row.usd, kind=row.kind, date=row.date, source=f"{row.origin}: {row.source}")


def _offers(gpu: GPU, ctx: Context | None, rent_usd_per_hour: float | None) -> dict[str, tuple[float, str] | None]:
    """The rent to compare with: the caller's on-demand rate or the cheapest listed, and spot."""
    from gpuplan.estimators import ownership as ow

    offers: dict[str, tuple[float, str] | None] = {}
    if rent_usd_per_hour is not None:
        ow.check_rent(float(rent_usd_per_hour))
        offers["on_demand"] = (float(rent_usd_per_hour), "--rent-usd-per-hour")
    else:
        p = prices(ctx, spot=False).get(gpu.name)
        offers["on_demand"] = (p.usd_per_hour, f"{p.provider} ({p.version})") if p else None
    sp = prices(ctx, spot=True).get(gpu.name)
    offers["spot"] = (sp.usd_per_hour, f"{sp.provider} ({sp.version})") if sp else None
    return offers


def _rent_offer(o: ow.Ownership, usd_per_hour: float, source: str) -> RentOffer:
    from gpuplan.estimators import ownership as ow

    c = ow.compare(o, usd_per_hour)
    return RentOffer(
        usd_per_hour=c.usd_per_hour,
        price_source=source,
        total_usd=c.total_usd,
        usd_per_year=c.usd_per_year,
        break_even_hours_per_month=c.break_even_hours_per_month,
        break_even_share_of_month=c.break_even_share_of_month,
        break_even_reachable=(
            c.break_even_hours_per_month is not None and c.break_even_hours_per_month <= ow.MAX_HOURS_PER_MONTH
        ),
        payback_months=c.payback_months,
        cheaper="buy" if c.buy_is_cheaper else "rent",
    )


def rent_vs_buy(
    gpu_name: str,
    hours_per_month: float = 200.0,
    years: float = 3.0,
    *,
    price_usd: float | None = None,
    purchase_price_file: str | Path | None = None,
    rent_usd_per_hour: float | None = None,
    usd_per_kwh: float | None = None,
    pue: float | None = None,
    hosting_usd_per_month: float | None = None,
    resale_fraction: float | None = None,
    ctx: Context | None = None,
) -> RentVsBuy:
    """`gpuplan rent-vs-buy`: owning one GPU for `years` at `hours_per_month` against renting it
    on demand and on spot; USD, hours and watts (estimators/ownership.py holds the sourced defaults)."""
    from gpuplan.estimators import ownership as ow  # here: only rent-vs-buy needs it (CLI start-up)

    ctx = context(ctx)  # read once: the catalog and both price lists share it
    cat = catalog(ctx)
    gpu = cat.get(gpu_name)
    _check_numbers({
        "hours_per_month": hours_per_month, "years": years, "price": price_usd, "rent_usd_per_hour": rent_usd_per_hour,
        "usd_per_kwh": usd_per_kwh, "pue": pue, "hosting_usd_per_month": hosting_usd_per_month,
        "resale_fraction": resale_fraction,
    })  # fmt: skip
    bought = _purchase(gpu, cat, price_usd, purchase_price_file)
    # a GeForce card sits in a workstation (its licence bars data centres): PUE 1.0, a desktop's parts
    default_pue, default_hosting, basis = ow.host_defaults(gpu.geforce_eula)
    o = ow.Ownership(
        purchase_usd=bought.usd,
        years=float(years),
        hours_per_month=float(hours_per_month),
        board_power_w=ow.board_power_w(gpu),
        pue=default_pue if pue is None else float(pue),
        usd_per_kwh=ow.DEFAULT_USD_PER_KWH if usd_per_kwh is None else float(usd_per_kwh),
        hosting_usd_per_month=(default_hosting if hosting_usd_per_month is None else float(hosting_usd_per_month)),
        resale_fraction=None if resale_fraction is None else float(resale_fraction),
    )
    own = ow.ownership_cost(o)  # validates every setting
    given = {"pue": pue, "usd_per_kwh": usd_per_kwh, "hosting_usd_per_month": hosting_usd_per_month}
    user_set = {key for key, value in {**given, "resale_fraction": resale_fraction}.items() if value is not None}
    offers = _offers(gpu, ctx, rent_usd_per_hour)
    return RentVsBuy(
        gpu=gpu.name,
        hours_per_month=o.hours_per_month,
        years=o.years,
        purchase=bought,
        own=Owning(
            total_usd=own.total_usd,
            usd_per_year=own.usd_per_year,
            usd_per_used_hour=own.usd_per_used_hour,
            used_hours=own.used_hours,
            breakdown=OwnBreakdown(
                purchase_usd=own.purchase_usd,
                hosting_usd=own.hosting_usd,
                electricity_usd=own.electricity_usd,
                resale_usd=-own.resale_usd,
            ),
            energy_kwh=own.energy_kwh,
        ),
        rent={kind: None if offer is None else _rent_offer(o, *offer) for kind, offer in offers.items()},
        settings=OwnSettings(
            board_power_w=o.board_power_w,
            pue=o.pue,
            usd_per_kwh=o.usd_per_kwh,
            electricity_usd_per_hour=ow.electricity_usd_per_hour(o),
            hosting_usd_per_month=o.hosting_usd_per_month,
            resale_fraction=o.resale,
        ),
        basis={
            **{key: ("set by the caller" if key in user_set else text) for key, text in basis.items()},
            "host": ow.HOST_BASIS[gpu.geforce_eula],
            "break_even": "GPU-hours a month above which owning costs less than renting over the horizon",
            "payback_months": "months of use at these hours until the rent saved repays the purchase less resale",
            "not_counted": ow.NOT_COUNTED,
        },
    )
