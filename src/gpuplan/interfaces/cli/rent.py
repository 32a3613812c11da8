"""`rent-vs-buy`: owning a GPU against renting it."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from gpuplan.interfaces import api
from gpuplan.interfaces.cli.common import (
    CatalogOpt,
    JsonOpt,
    app,
    console,
    emit_json,
    finite,
)

if TYPE_CHECKING:
    from rich.table import Table

    from gpuplan.results import RentOffer, RentVsBuy


@app.command("rent-vs-buy")
def rent_vs_buy(
    gpu: Annotated[str, typer.Argument(help="GPU name or alias, e.g. 4090, 'a100 80gb', l40s.")],
    hours_per_month: Annotated[
        float, typer.Option(callback=finite, help="GPU-hours the card is used a month (0-744; a full month is ~730).")
    ] = 200.0,
    years: Annotated[float, typer.Option(callback=finite, help="How long you would own it (the horizon).")] = 3.0,
    price: Annotated[
        float | None, typer.Option("--price", callback=finite, help="Purchase price of one card, USD.")
    ] = None,
    purchase_prices: Annotated[
        Path | None, typer.Option("--purchase-prices", help="Your purchase-price CSV (purchase.csv's columns).")
    ] = None,
    rent_usd_per_hour: Annotated[
        float | None,
        typer.Option(callback=finite, help="On-demand rent per GPU-hour, USD (default: cheapest in the snapshot)."),
    ] = None,
    usd_per_kwh: Annotated[
        float | None, typer.Option(callback=finite, help="Electricity price (default: US commercial 2022).")
    ] = None,
    pue: Annotated[
        float | None, typer.Option(callback=finite, help="Facility power / IT power (default 1.58; a desk ~1.0).")
    ] = None,
    hosting_usd_per_month: Annotated[
        float | None, typer.Option(callback=finite, help="Host server share per GPU slot a month, USD (default ~$51).")
    ] = None,
    resale_fraction: Annotated[
        float | None,
        typer.Option(callback=finite, help="Share of the price the card fetches at the end (default: 1 - years/6)."),
    ] = None,
    prices: Annotated[
        Path | None, typer.Option("--prices", help="Your rental price CSV (gpu-prices.csv's columns).")
    ] = None,
    catalog: CatalogOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Buy one GPU or rent it? Cost of owning per year and per used hour, against renting on demand and on
    spot, with the break-even use above which buying is cheaper."""
    from rich.markup import escape

    from gpuplan.specs.context import Context

    rec = api.rent_vs_buy(
        gpu,
        hours_per_month,
        years,
        price_usd=price,
        purchase_price_file=purchase_prices,
        rent_usd_per_hour=rent_usd_per_hour,
        usd_per_kwh=usd_per_kwh,
        pue=pue,
        hosting_usd_per_month=hosting_usd_per_month,
        resale_fraction=resale_fraction,
        ctx=Context.of(catalog or [], prices),
    )
    if as_json:
        emit_json(rec)
        return
    c = console()
    c.print(_owning_table(rec))
    c.print(_renting_table(rec))
    sources = [f"{label}: {o.price_source}" for label, o in _rent_rows(rec) if o is not None]
    if rec.purchase.kind != "user":
        sources.insert(0, f"purchase price: {rec.purchase.source}")
    for line in sources:
        c.print(escape(line))
    c.print(
        escape(
            "break-even use: GPU-hours a month (share of an average month) above which buying is cheaper over the "
            f"horizon; payback: months at {_nice(rec.hours_per_month)} h/month until the rent saved repays the price "
            "less resale."
        )
    )
    c.print(escape(f"Host: {rec.basis['host']}; PUE: {rec.basis['pue']}."))
    c.print(escape(f"Not counted: {rec.basis['not_counted']}."))


def _usd(v: float) -> str:
    return f"-${-v:,.0f}" if v < 0 else (f"${v:,.0f}" if abs(v) >= 100 else f"${v:,.2f}")


def _per_hour(v: float | None) -> str:
    return "—" if v is None else f"${v:,.3f}"


def _nice(v: float) -> str:
    return f"{v:g}"


def _years(n: float) -> str:
    return f"{_nice(n)} year" + ("" if n == 1 else "s")


def _owning_table(rec: RentVsBuy) -> Table:
    from rich.markup import escape
    from rich.table import Table

    own, s, bought, b = rec.own, rec.settings, rec.purchase, rec.own.breakdown
    t = Table(
        title=escape(
            f"Owning one {rec.gpu} for {_years(rec.years)}, used {_nice(rec.hours_per_month)} GPU-hours a month"
        )
    )
    for col in ("term", "USD", "why"):
        t.add_column(col, justify="right" if col == "USD" else "left")
    bought_why = "--price" if bought.kind == "user" else f"{bought.kind} price of {bought.date} (source below)"
    t.add_row("purchase", _usd(b.purchase_usd), escape(bought_why))
    t.add_row(
        "host share",
        _usd(b.hosting_usd),
        escape(f"${s.hosting_usd_per_month:,.2f} a month: {rec.basis['hosting_usd_per_month']}"),
    )
    t.add_row(
        "electricity",
        _usd(b.electricity_usd),
        escape(
            f"{own.energy_kwh:,.0f} kWh: {s.board_power_w:g} W x PUE {s.pue:g} x ${s.usd_per_kwh:.4f}/kWh "
            f"over {own.used_hours:,.0f} GPU-hours"
        ),
    )
    t.add_row(
        f"resale after {_years(rec.years)}",
        _usd(b.resale_usd),
        escape(f"{s.resale_fraction:.0%} of the price: {rec.basis['resale_fraction']}"),
    )
    t.add_row(
        "total",
        _usd(own.total_usd),
        f"{_usd(own.usd_per_year)} a year · {_per_hour(own.usd_per_used_hour)} per used GPU-hour",
    )
    return t


def _rent_rows(rec: RentVsBuy) -> list[tuple[str, RentOffer | None]]:
    return [("rent on demand", rec.rent.get("on_demand")), ("rent on spot", rec.rent.get("spot"))]


def _renting_table(rec: RentVsBuy) -> Table:
    from rich.markup import escape
    from rich.table import Table

    own = rec.own
    r = Table(title=escape(f"Against renting the same {_nice(rec.hours_per_month)} GPU-hours a month"))
    for col in ("option", "per GPU-hour", "per year", f"{_years(rec.years)}", "break-even use", "payback", "cheaper"):
        r.add_column(col, justify="left" if col in ("option", "cheaper") else "right")
    r.add_row("own", _per_hour(own.usd_per_used_hour), _usd(own.usd_per_year), _usd(own.total_usd), "", "", "")
    for label, o in _rent_rows(rec):
        if o is None:
            r.add_row(label, "no price listed", "", "", "", "", "")
            continue
        be = o.break_even_hours_per_month
        if be is None:
            be_txt = "never (rent < electricity)"
        elif not o.break_even_reachable:
            be_txt = f"{be:,.0f} h/month: never"
        else:
            be_txt = f"{be:,.0f} h/month ({o.break_even_share_of_month:.0%})"
        pb = o.payback_months
        r.add_row(
            label,
            _per_hour(o.usd_per_hour),
            _usd(o.usd_per_year),
            _usd(o.total_usd),
            be_txt,
            "never" if pb is None else f"{pb:,.1f} months",
            o.cheaper,
        )
    return r
