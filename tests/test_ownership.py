"""Owning a GPU against renting it: hand-computed costs, the break-even crossing, the purchase-price
table, `gpuplan rent-vs-buy` (table, --json, one-line errors with exit code 2) and a fuzz of inputs."""

from __future__ import annotations

import itertools
import json
import math
import re
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import RunCli
from gpuplan.errors import GpuplanError, InvalidSettingError, UnknownGPUError
from gpuplan.estimators import ownership as ow
from gpuplan.interfaces import api
from gpuplan.specs.gpu import Catalog
from gpuplan.specs.purchase import PURCHASE_KINDS, bundled_purchase_prices, parse_purchase_prices, purchase_prices

# A stated input, computed by hand: $1,000 card, 2 years (24 months), $10 a month of hosting, 25%
# resale, 500 W at PUE 1.0 and $0.20/kWh = $0.10 of electricity per used hour, rented at $0.60/h.
HAND = ow.Ownership(
    purchase_usd=1000.0,
    years=2.0,
    hours_per_month=100.0,
    board_power_w=500.0,
    pue=1.0,
    usd_per_kwh=0.2,
    hosting_usd_per_month=10.0,
    resale_fraction=0.25,
)


def test_ownership_cost_by_hand() -> None:
    c = ow.ownership_cost(HAND)
    # 2,400 used hours; 0.5 kW x 2,400 h = 1,200 kWh = $240; hosting 24 x $10 = $240; resale $250
    assert c.used_hours == pytest.approx(2400.0, abs=1e-9)
    assert c.energy_kwh == pytest.approx(1200.0, abs=1e-9)
    assert c.electricity_usd == pytest.approx(240.0, abs=1e-9)
    assert c.hosting_usd == pytest.approx(240.0, abs=1e-9)
    assert c.resale_usd == pytest.approx(250.0, abs=1e-9)
    assert c.total_usd == pytest.approx(1230.0, abs=1e-9)  # 1000 + 240 + 240 - 250
    assert c.usd_per_year == pytest.approx(615.0, abs=1e-9)
    assert c.usd_per_used_hour == pytest.approx(0.5125, abs=1e-12)


def test_break_even_and_payback_by_hand() -> None:
    # fixed = 1000 x 0.75 + 10 x 24 = 990; margin = 0.60 - 0.10 = 0.50; h* = 990 / (24 x 0.5) = 82.5
    assert ow.break_even_hours_per_month(HAND, 0.6) == pytest.approx(82.5, abs=1e-9)
    # at 100 h/month: saving = 100 x 0.5 - 10 = $40 a month; (1000 - 250) / 40 = 18.75 months
    assert ow.payback_months(HAND, 0.6) == pytest.approx(18.75, abs=1e-9)
    cmp = ow.compare(HAND, 0.6)
    assert cmp.total_usd == pytest.approx(1440.0, abs=1e-9)  # 0.6 x 100 x 24
    assert cmp.buy_is_cheaper  # 1230 < 1440 at 100 h > 82.5 h
    assert cmp.break_even_share_of_month == pytest.approx(82.5 / 730.5, abs=1e-12)


def _at(o: ow.Ownership, hours: float) -> ow.Ownership:
    return ow.Ownership(
        o.purchase_usd,
        o.years,
        hours,
        o.board_power_w,
        o.pue,
        o.usd_per_kwh,
        o.hosting_usd_per_month,
        o.resale_fraction,
    )


def _crossing_holds(o: ow.Ownership, rent: float) -> None:
    h_star = ow.break_even_hours_per_month(o, rent)
    assert h_star is not None
    own = (
        h_star * o.months * ow.electricity_usd_per_hour(o)
        + o.purchase_usd * (1 - o.resale)
        + (o.hosting_usd_per_month * o.months)
    )
    renting = ow.rental_cost(rent, h_star, o.years)
    assert own == pytest.approx(renting, rel=1e-6, abs=1e-6)  # the two costs cross at h*
    if h_star <= ow.MAX_HOURS_PER_MONTH:
        assert ow.ownership_cost(_at(o, h_star)).total_usd == pytest.approx(renting, rel=1e-6, abs=1e-6)
        payback = ow.payback_months(_at(o, h_star), rent)
        assert payback is None or payback == pytest.approx(o.months, rel=1e-9)  # repaid exactly at the horizon


def test_break_even_is_where_the_costs_cross() -> None:
    _crossing_holds(HAND, 0.6)
    _crossing_holds(ow.Ownership(1599.0, 3.0, 200.0, 450.0), 0.69)  # RTX 4090 at the default settings
    _crossing_holds(ow.Ownership(11500.0, 3.0, 200.0, 400.0), 1.79)  # A100 SXM4 80GB


def test_more_hours_make_an_owned_hour_cheaper() -> None:
    per_hour = [ow.ownership_cost(_at(HAND, h)).usd_per_used_hour for h in (1, 10, 50, 100, 200, 400, 744)]
    assert all(a is not None and b is not None and b < a for a, b in itertools.pairwise(per_hour))
    assert ow.ownership_cost(_at(HAND, 0)).usd_per_used_hour is None  # nothing used: no per-hour figure


def test_rent_below_electricity_never_breaks_even() -> None:
    assert ow.break_even_hours_per_month(HAND, 0.05) is None  # $0.05/h < $0.10/h of electricity
    assert ow.payback_months(HAND, 0.05) is None
    assert ow.payback_months(_at(HAND, 10), 0.6) is None  # saves $5 a month, hosting costs $10


def test_defaults_are_the_sourced_numbers() -> None:
    assert ow.DEFAULT_PUE == 1.58  # Uptime Institute 2023 average
    assert math.isclose(ow.DEFAULT_USD_PER_KWH, 0.12385, abs_tol=1e-5)  # EIA 2022 commercial: 172,257 / 1,390,873
    assert math.isclose(ow.HOST_USD_PER_GPU_SLOT, 1844.94, abs_tol=0.01)  # (8,477 + 4,932 + 1,350.55) / 8
    assert math.isclose(ow.DEFAULT_HOSTING_USD_PER_MONTH, 51.25, abs_tol=0.01)
    assert math.isclose(ow.default_resale_fraction(3), 0.5, abs_tol=1e-12)  # straight line over 6 years
    assert ow.default_resale_fraction(6) == 0.0
    assert ow.default_resale_fraction(9) == 0.0


@pytest.mark.parametrize(
    ("field", "value", "name"),
    [
        ("hours_per_month", -1.0, "hours_per_month"),
        ("hours_per_month", 745.0, "hours_per_month"),
        ("years", 0.0, "years"),
        ("purchase_usd", -5.0, "price"),
        ("pue", 0.9, "pue"),
        ("usd_per_kwh", -0.1, "usd_per_kwh"),
        ("hosting_usd_per_month", math.nan, "hosting_usd_per_month"),
        ("resale_fraction", 1.5, "resale_fraction"),
    ],
)
def test_bad_settings_name_the_parameter(field: str, value: float, name: str) -> None:
    o = ow.Ownership(**{**HAND.__dict__, field: value})
    with pytest.raises(InvalidSettingError, match=f"'{name}' parameter must be .* Got "):
        ow.ownership_cost(o)


# --- the purchase-price table -------------------------------------------------------------------------


def test_every_purchase_row_resolves_and_is_sourced(catalog: Catalog) -> None:
    table = bundled_purchase_prices(catalog)
    for name, row in table.items():
        assert catalog.find(name) is not None and catalog.find(name) is catalog.get(row.gpu)
        assert row.usd > 0 and row.kind in PURCHASE_KINDS
        assert re.fullmatch(r"\d{4}(-\d{2}(-\d{2})?)?", row.date), row.date
        assert len(row.source) > 20 and ("http" in row.source or "@" in row.source), row.source
    wanted = (
        "GeForce RTX 2080 Ti", "GeForce RTX 3090", "GeForce RTX 4090", "GeForce RTX 5090", "RTX A6000",
        "RTX 6000 Ada", "L4", "L40S", "A100 SXM4 80GB", "H100 SXM5 80GB",
    )  # fmt: skip
    assert set(wanted) <= set(table)
    assert table["GeForce RTX 4090"].usd == 1599 and table["GeForce RTX 4090"].kind == "msrp"
    assert table["GeForce RTX 3090"].usd == 1499 and table["GeForce RTX 5090"].usd == 1999


def test_a_users_file_replaces_rows_and_is_checked(catalog: Catalog, tmp_path: Path) -> None:
    f = tmp_path / "mine.csv"
    f.write_text("# our reseller quote\ngpu,price_usd,kind,date,source\n4090,1850,street,2025-05-01,quote 42\n")
    table = purchase_prices(catalog, f)
    assert table["GeForce RTX 4090"].usd == 1850 and table["GeForce RTX 4090"].origin == "mine.csv"
    assert table["GeForce RTX 3090"].usd == 1499  # bundled rows stay
    header = "gpu,price_usd,kind,date,source\n"
    bad = {
        "4091,100,msrp,2024,x\n": (UnknownGPUError, "line 2: GPU '4091' is not in the catalog"),
        "4090,abc,msrp,2024,x\n": (InvalidSettingError, "price_usd 'abc' is not a number"),
        "4090,-1,msrp,2024,x\n": (InvalidSettingError, "price_usd must be a positive"),
        "4090,100,cheap,2024,x\n": (InvalidSettingError, "kind must be one of msrp, list, street"),
        "4090,100,msrp,2024-13,x\n": (InvalidSettingError, "not a calendar date"),
        "4090,100,msrp,May 2024,x\n": (InvalidSettingError, "not ISO 8601"),
        "4090,100,msrp,2024,\n": (InvalidSettingError, "the source is empty"),
        "4090,100,msrp,2024,x\n4090,200,msrp,2024,y\n": (InvalidSettingError, "listed twice"),
        '4090,100,msrp,2024,"open\n': (InvalidSettingError, "a quoted field is not closed"),
    }
    for body, (kind, message) in bad.items():
        with pytest.raises(kind, match=re.escape(message)):
            parse_purchase_prices(header + body, catalog, "mine.csv")
    with pytest.raises(InvalidSettingError, match="missing column"):
        parse_purchase_prices("gpu,price\n4090,1\n", catalog, "mine.csv")


# --- the API and the command line -----------------------------------------------------------------------


def test_api_rent_vs_buy_4090() -> None:
    """A GeForce card (the driver licence bars data centres) is priced in a desk-side workstation:
    PUE 1.0 and a one-GPU desktop's other parts as its host share."""
    rec = api.rent_vs_buy("4090", 200, 3, rent_usd_per_hour=0.69).to_dict()
    assert rec["gpu"] == "GeForce RTX 4090" and rec["purchase"]["usd"] == 1599
    assert rec["settings"]["pue"] == 1.0 and rec["settings"]["hosting_usd_per_month"] == pytest.approx(27.007, abs=1e-3)
    assert "workstation" in rec["basis"]["host"] and "1.0" in rec["basis"]["pue"]
    # own = 1599 x 0.5 + 36 x 27.007 + 450 W x 1.0 x 0.12385 $/kWh x 7,200 h = 799.5 + 972.26 + 401.27
    assert rec["own"]["total_usd"] == pytest.approx(2173.03, abs=0.01)
    assert rec["own"]["usd_per_used_hour"] == pytest.approx(2173.03 / 7200, abs=1e-5)
    od = rec["rent"]["on_demand"]
    # h* = (799.5 + 972.26) / (36 x (0.69 - 0.05573)) = 77.59 GPU-hours a month
    assert od["break_even_hours_per_month"] == pytest.approx(77.59, abs=0.01)
    assert od["break_even_share_of_month"] == pytest.approx(77.59 / 730.5, abs=1e-4)
    assert od["cheaper"] == "buy" and od["price_source"] == "--rent-usd-per-hour"
    snapshot = api.prices(spot=True).get("GeForce RTX 4090")
    assert snapshot is not None and rec["rent"]["spot"]["usd_per_hour"] == snapshot.usd_per_hour


def test_a_geforce_card_in_a_server_room_and_a_datacenter_card_keep_the_server_defaults() -> None:
    # the server figures passed by hand: 799.5 + 36 x 51.248 + 450 W x 1.58 x 0.12385 x 7,200 h
    rec = api.rent_vs_buy("4090", 200, 3, rent_usd_per_hour=0.69, pue=1.58, hosting_usd_per_month=51.2484375)
    assert rec.own.total_usd == pytest.approx(3278.45, abs=0.01)
    assert rec.rent["on_demand"] is not None
    assert rec.rent["on_demand"].break_even_hours_per_month == pytest.approx(122.03, abs=0.01)
    assert rec.basis["pue"] == "set by the caller"
    h100 = api.rent_vs_buy("H100", 200, 3, price_usd=25_000.0)
    assert h100.settings.pue == 1.58 and h100.settings.hosting_usd_per_month == pytest.approx(51.25, abs=0.01)
    assert h100.basis["host"] == "a server in a data centre" and "Uptime" in h100.basis["pue"]


def test_the_workstation_defaults_are_the_sourced_numbers() -> None:
    assert ow.WORKSTATION_PUE == 1.0  # no cooling or power plant of its own
    assert math.isclose(ow.WORKSTATION_HOST_USD, 972.26, abs_tol=1e-9)  # $1,672.25 desktop less its $699.99 card
    assert math.isclose(ow.WORKSTATION_HOSTING_USD_PER_MONTH, 27.007, abs_tol=1e-3)  # over 36 months
    assert ow.host_defaults(True)[:2] == (1.0, ow.WORKSTATION_HOSTING_USD_PER_MONTH)
    assert ow.host_defaults(False)[:2] == (ow.DEFAULT_PUE, ow.DEFAULT_HOSTING_USD_PER_MONTH)


def test_cli_says_which_host_it_assumed(run_cli: RunCli) -> None:
    code, out, err = run_cli("rent-vs-buy", "4090")
    assert code == 0, err
    assert "Host: a desk-side workstation" in out and "PUE 1 x" in out and "$27.01 a month" in out
    code, out, err = run_cli("rent-vs-buy", "H100", "--price", "25000")
    assert code == 0, err
    assert "Host: a server in a data centre" in out and "PUE 1.58 x" in out and "$51.25 a month" in out


def test_api_settings_and_overrides() -> None:
    rec = api.rent_vs_buy("l40", 100, 2, price_usd=9000.0, pue=1.0, usd_per_kwh=0.3, resale_fraction=0.0).to_dict()
    assert rec["purchase"] == {"usd": 9000.0, "kind": "user", "date": None, "source": "--price"}
    assert rec["settings"]["pue"] == 1.0 and rec["settings"]["resale_fraction"] == 0.0
    assert rec["basis"]["pue"] == "set by the caller" and "EIA" not in rec["basis"]["usd_per_kwh"]
    assert "Uptime" not in rec["basis"]["pue"] and "6 years" not in rec["basis"]["resale_fraction"]
    with pytest.raises(InvalidSettingError, match="No purchase price for L40"):
        api.rent_vs_buy("l40")
    with pytest.raises(UnknownGPUError, match="Did you mean"):
        api.rent_vs_buy("4O90")
    with pytest.raises(InvalidSettingError, match="'years' parameter must be a number"):
        api.rent_vs_buy("4090", 200, "3")  # type: ignore[arg-type]


def test_cli_table(run_cli: RunCli) -> None:
    code, out, err = run_cli("rent-vs-buy", "a100 80gb", "--hours-per-month", "200", "--years", "3")
    assert code == 0, err
    assert "Owning one A100 SXM4 80GB for 3 years" in out and "$11,500" in out
    assert "break-even use" in out and "rent on demand" in out and "purchase price:" in out


def test_cli_json_keys(run_cli: RunCli) -> None:
    code, out, err = run_cli("rent-vs-buy", "4090", "--json")
    assert code == 0, err
    rec = json.loads(out)
    assert set(rec) == {"gpu", "hours_per_month", "years", "purchase", "own", "rent", "settings", "basis"}
    assert set(rec["own"]) == {
        "total_usd",
        "usd_per_year",
        "usd_per_used_hour",
        "used_hours",
        "breakdown",
        "energy_kwh",
    }
    assert set(rec["rent"]) == {"on_demand", "spot"}
    assert set(rec["rent"]["on_demand"]) == {
        "usd_per_hour", "price_source", "total_usd", "usd_per_year", "break_even_hours_per_month",
        "break_even_share_of_month", "break_even_reachable", "payback_months", "cheaper",
    }  # fmt: skip
    assert rec["settings"]["board_power_w"] == 450.0


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("4O90",), "Unknown GPU '4O90'. Did you mean"),
        (("l40",), "No purchase price for L40"),
        (("4090", "--hours-per-month", "-5"), "'hours_per_month' parameter must be at least 0 and at most 744"),
        (("4090", "--hours-per-month", "800"), "Got 800 instead"),
        (("4090", "--years", "0"), "'years' parameter must be at least 0.00273973"),
        (("4090", "--price", "-3"), "'price' parameter must be above 0"),
        (("4090", "--rent-usd-per-hour", "0"), "'rent_usd_per_hour' parameter must be above 0"),
        (("4090", "--purchase-prices", "/no/such/file.csv"), "No purchase-price file at"),
    ],
)
def test_cli_bad_input_is_one_line_and_exit_2(run_cli: RunCli, args: tuple[str, ...], message: str) -> None:
    code, out, err = run_cli("rent-vs-buy", *args)
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith("gpuplan: error: ") and message in err, err


EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def test_course_planning_claims() -> None:
    """docs/course-planning.md: full fine-tuning of a 1B model needs 2x 24 GB or one A100 40GB,
    one 24 GB card with 8-bit AdamW; the adapter variants fit one 24 GB card."""

    def fits(name: str, **keys: object) -> bool:
        return bool(api.estimate(api.build_workload(str(EXAMPLES / name), keys)).memory.fits)

    assert not fits("course-full-1b.yaml", gpu="4090")
    assert fits("course-full-1b.yaml", gpu="4090", num_gpus=2, zero=3)
    assert fits("course-full-1b.yaml", gpu="a100 40gb")
    assert fits("course-full-1b.yaml", gpu="4090", optimizer="adamw-8bit")
    assert fits("course-lora-3b.yaml", gpu="3090") and fits("course-qlora-8b.yaml", gpu="3090")
    rec = api.estimate(api.build_workload(str(EXAMPLES / "course-full-1b.yaml"), {"gpu": "a100 40gb"})).to_dict()
    assert rec["time"]["time_to_train_s"] / 60 == pytest.approx(19.7, abs=0.05)  # the doc's 19.7 min


_num = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True), st.floats(-10, 1000), st.integers(-5, 10_000), st.none()
)


@given(hours=_num, years=_num, price=_num, rent=_num, kwh=_num, pue=_num, hosting=_num, resale=_num)
@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_fuzz_only_gpuplan_errors(
    hours: float | None,
    years: float | None,
    price: float | None,
    rent: float | None,
    kwh: float | None,
    pue: float | None,
    hosting: float | None,
    resale: float | None,
) -> None:
    try:
        rec = api.rent_vs_buy(
            "4090",
            200.0 if hours is None else hours,
            3.0 if years is None else years,
            price_usd=price,
            rent_usd_per_hour=rent,
            usd_per_kwh=kwh,
            pue=pue,
            hosting_usd_per_month=hosting,
            resale_fraction=resale,
        ).to_dict()
    except GpuplanError:
        return
    json.dumps(rec, allow_nan=False)  # JSON-ready: no NaN or infinity slips through
    own = rec["own"]["total_usd"]
    assert math.isfinite(own)
    for offer in rec["rent"].values():
        h_star = offer and offer["break_even_hours_per_month"]
        if offer is None or h_star is None:
            continue
        s = rec["settings"]
        months = 12 * rec["years"]
        owned = rec["purchase"]["usd"] * (1 - s["resale_fraction"]) + s["hosting_usd_per_month"] * months
        owned += s["electricity_usd_per_hour"] * h_star * months
        assert owned == pytest.approx(offer["usd_per_hour"] * h_star * months, rel=1e-6, abs=1e-6)


def test_vanishing_use_or_horizon_gives_no_overflowing_figure() -> None:
    """Found by the fuzz test: a horizon of 2.2e-308 years overflowed the cost per year to inf, and
    a vanishing monthly use overflows the cost per used hour. The horizon is at least a day; ratios
    that would overflow are reported as absent, like a zero denominator."""
    with pytest.raises(GpuplanError, match="'years' parameter must be at least"):
        api.rent_vs_buy("4090", 0.0, 2.2250738585072014e-308, price_usd=4.0)
    rec = api.rent_vs_buy("4090", 5e-324, 3.0, price_usd=4.0).to_dict()
    json.dumps(rec, allow_nan=False)
    assert rec["own"]["usd_per_used_hour"] is None
