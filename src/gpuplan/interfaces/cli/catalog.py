"""GPU and model commands: `gpus`, `gpus show`, `compare`, `model`, `models`, `chart`."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from gpuplan.errors import GpuplanError
from gpuplan.interfaces import api
from gpuplan.interfaces.cli.common import (
    CatalogOpt,
    JsonOpt,
    app,
    console,
    emit_json,
    finite,
    fmt_bandwidth,
    fmt_count,
    fmt_memory,
    fmt_nvlink,
    fmt_tflops,
    gpu_table,
    gpus_app,
)

# --- commands ----------------------------------------------------------------------------------


@gpus_app.callback()
def gpus(
    ctx: typer.Context,
    min_memory: Annotated[
        float | None,
        typer.Option("--min-memory", callback=finite, help="Only GPUs with at least this much memory, in GB."),
    ] = None,
    dtype: Annotated[
        str | None, typer.Option("--dtype", help="Only GPUs with native units for this precision (e.g. fp8, bf16).")
    ] = None,
    graphics: Annotated[
        bool | None, typer.Option("--graphics/--no-graphics", help="Only GPUs with (without) a graphics mode.")
    ] = None,
    multi_node: Annotated[
        bool | None,
        typer.Option("--multi-node/--single-node", help="Only GPUs built (not built) to scale across hosts."),
    ] = None,
    vendor: Annotated[str | None, typer.Option("--vendor", help="Only this vendor (NVIDIA, AMD).")] = None,
    use_cases: Annotated[
        bool, typer.Option("--use-cases", help="Per GPU: compute, graphics and multi-node suitability, and advice.")
    ] = False,
    catalog: CatalogOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """List the GPU catalog (filters combine)."""
    from rich.markup import escape
    from rich.table import Table

    from gpuplan.specs.context import Context

    if ctx.invoked_subcommand is not None:
        ctx.obj = {"catalog": catalog or []}
        return
    found = api.list_gpus(
        min_memory_gb=min_memory,
        dtype=dtype,
        graphics=graphics,
        multi_node=multi_node,
        vendor=vendor,
        ctx=Context.of(catalog or []),
    )
    if use_cases:
        rows = [api.use_case_record(g) for g in found]
        if as_json:
            emit_json(rows)
            return
        t = Table(title="What each GPU is for (rules over catalog facts)")
        for col in ("GPU", "compute", "graphics", "multi-node", "recommendation"):
            t.add_column(col, overflow="fold")
        for r in rows:
            t.add_row(r["name"], r["compute"], escape(r["graphics"]), r["multi_node"], r["recommendation"])
        console().print(t)
        return
    if as_json:
        emit_json([api.gpu_record(g) for g in found])
    else:
        console().print(gpu_table(found))


@gpus_app.command("show")
def gpus_show(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(help="GPU name or alias, e.g. h100, '4090', 'a100 80gb'.")],
    catalog: CatalogOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Every catalog value of one GPU, with its source."""
    from rich.markup import escape
    from rich.table import Table

    from gpuplan.specs.context import Context
    from gpuplan.specs.gpu import PEAK_COLUMNS

    files = list(catalog or []) + list((ctx.obj or {}).get("catalog", []))
    g = api.get_gpu(name, Context.of(files))
    rec = api.gpu_record(g)
    if as_json:
        emit_json(rec)
        return
    c = console()
    t = Table(title=g.name, show_header=True)
    t.add_column("field")
    t.add_column("value")
    t.add_column("source")
    src = dict(g.sources)

    def row(label: str, value: str, field: str) -> None:
        s = src.get(field)
        t.add_row(label, value, escape(f"[{s.key}]") if s else "")

    row("vendor / architecture", f"{g.vendor} {g.architecture} ({g.chip})", "architecture")
    row("compute capability", g.compute_capability or "n/a", "compute_capability")
    row("form factor", g.form_factor, "form_factor")
    row("memory", f"{fmt_memory(g)} {g.memory_type}", "memory_GiB" if g.memory_unit_stated == "GiB" else "memory_GB")
    row("memory bandwidth", fmt_bandwidth(g.memory_bandwidth_bytes_per_s), "memory_bandwidth_GBps")
    for p, col in PEAK_COLUMNS.items():
        row(f"{p} dense peak", fmt_tflops(g.peak_flop_per_s[p]), col)
    if g.fp16_fp16acc_flop_per_s:
        row("fp16 (fp16 accumulate)", fmt_tflops(g.fp16_fp16acc_flop_per_s), "fp16_fp16acc_TFLOPS")
    if g.fp4_flop_per_s:
        row("fp4 dense peak", fmt_tflops(g.fp4_flop_per_s), "fp4_TFLOPS")
    row("TDP", f"{g.tdp_watts:g} W", "tdp_W")
    row("NVLink", fmt_nvlink(g), "nvlink_GBps")
    row("PCIe", f"Gen{g.pcie_gen}", "pcie_gen")
    row("multi-node", "yes" if g.multi_node else "no (one host)", "multi_node")
    row("MIG", f"up to {g.mig_instances}" if g.mig_instances else "no", "mig_instances")
    row("graphics", f"{g.graphics} (outputs: {g.display_outputs}, vGPU: {g.vgpu})", "display_outputs")
    row("RT cores", f"{g.rt_cores} (gen {g.rt_core_gen})" if g.rt_cores else "0", "rt_cores")
    row("NVENC / NVDEC", f"{g.nvenc} / {g.nvdec}", "nvenc")
    row("launch year", str(g.launch_year), "launch_year")
    row("GeForce licence", "forbids datacenter use" if g.geforce_eula else "no restriction", "geforce_eula")
    c.print(t)
    for q in rec["quirks"]:
        c.print(f"• {q}")
    c.print("Sources:")
    for entry in rec["sources"]:
        c.print(
            f"  [{entry['key']}] {entry['title']} ({entry['url']}), {entry['where']}; read {entry['read']}",
            markup=False,
        )
    if g.notes:
        c.print(f"Notes: {g.notes}", markup=False)


@app.command()
def compare(
    names: Annotated[list[str], typer.Argument(help="Two or more GPU names or aliases.")],
    catalog: CatalogOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Specs side by side, with each GPU's precision quirks spelled out."""
    from rich.table import Table

    from gpuplan.specs.context import Context

    gs = api.compare_gpus(names, Context.of(catalog or []))
    if as_json:
        emit_json([api.gpu_record(g) for g in gs])
        return
    t = Table(title="Compared (dense peaks; fp16/bf16 with fp32 accumulate)")
    t.add_column("")
    for g in gs:
        t.add_column(g.name, justify="right")
    p = [g.peak_flop_per_s for g in gs]
    rows: list[tuple[str, list[str]]] = [
        ("architecture (CC)", [f"{g.architecture} ({g.compute_capability or 'n/a'})" for g in gs]),
        ("form factor", [g.form_factor for g in gs]),
        ("memory", [f"{fmt_memory(g)} {g.memory_type}" for g in gs]),
        ("bandwidth", [fmt_bandwidth(g.memory_bandwidth_bytes_per_s) for g in gs]),
        *[(f"{k} TFLOP/s", [fmt_tflops(x[k]) for x in p]) for k in ("fp64", "fp32", "tf32", "fp16", "bf16", "fp8")],
        *[(f"{k} TOP/s", [fmt_tflops(x[k]) for x in p]) for k in ("int8", "int4")],
        ("TDP", [f"{g.tdp_watts:g} W" for g in gs]),
        ("NVLink", [fmt_nvlink(g) for g in gs]),
        ("multi-node", ["yes" if g.multi_node else "no (one host)" for g in gs]),
        ("MIG", [str(g.mig_instances) if g.mig_instances else "no" for g in gs]),
        ("graphics", [g.graphics for g in gs]),
        ("RT cores / NVENC", [f"{g.rt_cores} / {g.nvenc}" for g in gs]),
        ("launch", [str(g.launch_year) for g in gs]),
    ]
    for label, vals in rows:
        t.add_row(label, *vals)
    c = console()
    c.print(t)
    for g in gs:
        qs = api.quirks(g)
        if qs:
            c.print(f"[bold]{g.name}[/bold]")
            for q in qs:
                c.print(f"  • {q}")


@app.command()
def model(
    name: Annotated[str, typer.Argument(help="Preset name, path to a config.json (or its folder), or a hub id.")],
    seq_len: Annotated[
        int | None,
        typer.Option("--seq-len", help="Context length for FLOPs per token [default: 2048, or the model's maximum]."),
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Parameters, layers, KV-cache bytes per token and FLOPs per token of a model."""
    from rich.markup import escape
    from rich.table import Table

    spec = api.get_model(name)
    rec = api.model_record(spec, seq_len)
    if as_json:
        emit_json(rec)
        return
    t = Table(title=f"{escape(spec.name)} ({spec.model_type}, {spec.kind})", show_header=False)
    t.add_column("")
    t.add_column("", justify="right")
    t.add_row("total parameters", f"{rec['total_params']:,} ({fmt_count(rec['total_params'])})")
    if spec.is_moe:
        t.add_row(
            "active parameters per token",
            f"{rec['active_params']:,} ({fmt_count(rec['active_params'])}; {spec.experts_per_token} of {spec.num_experts} experts)",
        )
    for role, n in rec["params_by_role"].items():
        t.add_row(f"  {role}", f"{n:,}")
    if spec.kind != "cnn":
        t.add_row("layers × hidden", f"{spec.num_layers} × {spec.hidden_size}")
        t.add_row(
            "attention",
            f"{spec.attention_type.upper()}: {spec.num_heads} heads, {spec.num_kv_heads} KV heads, head dim {spec.head_dim}",
        )
        if rec["sliding_windows"]:
            t.add_row("sliding window", ", ".join(str(w) for w in rec["sliding_windows"]))
        t.add_row("vocabulary", f"{spec.vocab_size:,}" + (" (tied embeddings)" if spec.tie_word_embeddings else ""))
        kv = f"{rec['kv_bytes_per_token'] / 1024:,.1f} KiB"
        if rec["sliding_windows"]:
            beyond = rec["kv_bytes_per_token_beyond_windows"]
            kv += f" ({beyond / 1024:,.1f} KiB past the window{'s' if len(rec['sliding_windows']) > 1 else ''})"
        t.add_row("KV cache per token (16-bit)", kv)
        t.add_row(f"forward FLOPs per token @ {rec['flops_per_token_context']}", fmt_count(rec["flops_per_token"]))
    else:
        t.add_row("forward FLOPs per image (224²)", fmt_count(rec["flops_per_token"]))
    if rec["preset"] and rec["preset"]["published_params"]:
        t.add_row("published total", f"{rec['preset']['published_params']:,}")
    console().print(t)


@app.command()
def models(as_json: JsonOpt = False) -> None:
    """The bundled model presets."""
    from rich.table import Table

    rows = api.list_models()
    if as_json:
        emit_json(rows)
        return
    t = Table(title=f"{len(rows)} bundled presets")
    for col in ("preset", "Hugging Face id", "type", "parameters", "active"):
        t.add_column(col)
    for r in rows:
        t.add_row(r["name"], r["hf_id"], r["model_type"], fmt_count(r["total_params"]), fmt_count(r["active_params"]))
    console().print(t)


@app.command()
def chart(
    which: Annotated[str, typer.Argument(help="The chart: relative.")],
    png: Annotated[
        Path | None, typer.Option("--png", help="Also draw it as a PNG bar chart (needs matplotlib).")
    ] = None,
    catalog: CatalogOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Each GPU's speed relative to H100 SXM = 100% for 16-bit training, 16-bit and 8-bit inference."""
    from rich.markup import escape
    from rich.table import Table

    from gpuplan.specs.context import Context

    if which != "relative":
        raise GpuplanError(f"unknown chart {which!r}; the chart available is: relative")
    rec = api.chart_relative(Context.of(catalog or []))
    if png is not None:
        from gpuplan.interfaces.charts import relative_png

        relative_png(rec, png)
    if as_json:
        emit_json(rec)
        return
    c = console()
    w = rec["workloads"]
    t = Table(title=f"Speed relative to {rec['reference_gpu']} = 100% ({w['model']})")
    for col in ("GPU", "16-bit training", "16-bit inference", "8-bit inference", "8-bit vs 16-bit"):
        t.add_column(col, justify="left" if col == "GPU" else "right")
    for r in rec["rows"]:
        t.add_row(
            r["gpu"],
            f"{r['train_16bit_pct']:.0f}%",
            f"{r['infer_16bit_pct']:.0f}%",
            f"{r['infer_8bit_pct']:.0f}%",
            f"{r['speedup_8bit_vs_16bit']:.2f}×" + ("" if r["fp8_native"] else " (no FP8)"),
        )
    c.print(t)
    c.print(
        f"Training: {w['model']} {w['training_16bit']['seq_len']}-token sequences, batch {w['training_16bit']['batch_size']}. "
        f"Inference: {w['inference_16bit']['input_len']} in / {w['inference_16bit']['output_len']} out, "
        f"{w['inference_16bit']['batch_size']} concurrent sequences. {escape(w['note'])}"
    )
    if png is not None:
        c.print(f"Wrote {png}")
