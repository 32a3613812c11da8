"""`validate`, `version`, `launch`, `serve`, `bench` and `measure`."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from gpuplan import __version__
from gpuplan.errors import GpuplanError
from gpuplan.interfaces import api
from gpuplan.interfaces.cli.common import (
    CatalogOpt,
    JsonOpt,
    SetOpt,
    app,
    console,
    emit_json,
    fmt_bandwidth,
    fmt_dur,
    gib,
    workload_flags,
    workload_keys,
)

if TYPE_CHECKING:
    from gpuplan.results import Validation


@app.command()
def validate(
    file: Annotated[
        Path | None, typer.Option("--file", help="A measurement CSV (published.csv's columns). Default: bundled.")
    ] = None,
    write_residuals: Annotated[
        Path | None,
        typer.Option("--write-residuals", help="Write the residuals file the error bars come from (developers)."),
    ] = None,
    category: Annotated[
        str | None, typer.Option("--category", help="Only this category (e.g. memory, inference, measured-h200).")
    ] = None,
    catalog: CatalogOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Predicted vs published for every measurement gpuplan can express, with per-category errors."""
    from rich.markup import escape
    from rich.table import Table

    from gpuplan.specs.context import Context

    rec = api.validate(file, Context.of(catalog or []), category)
    if write_residuals is not None:
        write_residuals.write_text(json.dumps(api.residual_file(rec), indent=1) + "\n", encoding="utf-8")
    if as_json:
        emit_json(rec)
        return
    c = console()
    t = Table(title="Predicted vs published")
    for col in ("id", "kind", "predicted", "published", "error", "largest term"):
        t.add_column(col, justify="right" if col in ("predicted", "published", "error") else "left")
    for r in rec.rows:
        if r.unit == "fits":
            pred, pub = ("fits" if r.predicted else "OOM"), ("fits" if r.published else "OOM")
            err = "ok" if r.error == 0 else "[red]wrong[/red]"
        elif r.unit == "bytes":
            pred, pub, err = gib(r.predicted), gib(r.published), f"{r.error:+.1%}"
        else:
            pred, pub, err = (
                f"{r.predicted:,.4g}",
                f"{r.published:,.4g} {escape(r.unit)}",
                f"{r.error:+.1%}",
            )
        kind = r.kind + (f" ({r.measured_as})" if r.unit == "bytes" else "")
        t.add_row(r.id, escape(kind), pred, pub, err, escape(r.dominant))
    c.print(t)
    s = Table(title="Summary per category")
    for col in ("category", "n", "median |error|", "mean |error|"):
        s.add_column(col, justify="left" if col == "category" else "right")
    for cat, v in rec.summary.items():
        s.add_row(cat, str(v["n"]), f"{v['median_abs_error']:.1%}", f"{v['mean_abs_error']:.1%}")
    c.print(s)
    k = Table(title="By kind of figure (the error bars come from these)")
    for col in ("kind", "n", "median |error|", "mean |error|", "median error (bias)"):
        k.add_column(col, justify="left" if col == "kind" else "right")
    for kind, v in rec.by_kind.items():
        k.add_row(
            escape(kind),
            str(v["n"]),
            f"{v['median_abs_error']:.1%}",
            f"{v['mean_abs_error']:.1%}",
            f"{v['median_error']:+.1%}",
        )
    c.print(k)
    _stack_tables(rec)
    if rec.skipped:
        c.print(f"{len(rec.skipped)} rows not expressed:")
        by_reason: dict[str, list[str]] = {}
        for sk in rec.skipped:
            by_reason.setdefault(sk.reason, []).append(sk.id)
        for reason, ids in by_reason.items():
            c.print(f"  • {escape(reason)}: {', '.join(ids)}")


def _stack_tables(rec: Validation) -> None:
    """The everyday stacks per family, figure and split, and every source with its skip count."""
    from rich.markup import escape
    from rich.table import Table

    c = console()
    if rec.by_stack:
        t = Table(title="By stack (held-out rows are never fitted)")
        for col in ("stack / figure / split", "n", "median |error|", "median error (bias)"):
            t.add_column(col, justify="left" if col.startswith("stack") else "right")
        for key, v in rec.by_stack.items():
            done = "median_abs_error" in v
            t.add_row(
                escape(key),
                str(int(v["n"])),
                f"{v['median_abs_error']:.1%}" if done else "-",
                f"{v['median_error']:+.1%}" if done else "-",
            )
        c.print(t)
    if rec.by_source:
        t = Table(title="By source")
        for col in ("source", "n", "skipped", "median |error|", "held-out median |error|"):
            t.add_column(col, justify="left" if col == "source" else "right")
        for src, v in rec.by_source.items():
            t.add_row(
                escape(src),
                str(int(v["n"])),
                str(int(v["skipped"])),
                f"{v['median_abs_error']:.1%}" if "median_abs_error" in v else "-",
                f"{v['heldout_median_abs_error']:.1%}" if "heldout_median_abs_error" in v else "-",
            )
        c.print(t)


@app.command()
def version() -> None:
    """Print gpuplan's version."""
    sys.stdout.write(f"gpuplan {__version__}\n")


@app.command()
@workload_flags
def launch(
    workload: Annotated[str, typer.Argument(help="Workload YAML, or the JSON `gpuplan plan --json` printed.")],
    fmt: Annotated[
        str,
        typer.Option(
            "--format",
            "-f",
            help="torchrun | accelerate | deepspeed | fsdp | slurm | skypilot | vllm | torchtitan | nemo | axolotl "
            "| llama-factory | torchtune | unsloth (default: the workload framework's own)",
        ),
    ] = "",
    cluster: Annotated[
        str | None, typer.Option("--cluster", help="NODESxGPUS:GPU[:INTERCONNECT], e.g. 16x8:H100.")
    ] = None,
    script: Annotated[str, typer.Option(help="Training script torchrun starts.")] = "train.py",
    out: Annotated[Path | None, typer.Option("--out", "-o", help="Write the file here instead of stdout.")] = None,
    partition: Annotated[str | None, typer.Option(help="Slurm partition.")] = None,
    gres_type: Annotated[
        str | None, typer.Option("--gres-type", help="Slurm GPU type name at your site (default from the GPU).")
    ] = None,
    time_limit: Annotated[
        str | None, typer.Option("--time", help="Slurm --time (default: the estimate with a margin).")
    ] = None,
    set_: SetOpt = None,
    force: Annotated[
        bool, typer.Option("--force", help="Write the file even for a job that does not fit (it would not run).")
    ] = False,
    catalog: CatalogOpt = None,
    as_json: JsonOpt = False,
    flags: dict[str, Any] | None = None,
) -> None:
    """Write a launch file for a workload's layout (searched on the cluster unless the workload sets one)."""
    from gpuplan.specs.context import Context

    keys = workload_keys(flags or {}, set_)
    rec = api.launch(
        workload, fmt, keys, cluster, script, (), Context.of(catalog or []), partition, gres_type, time_limit, force
    )
    from gpuplan.interfaces.launch import FIT_WARNING

    # launch --force on a job that does not fit: said on stderr too, not only in the file (a JSON
    # file, which has no comments, carries it among its notes)
    lines = [x.removeprefix("# ") for x in rec.text.splitlines()[:3]] + rec.notes
    warning = next((x for x in lines if x.startswith(FIT_WARNING)), None)
    if warning:
        sys.stderr.write(f"gpuplan: {warning}\n")
    if as_json:
        emit_json(rec)
        return
    for note in rec.notes:  # a changed setting, a JSON file's layout: beside the file, not in it
        if note != warning:
            sys.stderr.write(f"gpuplan: {note}\n")
    if out is not None:
        try:
            out.write_text(rec.text, encoding="utf-8")
        except OSError as exc:
            raise GpuplanError(f"Cannot write {str(out)!r}: {exc.strerror or exc}.") from None
        sys.stderr.write(f"gpuplan: wrote {out} ({rec.format}, layout {rec.layout})\n")
        return
    sys.stdout.write(rec.text)


@app.command()
def serve(
    host: Annotated[str, typer.Option(help="Address to listen on (loopback by default: only this machine).")] = (
        "127.0.0.1"
    ),
    port: Annotated[int, typer.Option(help="Port to listen on.")] = 8000,
    catalog: CatalogOpt = None,
    prices: Annotated[Path | None, typer.Option(help="Your own price CSV (same columns as the bundled one).")] = None,
    workers: Annotated[int, typer.Option(help="Server processes (one per core serves many users at once).")] = 1,
) -> None:
    """Start the local web app: plan in the browser, with charts (works offline)."""
    from gpuplan.interfaces import web  # FastAPI and uvicorn load only for this command
    from gpuplan.specs.context import Context

    web.check_serve_options(port, workers)  # before the banner: a bad --port is the only line printed
    Context.of(catalog or [], prices).check()  # a missing or malformed catalog or price file: one line, first
    if not web.is_loopback(host):
        sys.stderr.write(
            f"gpuplan: warning: listening on {host}: anyone who can reach this address can use the app "
            "(it has no login).\n"
        )
    sys.stderr.write(f"gpuplan: the web app is at http://{'localhost' if web.is_loopback(host) else host}:{port}/ "
                     "(Ctrl-C stops it)\n")  # fmt: skip
    web.serve(host, port, catalog or [], prices, workers)


# --- measuring on the local GPU --------------------------------------------------------------------


@app.command()
def bench(
    out: Annotated[Path | None, typer.Option("--out", "-o", help="Write the calibration file (YAML) here.")] = None,
    quick: Annotated[bool, typer.Option("--quick", help="Two matmul sizes instead of five.")] = False,
    device: Annotated[int, typer.Option("--device", help="Which local GPU (CUDA index).")] = 0,
    catalog: CatalogOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Measure this machine's GPU (matmul FLOP/s per precision, memory and host bandwidth) and write a
    calibration file for `estimate`/`plan --calibration`."""
    import yaml
    from rich.table import Table

    from gpuplan.interfaces import bench as bench_api
    from gpuplan.specs.context import Context

    rec = bench_api.bench(quick, device, Context.of(catalog or []))
    if out is not None:
        try:
            out.write_text(yaml.safe_dump(rec["calibration"], sort_keys=False), encoding="utf-8")
        except OSError as exc:
            raise GpuplanError(f"Cannot write {str(out)!r}: {exc.strerror or exc}.") from None
    if as_json:
        emit_json(rec)
        return
    c = console()
    c.print(f"{rec['device_name']} (catalog: {rec['gpu'] or 'no match'}), {gib(rec['memory_bytes'])}, "
            f"compute capability {rec['compute_capability']}, driver {rec.get('driver', '?')}")  # fmt: skip
    t = Table(title="measured")
    for col in ("figure", "measured", "datasheet share"):
        t.add_column(col)
    share = rec.get("share_of_datasheet", {})
    for p, v in rec["matmul_flop_per_s"].items():
        t.add_row(f"matmul {p}", f"{v / 1e12:,.1f} TFLOP/s", f"{share[p]:.0%}" if p in share else "—")
    t.add_row("memory (copy)", fmt_bandwidth(rec["memory_bandwidth_bytes_per_s"]),
              f"{share['memory_bandwidth']:.0%}" if "memory_bandwidth" in share else "—")  # fmt: skip
    if rec["host_to_device_bytes_per_s"]:
        t.add_row("host to device", fmt_bandwidth(rec["host_to_device_bytes_per_s"]), "—")
    c.print(t)
    if out is not None:
        sys.stderr.write(f"gpuplan: wrote {out}; use it with `gpuplan estimate ... --calibration {out}`\n")


@app.command()
def measure(
    workload: Annotated[str, typer.Argument(help="Workload YAML file, or a model name (with --set keys).")],
    steps: Annotated[int, typer.Option("--steps", help="Steps to run (the first is a warm-up).")] = 5,
    device: Annotated[str | None, typer.Option("--device", help="cuda (default when there is one) or cpu.")] = None,
    set_: SetOpt = None,
    catalog: CatalogOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Run the workload for real (random weights) and set step time and peak memory beside the estimate."""
    from rich.table import Table

    from gpuplan.interfaces import measure as measure_api
    from gpuplan.specs.context import Context

    w = api.build_workload(workload, api.parse_set_options(set_ or []))
    rec = measure_api.measure(w, steps, device, Context.of(catalog or []))
    if as_json:
        emit_json(rec)
        return
    c = console()
    what = " (a tiny model of the same family: a check of the code path)" if rec["tiny"] else ""
    t = Table(title=f"{rec['model']} · {rec['task']} on {rec.get('gpu', rec['device'])}{what}")
    for col in ("figure", "measured", "gpuplan", "error"):
        t.add_column(col)
    est = rec.get("estimate") or {}
    err = est.get("error", {})
    rows = [("step time", "step_time_s", "step_time_s", fmt_dur), ("prefill of the batch", "ttft_s", "ttft_s", fmt_dur),
            ("time per output token", "tpot_s", "tpot_s", fmt_dur),
            ("peak allocated", "max_memory_allocated_bytes", "allocated_bytes", gib),
            ("peak reserved", "max_memory_reserved_bytes", "reserved_bytes", gib)]  # fmt: skip
    for label, mk, ek, f in rows:
        if rec.get(mk) is None:
            continue
        e = err.get(ek)
        t.add_row(label, f(rec[mk]), f(est.get(ek)) if est.get(ek) is not None else "—",
                  "—" if e is None else f"{e:+.1%}")  # fmt: skip
    c.print(t)
