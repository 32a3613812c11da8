"""Shared pieces of the command line: the Typer apps, the options every command takes, and the
display formatting (units are chosen here, once)."""

from __future__ import annotations

import functools
import inspect
import math
import os
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Final

import typer

from gpuplan.interfaces.cli.answers import CARBON_MAX, carbon_ok

# re-exported: the commands' shared pieces that load no command-line framework (cli/fast.py uses them)
from gpuplan.interfaces.cli.answers import WORKLOAD_FLAGS as WORKLOAD_FLAGS
from gpuplan.interfaces.cli.answers import WorkloadFlag as WorkloadFlag
from gpuplan.interfaces.cli.answers import emit_json as emit_json
from gpuplan.interfaces.cli.answers import workload_keys as workload_keys
from gpuplan.specs.workload_docs import KEY_DOCS  # the flags' help: plain text, imports nothing

if TYPE_CHECKING:
    from rich.console import Console
    from rich.table import Table

    from gpuplan.results.base import Result
    from gpuplan.specs.gpu import GPU

app = typer.Typer(
    help="gpuplan: what can I run, on which GPU, how fast and at what cost.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)
gpus_app = typer.Typer(help="List the GPU catalog, or show one GPU.", invoke_without_command=True)
app.add_typer(gpus_app, name="gpus")

JsonOpt = Annotated[bool, typer.Option("--json", help="Print one JSON document instead of tables.")]
CatalogOpt = Annotated[
    list[Path] | None,
    typer.Option("--catalog", help="Extra catalog file(s) (same TOML format) that add or override GPUs."),
]
PricesOpt = Annotated[
    Path | None, typer.Option("--prices", help="Your price CSV (gpu-prices.csv's columns); else $GPUPLAN_PRICES.")
]
CalibrationOpt = Annotated[
    list[Path] | None,
    typer.Option("--calibration", help="Measured efficiencies of your own cards (`gpuplan bench --out FILE`)."),
]


def console() -> Console:
    """Rich console; when piped (no terminal, no $COLUMNS) tables get 160 columns, not 80."""
    from rich.console import Console

    width = None
    if not sys.stdout.isatty() and not os.environ.get("COLUMNS"):
        width = 160
    return Console(highlight=False, soft_wrap=False, width=width)


def finite(value: float | None) -> float | None:
    """A number option's value, refused unless finite: every range check (`x < 0`, `x > max`) is
    false for NaN, so NaN would pass them all; each command then checks its own range."""
    if value is not None and not math.isfinite(value):
        raise typer.BadParameter(f"must be a finite number. Got {value!r}.")
    return value


def carbon_intensity(value: float | None) -> float | None:
    """--carbon: g CO2e/kWh from 0 to 5,000 (answers.carbon_ok)."""
    if value is not None and not carbon_ok(value):
        raise typer.BadParameter(f"must be a grid carbon intensity from 0 to {CARBON_MAX:,} g CO2e/kWh. Got {value!r}.")
    return value


CarbonOpt = Annotated[
    float | None, typer.Option("--carbon", callback=carbon_intensity, help="Grid carbon intensity, g CO2e/kWh.")
]


# --- formatting (display units are chosen here, once) ----------------------------------------


def fmt_tflops(v: float | None) -> str:
    if v is None:
        return "—"
    t = v / 1e12
    if t >= 100:
        return f"{t:,.1f}".removesuffix(".0")
    return f"{t:.1f}" if t >= 1 else f"{t:.2f}"


def _sig3(v: float, min_decimals: int) -> str:
    """v to 3 significant digits in fixed point (0.0123, 0.456, 12.3), trailing zeros dropped
    down to `min_decimals`: a small figure keeps its digits instead of rounding to zero."""
    if v == 0 or not math.isfinite(v):
        return f"{v:.{min_decimals}f}"
    decimals = max(min_decimals, 2 - math.floor(math.log10(abs(v))))
    text = f"{v:,.{decimals}f}"
    whole, _, frac = text.partition(".")
    frac = frac.rstrip("0").ljust(min_decimals, "0")
    return f"{whole}.{frac}" if frac else whole


def fmt_usd(v: float) -> str:
    """Dollars: cents from $1 up ($1,234.56); below $1, 3 significant digits ($0.14, $0.0123,
    $0.000456), so an electricity-only cost per million tokens never reads $0.00."""
    return f"${v:,.2f}" if abs(v) >= 0.9995 or v == 0 else f"${_sig3(v, 2)}"


def fmt_energy(kwh: float) -> str:
    """Energy: kWh with two decimals from 1 kWh up, Wh to 3 significant digits below (350 Wh,
    12.3 Wh, 0.456 Wh), so one training step's energy never reads 0.00 kWh."""
    return f"{kwh:,.2f} kWh" if abs(kwh) >= 0.9995 or kwh == 0 else f"{_sig3(kwh * 1000, 0)} Wh"


def fmt_memory(g: GPU) -> str:
    from gpuplan.specs.gpu import GIB

    if g.memory_unit_stated == "GiB":
        return f"{g.memory_bytes / GIB:g} GiB"
    return f"{g.memory_bytes / 1e9:g} GB"


def fmt_bandwidth(bps: float) -> str:
    return f"{bps / 1e12:.2f} TB/s" if bps >= 1e12 else f"{bps / 1e9:,.0f} GB/s"


def fmt_count(n: float) -> str:
    for unit, scale in (("T", 1e12), ("B", 1e9), ("M", 1e6), ("K", 1e3)):
        if abs(n) >= scale:
            return f"{n / scale:.2f}{unit}"
    return f"{n:g}"


def fmt_nvlink(g: GPU) -> str:
    if g.nvlink_domain <= 1 or g.nvlink_bandwidth_bytes_per_s == 0:
        return "none"
    return f"{g.nvlink_bandwidth_bytes_per_s / 1e9:g} GB/s ×{g.nvlink_domain}"


def gpu_table(gpus: list[GPU]) -> Table:
    from rich.table import Table

    t = Table(title=f"{len(gpus)} GPUs (dense peaks; fp16/bf16 with fp32 accumulate)")
    t.add_column("GPU", no_wrap=True)
    for col, just in (
        ("arch", "left"),
        ("form", "left"),
        ("memory", "right"),
        ("bandwidth", "right"),
        ("fp32", "right"),
        ("tf32", "right"),
        ("bf16", "right"),
        ("fp8", "right"),
        ("int8", "right"),
        ("TDP", "right"),
        ("NVLink", "left"),
        ("multi-node", "left"),
        ("graphics", "left"),
    ):
        t.add_column(col, justify=just, no_wrap=True)  # type: ignore[arg-type]
    for g in gpus:
        p = g.peak_flop_per_s
        t.add_row(
            g.name + (" *" if g.geforce_eula else ""),
            g.architecture,
            g.form_factor,
            fmt_memory(g),
            fmt_bandwidth(g.memory_bandwidth_bytes_per_s),
            fmt_tflops(p["fp32"]),
            fmt_tflops(p["tf32"]),
            fmt_tflops(p["bf16"]),
            fmt_tflops(p["fp8"]),
            fmt_tflops(p["int8"]),
            f"{g.tdp_watts:g} W",
            fmt_nvlink(g),
            "yes" if g.multi_node else "no",
            g.graphics,
        )
    t.caption = "TFLOP/s (TOP/s for int8). * GeForce: driver licence forbids datacenter use."
    return t


# --- memory: fit, estimate, validate -----------------------------------------------------------

# `fit`, `estimate` and `plan` group their workload flags under this heading in --help
WORKLOAD_PANEL: Final = "Workload (each flag is --set KEY=VALUE; every key: docs/workload.md)"
WorkloadArg = Annotated[
    str | None,
    typer.Argument(help="Workload YAML file (examples/), or a model: a preset, a config.json or a hub id."),
]
SetOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--set",
        help="Any workload key as KEY=VALUE (repeatable), e.g. --set optimizer=adamw-8bit; every key: docs/workload.md.",
        rich_help_panel=WORKLOAD_PANEL,
    ),
]


def _flag_parameter(f: WorkloadFlag) -> inspect.Parameter:
    doc = KEY_DOCS[f.key] if f.key == f.param else f"{KEY_DOCS[f.key].rstrip('.')}; the {f.key} key."
    option = typer.Option(f.flag, help=doc, rich_help_panel=WORKLOAD_PANEL)
    return inspect.Parameter(
        f.param, inspect.Parameter.POSITIONAL_OR_KEYWORD, default=None, annotation=Annotated[f.kind | None, option]
    )


def workload_flags(command: Callable[..., None]) -> Callable[..., None]:
    """Give a command the common workload flags (WORKLOAD_FLAGS), placed before its --set: it
    receives them as `flags`, {workload key: value or None}; `workload_keys` merges them with --set.
    One definition, so the flags cannot drift apart between commands."""
    sig = inspect.signature(command, eval_str=True)
    params = [p for p in sig.parameters.values() if p.name != "flags"]
    at = next(i for i, p in enumerate(params) if p.name == "set_")
    added = [_flag_parameter(f) for f in WORKLOAD_FLAGS]
    signature = sig.replace(parameters=[*params[:at], *added, *params[at:]])

    @functools.wraps(command)
    def run(**kwargs: Any) -> None:
        flags = {f.key: kwargs.pop(f.param, None) for f in WORKLOAD_FLAGS}
        command(flags=flags, **kwargs)

    run.__signature__ = signature  # type: ignore[attr-defined]  # Typer reads the options from it
    run.__annotations__ = {p.name: p.annotation for p in signature.parameters.values()}
    return run


def gib(b: float | None) -> str:
    from gpuplan.specs.gpu import GIB

    return "—" if b is None else f"{b / GIB:,.2f} GiB"


def fmt_dur(seconds: float | None) -> str:
    if seconds is None:
        return "—"
    if seconds < 1:
        return f"{seconds * 1e3:,.1f} ms"
    if seconds < 120:
        return f"{seconds:,.1f} s"
    if seconds < 2 * 3600:
        return f"{seconds / 60:,.1f} min"
    if seconds < 3 * 86400:
        return f"{seconds / 3600:,.1f} h"
    return f"{seconds / 86400:,.1f} d"


def with_range(rec: Result | Mapping[str, Any], key: str, fmt: Any) -> str:
    """A figure of a result with its validation range (the `key_low` / `key_high` fields):
    '12.3 h (9.8–15.1)'."""
    get = rec.get if isinstance(rec, Mapping) else lambda k: getattr(rec, k, None)
    v = get(key)
    if v is None:
        return "—"
    lo, hi = get(f"{key}_low"), get(f"{key}_high")
    return f"{fmt(v)} ({fmt(lo)}–{fmt(hi)})" if lo is not None and hi is not None else fmt(v)
