"""The `gpuplan` command line: a thin adapter over `gpuplan.interfaces.api`.

Every command takes `--json` and then prints one JSON document. Bad input (an unknown GPU or
model, a malformed file, an impossible setting) prints one line on stderr and exits with 2.
"""

from __future__ import annotations

import json
import math
import os
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from gpuplan import __version__
from gpuplan.errors import GpuplanError
from gpuplan.interfaces import api
from gpuplan.safeio import clip, dumps_json, one_line
from gpuplan.specs.context import Context
from gpuplan.specs.gpu import GIB, GPU, PEAK_COLUMNS

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


def _console() -> Console:
    """Rich console; when piped (no terminal, no $COLUMNS) tables get 160 columns, not 80."""
    width = None
    if not sys.stdout.isatty() and not os.environ.get("COLUMNS"):
        width = 160
    return Console(highlight=False, soft_wrap=False, width=width)


def _finite(value: float | None) -> float | None:
    """A number option's value, refused unless finite: every range check (`x < 0`, `x > max`) is
    false for NaN, so NaN would pass them all; each command then checks its own range."""
    if value is not None and not math.isfinite(value):
        raise typer.BadParameter(f"must be a finite number. Got {value!r}.")
    return value


def _carbon(value: float | None) -> float | None:
    """--carbon: g CO2e/kWh from 0 to 5,000 (the web API's bound; coal plants emit ~1,000)."""
    if value is not None and not (math.isfinite(value) and 0 <= value <= 5_000):
        raise typer.BadParameter(f"must be a grid carbon intensity from 0 to 5,000 g CO2e/kWh. Got {value!r}.")
    return value


def _emit_json(obj: Any) -> None:
    sys.stdout.write(dumps_json(obj) + "\n")  # strict: never a NaN or Infinity token


# --- formatting (display units are chosen here, once) ----------------------------------------


def _tflops(v: float | None) -> str:
    if v is None:
        return "—"
    t = v / 1e12
    if t >= 100:
        return f"{t:,.1f}".removesuffix(".0")
    return f"{t:.1f}" if t >= 1 else f"{t:.2f}"


def _memory(g: GPU) -> str:
    if g.memory_unit_stated == "GiB":
        return f"{g.memory_bytes / GIB:g} GiB"
    return f"{g.memory_bytes / 1e9:g} GB"


def _bandwidth(bps: float) -> str:
    return f"{bps / 1e12:.2f} TB/s" if bps >= 1e12 else f"{bps / 1e9:,.0f} GB/s"


def _count(n: float) -> str:
    for unit, scale in (("T", 1e12), ("B", 1e9), ("M", 1e6), ("K", 1e3)):
        if abs(n) >= scale:
            return f"{n / scale:.2f}{unit}"
    return f"{n:g}"


def _nvlink(g: GPU) -> str:
    if g.nvlink_domain <= 1 or g.nvlink_bandwidth_bytes_per_s == 0:
        return "none"
    return f"{g.nvlink_bandwidth_bytes_per_s / 1e9:g} GB/s ×{g.nvlink_domain}"


def _gpu_table(gpus: list[GPU]) -> Table:
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
            _memory(g),
            _bandwidth(g.memory_bandwidth_bytes_per_s),
            _tflops(p["fp32"]),
            _tflops(p["tf32"]),
            _tflops(p["bf16"]),
            _tflops(p["fp8"]),
            _tflops(p["int8"]),
            f"{g.tdp_watts:g} W",
            _nvlink(g),
            "yes" if g.multi_node else "no",
            g.graphics,
        )
    t.caption = "TFLOP/s (TOP/s for int8). * GeForce: driver licence forbids datacenter use."
    return t


# --- commands ----------------------------------------------------------------------------------


@gpus_app.callback()
def gpus(
    ctx: typer.Context,
    min_memory: Annotated[
        float | None,
        typer.Option("--min-memory", callback=_finite, help="Only GPUs with at least this much memory, in GB."),
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
            _emit_json(rows)
            return
        t = Table(title="What each GPU is for (rules over catalog facts)")
        for col in ("GPU", "compute", "graphics", "multi-node", "recommendation"):
            t.add_column(col, overflow="fold")
        for r in rows:
            t.add_row(r["name"], r["compute"], escape(r["graphics"]), r["multi_node"], r["recommendation"])
        _console().print(t)
        return
    if as_json:
        _emit_json([api.gpu_record(g) for g in found])
    else:
        _console().print(_gpu_table(found))


@gpus_app.command("show")
def gpus_show(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(help="GPU name or alias, e.g. h100, '4090', 'a100 80gb'.")],
    catalog: CatalogOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Every catalog value of one GPU, with its source."""
    files = list(catalog or []) + list((ctx.obj or {}).get("catalog", []))
    g = api.get_gpu(name, Context.of(files))
    rec = api.gpu_record(g)
    if as_json:
        _emit_json(rec)
        return
    c = _console()
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
    row("memory", f"{_memory(g)} {g.memory_type}", "memory_GiB" if g.memory_unit_stated == "GiB" else "memory_GB")
    row("memory bandwidth", _bandwidth(g.memory_bandwidth_bytes_per_s), "memory_bandwidth_GBps")
    for p, col in PEAK_COLUMNS.items():
        row(f"{p} dense peak", _tflops(g.peak_flop_per_s[p]), col)
    if g.fp16_fp16acc_flop_per_s:
        row("fp16 (fp16 accumulate)", _tflops(g.fp16_fp16acc_flop_per_s), "fp16_fp16acc_TFLOPS")
    if g.fp4_flop_per_s:
        row("fp4 dense peak", _tflops(g.fp4_flop_per_s), "fp4_TFLOPS")
    row("TDP", f"{g.tdp_watts:g} W", "tdp_W")
    row("NVLink", _nvlink(g), "nvlink_GBps")
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
    gs = api.compare_gpus(names, Context.of(catalog or []))
    if as_json:
        _emit_json([api.gpu_record(g) for g in gs])
        return
    t = Table(title="Compared (dense peaks; fp16/bf16 with fp32 accumulate)")
    t.add_column("")
    for g in gs:
        t.add_column(g.name, justify="right")
    p = [g.peak_flop_per_s for g in gs]
    rows: list[tuple[str, list[str]]] = [
        ("architecture (CC)", [f"{g.architecture} ({g.compute_capability or 'n/a'})" for g in gs]),
        ("form factor", [g.form_factor for g in gs]),
        ("memory", [f"{_memory(g)} {g.memory_type}" for g in gs]),
        ("bandwidth", [_bandwidth(g.memory_bandwidth_bytes_per_s) for g in gs]),
        *[(f"{k} TFLOP/s", [_tflops(x[k]) for x in p]) for k in ("fp64", "fp32", "tf32", "fp16", "bf16", "fp8")],
        *[(f"{k} TOP/s", [_tflops(x[k]) for x in p]) for k in ("int8", "int4")],
        ("TDP", [f"{g.tdp_watts:g} W" for g in gs]),
        ("NVLink", [_nvlink(g) for g in gs]),
        ("multi-node", ["yes" if g.multi_node else "no (one host)" for g in gs]),
        ("MIG", [str(g.mig_instances) if g.mig_instances else "no" for g in gs]),
        ("graphics", [g.graphics for g in gs]),
        ("RT cores / NVENC", [f"{g.rt_cores} / {g.nvenc}" for g in gs]),
        ("launch", [str(g.launch_year) for g in gs]),
    ]
    for label, vals in rows:
        t.add_row(label, *vals)
    c = _console()
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
    spec = api.get_model(name)
    rec = api.model_record(spec, seq_len)
    if as_json:
        _emit_json(rec)
        return
    t = Table(title=f"{escape(spec.name)} ({spec.model_type}, {spec.kind})", show_header=False)
    t.add_column("")
    t.add_column("", justify="right")
    t.add_row("total parameters", f"{rec['total_params']:,} ({_count(rec['total_params'])})")
    if spec.is_moe:
        t.add_row(
            "active parameters per token",
            f"{rec['active_params']:,} ({_count(rec['active_params'])}; {spec.experts_per_token} of {spec.num_experts} experts)",
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
        t.add_row(f"forward FLOPs per token @ {rec['flops_per_token_context']}", _count(rec["flops_per_token"]))
    else:
        t.add_row("forward FLOPs per image (224²)", _count(rec["flops_per_token"]))
    if rec["preset"] and rec["preset"]["published_params"]:
        t.add_row("published total", f"{rec['preset']['published_params']:,}")
    _console().print(t)


@app.command()
def models(as_json: JsonOpt = False) -> None:
    """The bundled model presets."""
    rows = api.list_models()
    if as_json:
        _emit_json(rows)
        return
    t = Table(title=f"{len(rows)} bundled presets")
    for col in ("preset", "Hugging Face id", "type", "parameters", "active"):
        t.add_column(col)
    for r in rows:
        t.add_row(r["name"], r["hf_id"], r["model_type"], _count(r["total_params"]), _count(r["active_params"]))
    _console().print(t)


# --- memory: fit, estimate, validate -----------------------------------------------------------

SetOpt = Annotated[
    list[str] | None,
    typer.Option("--set", help="Any workload key as KEY=VALUE (repeatable), e.g. --set optimizer=adamw-8bit."),
]


def _gib(b: float | None) -> str:
    return "—" if b is None else f"{b / GIB:,.2f} GiB"


def _workload_title(rec: dict[str, Any]) -> str:
    w = rec["workload"]
    task = w.get("task", "inference")
    if rec.get("throughput_unit") == "images/s":
        what = f"{task}, batch {w.get('batch_size', 1)} images"
    elif task == "inference":
        what = (
            f"inference, batch {w.get('batch_size', 1)} × {w.get('input_len', 128)}+{w.get('output_len', 128)} tokens"
        )
    else:
        what = f"{task}, batch {w.get('batch_size', 1)} × {w.get('seq_len', 2048)} tokens"
    return f"{rec['model']} · {what} · {w.get('precision', 'bf16')}"


def _breakdown_table(mem: dict[str, Any], title: str) -> Table:
    t = Table(title=title)
    t.add_column("term")
    t.add_column("per GPU", justify="right")
    t.add_column("why")
    for line in mem["lines"]:
        t.add_row(escape(line["name"]), _gib(line["bytes"]), escape(line["note"]))
    t.add_row(
        "[bold]total[/bold]", f"[bold]{_gib(mem['per_gpu_bytes'])}[/bold]", f"peak during the {mem['peak_phase']}"
    )
    return t


def _verdict(mem: dict[str, Any], gpu: str, n: int) -> str:
    if mem["fits"] is None:
        return "No GPU given: pass --gpu to get a verdict."
    where = f"{gpu}" + (f" × {n}" if n > 1 else "")
    need = _range(mem, "per_gpu_bytes", _gib)  # with the validation range where estimate gives one
    spill = mem.get("paged_spill_bytes") or 0.0
    if mem["fits"] and spill > 0:
        return (
            f"[green]✓ fits[/green] on {where} with {_gib(spill)} of the paged optimizer states in host RAM: "
            f"{_gib(mem['on_card_bytes'])} on the card of {_gib(mem['capacity_bytes'])} usable "
            f"({need} in all; the spilled states cross PCIe every optimizer step)"
        )
    if mem["fits"]:
        return (
            f"[green]✓ fits[/green] on {where}: {need} of {_gib(mem['capacity_bytes'])} usable, "
            f"headroom {_gib(mem['headroom_bytes'])}"
        )
    if spill > 0:
        return (
            f"[red]✗ does not fit[/red] on {where}: {_gib(mem['on_card_bytes'])} must stay on the card "
            f"even with {_gib(spill)} of paged optimizer states in host RAM ({need} in all), "
            f"{_gib(mem['capacity_bytes'])} usable ({_gib(-mem['headroom_bytes'])} short)"
        )
    return (
        f"[red]✗ does not fit[/red] on {where}: {need} needed, "
        f"{_gib(mem['capacity_bytes'])} usable ({_gib(-mem['headroom_bytes'])} short)"
    )


def _print_memory_detail(c: Console, mem: dict[str, Any]) -> None:
    c.print(
        f"allocated (torch peak) {_gib(mem['allocated_bytes'])} · reserved {_gib(mem['reserved_bytes'])} · "
        f"device {_gib(mem['per_gpu_bytes'])}"
        + (f" · host RAM {_gib(mem['host_bytes'])}" if mem["host_bytes"] else "")
        + (
            f" (of which {_gib(mem['paged_spill_bytes'])} paged out to host RAM)"
            if mem.get("paged_spill_bytes")
            else ""
        )
    )
    for note in mem["notes"]:
        c.print(f"  • {escape(note)}")
    srv = mem.get("serving")
    if srv and srv["max_tokens"] == 0:
        c.print(
            f"serving (vLLM, gpu_memory_utilization {srv['gpu_memory_utilization']:g}): no room left for a KV cache "
            "after weights and the profile run; use more GPUs (tensor parallel) or smaller weights"
        )
    elif srv:
        c.print(
            f"serving (vLLM, gpu_memory_utilization {srv['gpu_memory_utilization']:g}): KV budget "
            f"{_gib(srv['kv_budget_bytes'])} = {srv['max_tokens']:,} tokens, at most {srv['max_sequences']:,} "
            "concurrent sequences of this length"
        )


@app.command()
def fit(
    workload: Annotated[
        str | None, typer.Argument(help="Workload YAML file, or a model (preset, config.json, hub id).")
    ] = None,
    task: Annotated[str | None, typer.Option(help="pretrain | finetune | lora | qlora | inference")] = None,
    gpu: Annotated[str | None, typer.Option(help="GPU name or alias; without it, a table over all GPUs.")] = None,
    num_gpus: Annotated[int | None, typer.Option(help="GPUs the job uses.")] = None,
    batch_size: Annotated[
        int | None, typer.Option(help="Per-GPU micro-batch (training) / sequences (inference).")
    ] = None,
    seq_len: Annotated[int | None, typer.Option(help="Training sequence length.")] = None,
    precision: Annotated[str | None, typer.Option(help="fp32 | tf32 | fp16 | bf16 | fp8")] = None,
    optimizer: Annotated[
        str | None, typer.Option(help="adamw | adamw-8bit | paged-adamw(-8bit) | sgd | adafactor | lion")
    ] = None,
    checkpointing: Annotated[str | None, typer.Option(help="Activation checkpointing: none | selective | full")] = None,
    zero: Annotated[int | None, typer.Option(help="ZeRO stage 0-3 (FSDP full shard = 3).")] = None,
    lora_rank: Annotated[int | None, typer.Option(help="LoRA rank.")] = None,
    input_len: Annotated[int | None, typer.Option(help="Inference: prompt tokens.")] = None,
    output_len: Annotated[int | None, typer.Option(help="Inference: generated tokens.")] = None,
    weight_dtype: Annotated[
        str | None,
        typer.Option(
            help="Inference weights: bf16, fp8, int8, int4, int4-g128, nvfp4, mxfp4, nf4, awq, gptq, q4_k_m …"
        ),
    ] = None,
    kv_dtype: Annotated[str | None, typer.Option(help="KV cache dtype: bf16 | fp8 …")] = None,
    set_: SetOpt = None,
    catalog: CatalogOpt = None,
    calibration: CalibrationOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Will it fit? A memory breakdown on one GPU, or a table over every GPU in the catalog."""
    keys: dict[str, Any] = {
        "task": task,
        "gpu": gpu,
        "num_gpus": num_gpus,
        "batch_size": batch_size,
        "seq_len": seq_len,
        "precision": precision,
        "optimizer": optimizer,
        "activation_checkpointing": checkpointing,
        "zero": zero,
        "lora_rank": lora_rank,
        "input_len": input_len,
        "output_len": output_len,
        "weight_dtype": weight_dtype,
        "kv_dtype": kv_dtype,
    }
    keys.update(api.parse_set_options(set_ or []))
    w = api.build_workload(workload, keys)
    rec = api.fit(w, Context.of([*(catalog or []), *(calibration or [])]))
    if as_json:
        _emit_json(rec)
        return
    c = _console()
    if "options" in rec:
        _print_graphics_plan(c, rec)
        return
    if "gpus" in rec:
        t = Table(title=f"{escape(_workload_title(rec))} · {rec['num_gpus']} GPU(s)")
        for col, j in (("GPU", "left"), ("memory", "right"), ("needs per GPU", "right"), ("fits", "center")):
            t.add_column(col, justify=j)  # type: ignore[arg-type]
        t.add_column("headroom", justify="right")
        t.add_column("GPUs needed", justify="right")
        for r in rec["gpus"]:
            need = "—" if r["min_gpus"] is None else str(r["min_gpus"])
            if r["min_gpus_layout"]:
                lay = r["min_gpus_layout"]
                how = "ZeRO-3" if lay.get("zero") == 3 else (f"TP {lay['tp']}" if lay.get("tp", 1) > 1 else "")
                if lay.get("pp", 1) > 1:
                    how = f"PP {lay['pp']}"
                need += f" ({how}, {_gib(r['min_gpus_per_gpu_bytes'])} each)" if how else ""
            if r["fits"] and r.get("paged_spill_bytes"):
                need += f" ({_gib(r['paged_spill_bytes'])} of paged states in host RAM)"
            t.add_row(
                r["gpu"],
                _gib(r["memory_bytes"]),
                _range(r, "per_gpu_bytes", _gib),
                "[green]yes[/green]" if r["fits"] else "[red]no[/red]",
                _gib(r["headroom_bytes"]) if r["fits"] else "",
                need,
            )
        c.print(t)
        return
    mem = rec["memory"]
    c.print(_breakdown_table(mem, f"{escape(_workload_title(rec))} on {rec['gpu']} × {rec['num_gpus']}"))
    c.print(_verdict(mem, rec["gpu"], rec["num_gpus"]))
    _print_memory_detail(c, mem)
    if rec["min_gpus"] is not None and rec["min_gpus"] != rec["num_gpus"]:
        c.print(f"fewest {rec['gpu']} that fit: {rec['min_gpus']} {rec['min_gpus_layout']}")
    elif rec["min_gpus"] is None:
        c.print(f"no count of {rec['gpu']} up to 1024 fits with these settings")
    ctx = "longest input+output" if rec["workload"].get("task", "inference") == "inference" else "longest sequence"
    c.print(f"largest batch that fits: {rec['largest_batch']} · {ctx}: {rec['longest_context']:,} tokens")
    if rec.get("best_precision"):
        b = rec["best_precision"]
        c.print(f"least-lossy precision that fits: weights {b['weight_dtype']}, KV cache {b['kv_dtype']}")
    if rec["suggestions"]:
        t = Table(title="What makes it fit" if not mem["fits"] else "What saves memory")
        t.add_column("change")
        t.add_column("per GPU", justify="right")
        t.add_column("fits", justify="center")
        t.add_column("costs")
        for s in rec["suggestions"]:
            t.add_row(
                escape(s["label"]),
                f"{_gib(mem['per_gpu_bytes'])} → {_gib(s['per_gpu_bytes'])}",
                "[green]yes[/green]" if s["fits"] else "no",
                escape(s["cost"]),
            )
        c.print(t)


def _print_graphics_plan(c: Console, rec: dict[str, Any]) -> None:
    w = rec["workload"]
    res = w.get("resolution", "1080p")
    what = {
        "streaming": f"game/app streaming, {w.get('streams', 1)} × {res}{w.get('fps', 60):g}, {w.get('scene', 'medium')} scenes",
        "vdi": f"virtual desktops, {w.get('users', 1)} {w.get('persona', 'knowledge')} users at {res}",
        "render": f"rendering {w.get('frames', 1)} frames at {res}, {w.get('spp', 128)} spp on {w.get('num_gpus', 1)} GPU(s)",
        "ai-video": f"AI video, {w.get('streams', 1)} × {res}{w.get('fps', 30):g} through {w.get('model')}",
    }[w["task"]]
    t = Table(title=f"{what} · ranked by {rec['objective']}")
    for col in ("GPU", "per GPU", "GPUs", "time", "cost", "energy", "limited by"):
        t.add_column(col, justify="left" if col in ("GPU", "limited by") else "right")
    for o in rec["options"]:
        count = f"{o['per_gpu']:,.0f}"
        unit = o["unit"][:-1] if count == "1" and o["unit"] in ("streams", "users") else o["unit"]
        per = f"{count} {unit}"
        time = "—" if o["time_s"] is None else f"{o['time_s'] / 3600:,.2f} h"
        cost = "no price" if o["cost_usd"] is None else f"${o['cost_usd']:,.2f}" + ("/h" if o["time_s"] is None else "")
        energy = f"{o['energy_kwh']:,.2f} kWh" + ("/h" if o["time_s"] is None else "")
        t.add_row(o["gpu"], per, str(o["num_gpus"]), time, cost, energy, escape(o["bottleneck"]))
    c.print(t)
    if rec["unsuitable"]:
        c.print("Unsuitable:")
        by_reason: dict[str, list[str]] = {}
        for u in rec["unsuitable"]:
            by_reason.setdefault(u["why"], []).append(u["gpu"])
        for why, names in by_reason.items():
            c.print(f"  • {escape(why)}: {', '.join(names)}")


def _dur(seconds: float | None) -> str:
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


def _range(rec: dict[str, Any], key: str, fmt: Any) -> str:
    """A figure with its validation range: '12.3 h (9.8–15.1)'."""
    v = rec.get(key)
    if v is None:
        return "—"
    lo, hi = rec.get(f"{key}_low"), rec.get(f"{key}_high")
    return f"{fmt(v)} ({fmt(lo)}–{fmt(hi)})" if lo is not None and hi is not None else fmt(v)


def _print_llm_plan(c: Console, rec: dict[str, Any]) -> None:
    w = rec["workload"]
    mode = rec["mode"]
    unit = rec.get("throughput_unit", "tokens/s")
    job = {
        "training": f"{w.get('task')} {rec['model']}, {w.get('precision', 'bf16')}, batch {w.get('batch_size', 1)}"
        + ("" if unit == "images/s" else f" × {w.get('seq_len', 2048)}"),
        "service": f"serving {rec['model']} to {w.get('batch_size', 1)} concurrent streams, {w.get('input_len', 128)} in / {w.get('output_len', 128)} out",
        "batch inference": f"generating {w.get('tokens', 0):,.0f} tokens with {rec['model']}",
    }[mode]
    if mode == "training" and w.get("tokens"):
        job += f", {w['tokens']:,.3g} " + ("images" if unit == "images/s" else "tokens")
    t = Table(title=f"{escape(job)} · ranked by {rec['objective']}")
    time_head = {"training": "time to train", "service": "request latency", "batch inference": "time"}[mode]
    cost_head = "cost/hour" if mode == "service" else "cost"
    for col in ("#", "GPU", "GPUs", time_head, unit, cost_head, "energy", "limited by", "why"):
        t.add_column(col, justify="right" if col in ("#", "GPUs", time_head, unit, cost_head, "energy") else "left")
    shown = 0
    for o in rec["options"]:
        if not o["fits"]:
            continue
        shown += 1
        cost = "no price" if o["cost_usd"] is None else f"${o['cost_usd']:,.2f}"
        if mode == "training" and not w.get("tokens") and o["usd_per_million_tokens"] is not None:
            cost = f"${o['usd_per_million_tokens']:,.2f}/M" + ("images" if unit == "images/s" else "tok")
        energy = "—" if o["energy_kwh"] is None else f"{o['energy_kwh']:,.2f} kWh"
        marks = []
        if o["meets_deadline"] is False:
            marks.append("[red]misses deadline[/red]")
        if o["within_budget"] is False:
            marks.append("[red]over budget[/red]")
        if o["too_slow"]:
            marks.append("[red]too slow[/red]")
        if o["licence_barred"]:
            marks.append("[red]licence[/red]")
        why = escape(o["why"]) + (" · " + ", ".join(marks) if marks else "")
        t.add_row(
            str(shown),
            o["gpu"],
            str(o["num_gpus"]),
            _range(o, "time_s", _dur),
            _range(o, "throughput", lambda v: f"{v:,.0f}"),
            cost,
            energy,
            escape(o["bottleneck"]),
            why,
        )
    c.print(t)
    unfit = [o for o in rec["options"] if not o["fits"]]
    if unfit:
        names = sorted({o["gpu"] for o in unfit if not any(x["gpu"] == o["gpu"] and x["fits"] for x in rec["options"])})
        if names:
            c.print(f"Does not fit on up to 8 of: {', '.join(names)}")
    c.print(
        f"{rec['considered']} options considered (GPU types × 1, 2, 4, 8); ranges are the 10th–90th percentile "
        "of validation errors for that kind of figure (gpuplan validate)."
    )


@app.command()
def plan(
    workload: Annotated[str, typer.Argument(help="Workload YAML file (or a model name with --set).")],
    objective: Annotated[str | None, typer.Option(help="time | cost | energy")] = None,
    deadline: Annotated[str | None, typer.Option(help="Deadline, e.g. 24h or 3d (options past it are marked).")] = None,
    budget: Annotated[
        float | None, typer.Option(callback=_finite, help="Budget in USD (options over it are marked).")
    ] = None,
    gpus: Annotated[
        str | None, typer.Option("--gpus", help="Only these GPUs, comma-separated, e.g. 3090,A100.")
    ] = None,
    top: Annotated[int | None, typer.Option(min=1, max=100_000, help="Show the best N options.")] = 10,
    prices: Annotated[Path | None, typer.Option("--prices", help="Your price CSV (gpu-prices.csv's columns).")] = None,
    spot: Annotated[bool, typer.Option("--spot", help="Use spot prices.")] = False,
    carbon: Annotated[
        float | None, typer.Option("--carbon", callback=_carbon, help="Grid carbon intensity, g CO2e/kWh.")
    ] = None,
    cluster: Annotated[
        str | None,
        typer.Option(
            "--cluster",
            help="Search parallel layouts on NODESxGPUS:GPU[:INTERCONNECT], e.g. 64x8:H100 or 2x8:A100:roce.",
        ),
    ] = None,
    cross_node_tp: Annotated[
        bool, typer.Option("--allow-cross-node-tp", help="Let tensor parallelism leave the NVLink domain.")
    ] = False,
    set_: SetOpt = None,
    catalog: CatalogOpt = None,
    calibration: CalibrationOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Rank GPU types and counts for a workload by time, cost or energy, with reasons; with
    --cluster (or a `cluster` key), the fastest parallel layouts of a training job on it."""
    keys: dict[str, Any] = {"objective": objective, "deadline": deadline, "budget": budget}
    keys.update(api.parse_set_options(set_ or []))
    w = api.build_workload(workload, keys)
    names = [g.strip() for g in gpus.split(",") if g.strip()] if gpus else []
    rec = api.plan(
        w,
        Context.of([*(catalog or []), *(calibration or [])], prices),
        names,
        top,
        spot,
        carbon,
        cluster,
        cross_node_tp,
    )
    if as_json:
        _emit_json(rec)
        return
    if rec.get("mode") == "cluster":
        _print_cluster_plan(_console(), rec)
    elif w.is_graphics:
        _print_graphics_plan(_console(), rec)
    else:
        _print_llm_plan(_console(), rec)


def _print_cluster_plan(c: Console, rec: dict[str, Any]) -> None:
    cl, search = rec["cluster"], rec["search"]
    w = rec["workload"]
    tab = Table(
        title=f"{escape(rec['model'])} {w.get('task')} on {cl['nodes']} x {cl['gpus_per_node']} {escape(cl['gpu'])} "
        f"({escape(cl['interconnect'])}), global batch {rec['global_batch']} x {w.get('seq_len')} tokens"
    )
    for col, just in (
        ("#", "right"),
        ("layout", "left"),
        ("step", "right"),
        ("tokens/s", "right"),
        ("per GPU", "right"),
        ("MFU", "right"),
        ("memory/GPU", "right"),
        ("comm", "right"),
        ("bubble", "right"),
    ):
        tab.add_column(col, justify=just)  # type: ignore[arg-type]
    for i, r in enumerate(rec["layouts"], 1):
        tab.add_row(
            str(i),
            escape(r["layout"]),
            _range(r, "step_time_s", _dur),
            f"{r['tokens_per_s']:,.0f}",
            f"{r['tokens_per_s_per_gpu']:,.0f}",
            f"{r['mfu']:.1%}",
            _gib(r["per_gpu_bytes"]),
            f"{r['comm_share']:.0%}",
            f"{r['bubble_share']:.0%}",
        )
    c.print(tab)
    if rec["layouts"] and rec["layouts"][0].get("time_to_train_s") is not None:
        best = rec["layouts"][0]
        cost = f", ${best['cost_usd']:,.0f}" if best.get("cost_usd") is not None else ""
        toks = w.get("tokens")
        what = f"{toks:,.3g} tokens" if toks else "its tokens"
        c.print(f"The best layout trains {what} in {_range(best, 'time_to_train_s', _dur)}{cost}.")
    rej = ", ".join(f"{v:,} {k}" for k, v in search["rejected"].items() if v)
    c.print(
        f"Searched {search['evaluated']:,} layouts ({search['fitting']:,} fit in memory; "
        f"{search['micro_batch_shapes']:,} micro-batch shapes) in {search['seconds']:.2f} s."
        + (f" Ruled out: {escape(rej)}." if rej else "")
    )
    for note in rec.get("notes", []):
        c.print(f"[yellow]note:[/] {escape(note)}")
    c.print(
        "Launch files for the best layout: gpuplan launch WORKLOAD.yaml --format torchrun|slurm|skypilot (--cluster if the file names none)"
    )


def _print_time(c: Console, rec: dict[str, Any]) -> None:
    t = rec.get("time")
    if not t:
        return
    tab = Table(title="Time, cost and energy")
    tab.add_column("figure")
    tab.add_column("value (validation range)", justify="right")
    images = rec.get("throughput_unit") == "images/s"
    if "step_time_s" in t:
        tab.add_row("step time", _range(t, "step_time_s", _dur))
        tab.add_row(
            f"{'images' if images else 'tokens'}/s (all GPUs)", _range(t, "tokens_per_s", lambda v: f"{v:,.0f}")
        )
        tab.add_row("MFU / HFU", f"{t['mfu']:.1%} / {t['hfu']:.1%}")
        if t.get("time_to_train_s") is not None:
            tab.add_row(f"time to train {t['train_tokens']:,.3g} tokens", _range(t, "time_to_train_s", _dur))
    elif images:
        tab.add_row(f"batch of {t['batch']} images", _range(t, "ttft_s", _dur))
        tab.add_row("images/s", _range(t, "output_tokens_per_s", lambda v: f"{v:,.0f}"))
    else:
        tab.add_row("time to first token", _range(t, "ttft_s", _dur))
        tab.add_row("time per output token", _range(t, "tpot_s", _dur))
        per = f" per replica x {t['replicas']}" if t.get("replicas", 1) > 1 else ""
        tab.add_row(
            f"output tokens/s at batch {t['batch']}{per}", _range(t, "output_tokens_per_s", lambda v: f"{v:,.0f}")
        )
        if t["best_batch"] != t["batch"]:
            tab.add_row(
                f"best within the KV cache (batch {t['best_batch']}{per})",
                _range(t, "best_output_tokens_per_s", lambda v: f"{v:,.0f}"),
            )
    tab.add_row("limited by", escape(t["bottleneck"]))
    cost, energy = rec["cost"], rec["energy"]
    tab.add_row(
        "cost", "no price listed" if cost["usd"] is None else f"${cost['usd']:,.4g} ({escape(cost['price_source'])})"
    )
    if cost["usd_per_million_tokens"] is not None:
        tab.add_row(f"cost per million {'images' if images else 'tokens'}", f"${cost['usd_per_million_tokens']:,.3g}")
    tab.add_row("energy (GPU)", f"{energy['kwh']:,.4g} kWh at {energy['avg_power_w_per_gpu']:,.0f} W/GPU")
    if energy["co2_kg"] is not None:
        tab.add_row("emissions", f"{energy['co2_kg']:,.3g} kg CO2e")
    c.print(tab)
    ops = t.get("ops") or (t.get("prefill_ops", []) + t.get("decode_ops", []))
    if ops:
        top_ops = Table(title="Largest operators (roofline)")
        for col in ("operator", "phase", "time", "bound"):
            top_ops.add_column(col, justify="right" if col == "time" else "left")
        for o in ops[:8]:
            top_ops.add_row(escape(o["name"]), o["phase"], _dur(o["time_s"]), o["bound"])
        c.print(top_ops)
    shown = set(rec["memory"].get("notes", []))
    for note in dict.fromkeys(t.get("notes", [])):
        if note not in shown:
            c.print(f"  • {escape(note)}")


@app.command()
def estimate(
    workload: Annotated[str, typer.Argument(help="Workload YAML file, or a model name.")],
    gpu: Annotated[str | None, typer.Option(help="GPU name or alias (overrides the file).")] = None,
    num_gpus: Annotated[int | None, typer.Option(help="GPUs the job uses (overrides the file).")] = None,
    prices: Annotated[Path | None, typer.Option("--prices", help="Your price CSV (gpu-prices.csv's columns).")] = None,
    carbon: Annotated[
        float | None, typer.Option("--carbon", callback=_carbon, help="Grid carbon intensity, g CO2e/kWh.")
    ] = None,
    set_: SetOpt = None,
    catalog: CatalogOpt = None,
    calibration: CalibrationOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Memory, time, cost and energy of one workload on one GPU type, each with its breakdown."""
    keys: dict[str, Any] = {"gpu": gpu, "num_gpus": num_gpus}
    keys.update(api.parse_set_options(set_ or []))
    rec = api.estimate(
        api.build_workload(workload, keys), Context.of([*(catalog or []), *(calibration or [])], prices), carbon
    )
    if as_json:
        _emit_json(rec)
        return
    c = _console()
    mem = rec["memory"]
    title = escape(_workload_title(rec)) + (f" on {rec['gpu']} × {rec['num_gpus']}" if rec["gpu"] else "")
    c.print(_breakdown_table(mem, title))
    c.print(_verdict(mem, rec["gpu"] or "", rec["num_gpus"]))
    _print_memory_detail(c, mem)
    _print_time(c, rec)


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
    if which != "relative":
        raise GpuplanError(f"unknown chart {which!r}; the chart available is: relative")
    rec = api.chart_relative(Context.of(catalog or []))
    if png is not None:
        from gpuplan.interfaces.charts import relative_png

        relative_png(rec, png)
    if as_json:
        _emit_json(rec)
        return
    c = _console()
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
    rec = api.validate(file, Context.of(catalog or []), category)
    if write_residuals is not None:
        write_residuals.write_text(json.dumps(api.residual_file(rec), indent=1) + "\n", encoding="utf-8")
    if as_json:
        _emit_json(rec)
        return
    c = _console()
    t = Table(title="Predicted vs published")
    for col in ("id", "kind", "predicted", "published", "error", "largest term"):
        t.add_column(col, justify="right" if col in ("predicted", "published", "error") else "left")
    for r in rec["rows"]:
        if r["unit"] == "fits":
            pred, pub = ("fits" if r["predicted"] else "OOM"), ("fits" if r["published"] else "OOM")
            err = "ok" if r["error"] == 0 else "[red]wrong[/red]"
        elif r["unit"] == "bytes":
            pred, pub, err = _gib(r["predicted"]), _gib(r["published"]), f"{r['error']:+.1%}"
        else:
            pred, pub, err = (
                f"{r['predicted']:,.4g}",
                f"{r['published']:,.4g} {escape(r['unit'])}",
                f"{r['error']:+.1%}",
            )
        kind = r["kind"] + (f" ({r['measured_as']})" if r["unit"] == "bytes" else "")
        t.add_row(r["id"], escape(kind), pred, pub, err, escape(r["dominant"]))
    c.print(t)
    s = Table(title="Summary per category")
    for col in ("category", "n", "median |error|", "mean |error|"):
        s.add_column(col, justify="left" if col == "category" else "right")
    for cat, v in rec["summary"].items():
        s.add_row(cat, str(v["n"]), f"{v['median_abs_error']:.1%}", f"{v['mean_abs_error']:.1%}")
    c.print(s)
    k = Table(title="By kind of figure (the error bars come from these)")
    for col in ("kind", "n", "median |error|", "mean |error|", "median error (bias)"):
        k.add_column(col, justify="left" if col == "kind" else "right")
    for kind, v in rec["by_kind"].items():
        k.add_row(
            escape(kind),
            str(v["n"]),
            f"{v['median_abs_error']:.1%}",
            f"{v['mean_abs_error']:.1%}",
            f"{v['median_error']:+.1%}",
        )
    c.print(k)
    if rec["skipped"]:
        c.print(f"{len(rec['skipped'])} rows not expressed:")
        by_reason: dict[str, list[str]] = {}
        for k in rec["skipped"]:
            by_reason.setdefault(k["reason"], []).append(k["id"])
        for reason, ids in by_reason.items():
            c.print(f"  • {escape(reason)}: {', '.join(ids)}")


@app.command()
def version() -> None:
    """Print gpuplan's version."""
    sys.stdout.write(f"gpuplan {__version__}\n")


@app.command()
def launch(
    workload: Annotated[str, typer.Argument(help="Workload YAML, or the JSON `gpuplan plan --json` printed.")],
    fmt: Annotated[
        str, typer.Option("--format", "-f", help="torchrun | accelerate | deepspeed | fsdp | slurm | skypilot | vllm")
    ],
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
    catalog: CatalogOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Write a launch file for a workload's layout (searched on the cluster unless the workload sets one)."""
    keys = api.parse_set_options(set_ or [])
    rec = api.launch(
        workload, fmt, keys, cluster, script, (), Context.of(catalog or []), partition, gres_type, time_limit
    )
    if as_json:
        _emit_json(rec)
        return
    if out is not None:
        try:
            out.write_text(rec["text"], encoding="utf-8")
        except OSError as exc:
            raise GpuplanError(f"Cannot write {str(out)!r}: {exc.strerror or exc}.") from None
        sys.stderr.write(f"gpuplan: wrote {out} ({rec['format']}, layout {rec['layout']})\n")
        return
    sys.stdout.write(rec["text"])


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

    from gpuplan.interfaces import bench as bench_api

    rec = bench_api.bench(quick, device, Context.of(catalog or []))
    if out is not None:
        try:
            out.write_text(yaml.safe_dump(rec["calibration"], sort_keys=False), encoding="utf-8")
        except OSError as exc:
            raise GpuplanError(f"Cannot write {str(out)!r}: {exc.strerror or exc}.") from None
    if as_json:
        _emit_json(rec)
        return
    c = _console()
    c.print(f"{rec['device_name']} (catalog: {rec['gpu'] or 'no match'}), {_gib(rec['memory_bytes'])}, "
            f"compute capability {rec['compute_capability']}, driver {rec.get('driver', '?')}")  # fmt: skip
    t = Table(title="measured")
    for col in ("figure", "measured", "datasheet share"):
        t.add_column(col)
    share = rec.get("share_of_datasheet", {})
    for p, v in rec["matmul_flop_per_s"].items():
        t.add_row(f"matmul {p}", f"{v / 1e12:,.1f} TFLOP/s", f"{share[p]:.0%}" if p in share else "—")
    t.add_row("memory (copy)", _bandwidth(rec["memory_bandwidth_bytes_per_s"]),
              f"{share['memory_bandwidth']:.0%}" if "memory_bandwidth" in share else "—")  # fmt: skip
    if rec["host_to_device_bytes_per_s"]:
        t.add_row("host to device", _bandwidth(rec["host_to_device_bytes_per_s"]), "—")
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
    from gpuplan.interfaces import measure as measure_api

    w = api.build_workload(workload, api.parse_set_options(set_ or []))
    rec = measure_api.measure(w, steps, device, Context.of(catalog or []))
    if as_json:
        _emit_json(rec)
        return
    c = _console()
    what = " (a tiny model of the same family: a check of the code path)" if rec["tiny"] else ""
    t = Table(title=f"{rec['model']} · {rec['task']} on {rec.get('gpu', rec['device'])}{what}")
    for col in ("figure", "measured", "gpuplan", "error"):
        t.add_column(col)
    est = rec.get("estimate") or {}
    err = est.get("error", {})
    rows = [("step time", "step_time_s", "step_time_s", _dur), ("time to first token", "ttft_s", "ttft_s", _dur),
            ("time per output token", "tpot_s", "tpot_s", _dur),
            ("peak allocated", "max_memory_allocated_bytes", "allocated_bytes", _gib),
            ("peak reserved", "max_memory_reserved_bytes", "reserved_bytes", _gib)]  # fmt: skip
    for label, mk, ek, f in rows:
        if rec.get(mk) is None:
            continue
        e = err.get(ek)
        t.add_row(label, f(rec[mk]), f(est.get(ek)) if est.get(ek) is not None else "—",
                  "—" if e is None else f"{e:+.1%}")  # fmt: skip
    c.print(t)


# --- lab mode ----------------------------------------------------------------------------------

lab_app = typer.Typer(help="Lab mode: share a mixed GPU pool fairly, on Slurm.", no_args_is_help=True)
app.add_typer(lab_app, name="lab")
LabFile = Annotated[Path, typer.Argument(help="The lab file (YAML: nodes, members, jobs).")]
PolicyOpt = Annotated[str, typer.Option("--policy", help="fair | makespan | cost")]


@lab_app.command("check")
def lab_check(lab_file: LabFile, catalog: CatalogOpt = None, as_json: JsonOpt = False) -> None:
    """Per job, on each of the lab's GPU types: does it fit, on how many GPUs, how many hours."""
    from gpuplan.interfaces import lab as lab_api

    rec = lab_api.check(lab_file, Context.of(catalog or []))
    if as_json:
        _emit_json(rec)
        return
    c = _console()
    types = [i["gpu"] for i in rec["inventory"]]
    inv = ", ".join(f"{i['count']}x {i['gpu']} ({i['gres']})" for i in rec["inventory"])
    t = Table(title=f"{len(rec['jobs'])} jobs on {inv}")
    t.add_column("job")
    t.add_column("owner")
    for g in types:
        t.add_column(g)
    for j in rec["jobs"]:
        cells = []
        for o in j["options"]:
            cells.append(f"{o['num_gpus']} GPU · {o['hours']:,.1f} h" if o["fits"] else f"✗ {escape(o['reason'])}")
        t.add_row(j["name"], j["owner"], *cells)
    c.print(t)
    w = rec["speed_weights"]
    c.print("speed per GPU (slowest = 1): " + ", ".join(f"{g} {w[g]:.2f}" for g in types))


@lab_app.command("allocate")
def lab_allocate(
    lab_file: LabFile,
    policy: PolicyOpt = "fair",
    png: Annotated[Path | None, typer.Option("--png", help="Draw the schedule as a Gantt chart.")] = None,
    no_burst: Annotated[bool, typer.Option("--no-burst", help="cost policy: no cloud GPUs.")] = False,
    spot: Annotated[bool, typer.Option("--spot", help="cost policy: rent at spot prices.")] = False,
    prices: PricesOpt = None,
    catalog: CatalogOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """A heterogeneity-aware allocation (Gavel's LP): each job's GPU type, count and finish."""
    from gpuplan.interfaces import lab as lab_api

    rec = lab_api.allocate(lab_file, policy, Context.of(catalog or [], prices), burst=not no_burst, spot=spot)
    if png is not None:
        from gpuplan.interfaces.charts import gantt_png

        gantt_png(rec, png)
    if as_json:
        _emit_json(rec)
        return
    c = _console()
    t = Table(title=f"gpuplan lab allocate --policy {policy}")
    for col in ("job", "owner", "GPU type", "GPUs", "time on it", "expected finish"):
        t.add_column(col)
    for j in rec["jobs"]:
        shares = j.get("time_shares") or {}
        main = shares.get(j["gpu"])
        t.add_row(j["name"], j["owner"], j["gpu"], str(j["num_gpus"]), "—" if main is None else f"{main:.0%}",
                  _dur(j["expected_finish_s"]))  # fmt: skip
    c.print(t)
    if "members" in rec:
        m = Table(title="members (GPU-hours; normalised: 1 h on the slowest type = 1)")
        for col in ("member", "share", "GPU-hours", "normalised", "budget / month"):
            m.add_column(col)
        for r in rec["members"]:
            budget = "—" if r["budget_gpu_hours_per_month"] is None else f"{r['budget_gpu_hours_per_month']:,.0f}"
            if r["over_budget"]:
                budget += " (over)"
            m.add_row(
                r["name"], f"{r['share']:g}", f"{r['gpu_hours']:,.1f}", f"{r['normalised_gpu_hours']:,.1f}", budget
            )
        c.print(m)
    for r in rec["refused"]:
        c.print(f"refused {r['name']}: fits on no GPU type ({'; '.join(f'{g}: {x}' for g, x in r['reasons'].items())})")
    if rec["metric"] == "cloud_usd":
        c.print(f"cloud spend ${rec['cloud_usd']:,.2f}; an equal split would rent ${rec['equal_split']['cloud_usd']:,.2f} "
                f"and first-come-first-served ${rec['fcfs']['cloud_usd']:,.2f} to meet the same deadlines")  # fmt: skip
    else:
        what = "makespan" if rec["metric"] == "makespan_s" else "average job completion time"
        ours, eq, ff = rec["schedule"][rec["metric"]], rec["equal_split"][rec["metric"]], rec["fcfs"][rec["metric"]]
        c.print(f"{what}: {_dur(ours)}; equal split {_dur(eq)} ({rec['gain_vs_equal_split']:.2f}x better), "
                f"first-come-first-served {_dur(ff)} ({rec['gain_vs_fcfs']:.2f}x better)")  # fmt: skip
    if png is not None:
        sys.stderr.write(f"gpuplan: wrote {png}\n")


@lab_app.command("slurm-config")
def lab_slurm_config(
    lab_file: LabFile,
    out: Annotated[
        Path | None, typer.Option("--out", "-o", help="Write gres.conf, slurm.conf.lab, sacctmgr.sh here.")
    ] = None,
    catalog: CatalogOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """gres.conf and slurm.conf lines for the inventory (billing weights from speed), and sacctmgr for members."""
    from gpuplan.interfaces import lab as lab_api

    rec = lab_api.slurm_config(lab_file, Context.of(catalog or []))
    if as_json:
        _emit_json(rec)
        return
    parts = (("gres.conf", rec["gres_conf"]), ("slurm.conf.lab", rec["slurm_conf"]), ("sacctmgr.sh", rec["sacctmgr"]))
    if out is not None:
        try:
            out.mkdir(parents=True, exist_ok=True)
            for name, text in parts:
                (out / name).write_text(text, encoding="utf-8")
        except OSError as exc:
            raise GpuplanError(f"Cannot write to {str(out)!r}: {exc.strerror or exc}.") from None
        sys.stderr.write(f"gpuplan: wrote {', '.join(n for n, _ in parts)} to {out}\n")
        return
    for name, text in parts:
        sys.stdout.write(f"# --- {name} ---\n{text}\n")


@lab_app.command("submit")
def lab_submit(
    lab_file: LabFile,
    policy: PolicyOpt = "fair",
    out: Annotated[Path | None, typer.Option("--out", "-o", help="Folder for the sbatch scripts.")] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Write the scripts; do not call sbatch.")] = False,
    force: Annotated[
        bool,
        typer.Option(
            "--force",
            help="Write into a non-empty folder: scripts of the same name are replaced by rename (a symlink is "
            "replaced, never written through); an earlier submitted.json is kept as submitted-N.json.",
        ),
    ] = False,
    catalog: CatalogOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """One sbatch per job on the GPU type the allocation chose (--gres=gpu:TYPE:N, --time, --account).
    The folder must be empty (or --force); submitted.json is rewritten after each sbatch, so
    `gpuplan lab status` reads what was sent even if the submission stops midway. Exit code 1 when
    sbatch refused a job (the others are still sent)."""
    from gpuplan.interfaces import lab as lab_api

    rec = lab_api.submit(lab_file, policy, out, dry_run, ctx=Context.of(catalog or []), force=force)
    failed = [j["name"] for j in rec["jobs"] if j.get("sbatch") == "failed"]
    if as_json:
        _emit_json(rec)
        _sbatch_refused(failed, rec)
        return
    c = _console()
    t = Table(title=f"{'scripts written (dry run)' if dry_run else 'submitted'} to {rec['folder']}")
    for col in ("job", "GPU type", "gres", "estimate", "job id"):
        t.add_column(col)
    for j in rec["jobs"]:
        ident = j["job_id"] or ("—" if dry_run else f"✗ {escape(' '.join(j.get('error') or []))}")
        t.add_row(j["name"], j["gpu"], j["gres"], _dur(j["estimate_s"]), ident)
    c.print(t)
    for r in rec["refused"]:
        c.print(f"refused {r['name']} (not submitted): it fits on no GPU type: "
                + "; ".join(f"{g}: {escape(x)}" for g, x in r["reasons"].items()))  # fmt: skip
    _sbatch_refused(failed, rec)


def _sbatch_refused(failed: list[str], rec: dict[str, Any]) -> None:
    """One stderr line and exit code 1 when sbatch refused some of `lab submit`'s jobs."""
    if failed:
        names = ", ".join(failed[:5]) + (", ..." if len(failed) > 5 else "")
        record = clip(str(Path(rec["folder"]) / "submitted.json"))
        sys.stderr.write(f"gpuplan: sbatch refused {len(failed)} of {len(rec['jobs'])} jobs ({names}); "
                         f"{record} records each outcome\n")  # fmt: skip
        raise typer.Exit(1)


@lab_app.command("status")
def lab_status(
    folder: Annotated[Path, typer.Argument(help="The folder `gpuplan lab submit` wrote (its submitted.json).")],
    as_json: JsonOpt = False,
) -> None:
    """Submitted jobs from squeue/sacct: state and elapsed time against the estimate."""
    from gpuplan.interfaces import lab as lab_api

    rec = lab_api.status(folder)
    if as_json:
        _emit_json(rec)
        return
    title = f"lab jobs submitted from {escape(rec['folder'])}"
    if not rec.get("complete", True):
        title += " (the submission stopped midway: jobs NOT SUBMITTED were never sent)"
    t = Table(title=title)
    for col in ("job", "id", "gres", "state", "elapsed", "estimate", "progress"):
        t.add_column(col)
    for j in rec["jobs"]:  # squeue's words and the record's, printed as text (no markup, no control codes)
        state = clip(j["state"]) + (f" ({clip(j['reason'])})" if j["reason"] and j["reason"] != "None" else "")
        prog = "—" if j["progress"] is None else f"{j['progress']:.0%}"
        t.add_row(escape(j["name"]), escape(str(j["job_id"] or "—")), escape(clip(j["gres"])), escape(state),
                  _dur(j["elapsed_s"]), _dur(j["estimate_s"]), prog)  # fmt: skip
    _console().print(t)


@app.command("rent-vs-buy")
def rent_vs_buy(
    gpu: Annotated[str, typer.Argument(help="GPU name or alias, e.g. 4090, 'a100 80gb', l40s.")],
    hours_per_month: Annotated[
        float, typer.Option(callback=_finite, help="GPU-hours the card is used a month (0-744; a full month is ~730).")
    ] = 200.0,
    years: Annotated[float, typer.Option(callback=_finite, help="How long you would own it (the horizon).")] = 3.0,
    price: Annotated[
        float | None, typer.Option("--price", callback=_finite, help="Purchase price of one card, USD.")
    ] = None,
    purchase_prices: Annotated[
        Path | None, typer.Option("--purchase-prices", help="Your purchase-price CSV (purchase.csv's columns).")
    ] = None,
    rent_usd_per_hour: Annotated[
        float | None,
        typer.Option(callback=_finite, help="On-demand rent per GPU-hour, USD (default: cheapest in the snapshot)."),
    ] = None,
    usd_per_kwh: Annotated[
        float | None, typer.Option(callback=_finite, help="Electricity price (default: US commercial 2022).")
    ] = None,
    pue: Annotated[
        float | None, typer.Option(callback=_finite, help="Facility power / IT power (default 1.58; a desk ~1.0).")
    ] = None,
    hosting_usd_per_month: Annotated[
        float | None, typer.Option(callback=_finite, help="Host server share per GPU slot a month, USD (default ~$51).")
    ] = None,
    resale_fraction: Annotated[
        float | None,
        typer.Option(callback=_finite, help="Share of the price the card fetches at the end (default: 1 - years/6)."),
    ] = None,
    prices: Annotated[
        Path | None, typer.Option("--prices", help="Your rental price CSV (gpu-prices.csv's columns).")
    ] = None,
    catalog: CatalogOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Buy one GPU or rent it? Cost of owning per year and per used hour, against renting on demand and on
    spot, with the break-even use above which buying is cheaper."""
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
        _emit_json(rec)
        return

    def usd(v: float) -> str:
        return f"-${-v:,.0f}" if v < 0 else (f"${v:,.0f}" if abs(v) >= 100 else f"${v:,.2f}")

    def per_hour(v: float | None) -> str:
        return "—" if v is None else f"${v:,.3f}"

    def nice(v: float) -> str:
        return f"{v:g}"

    h, n, own, s, bought = rec["hours_per_month"], rec["years"], rec["own"], rec["settings"], rec["purchase"]
    years_txt = f"{nice(n)} year" + ("" if n == 1 else "s")
    c = _console()
    t = Table(title=escape(f"Owning one {rec['gpu']} for {years_txt}, used {nice(h)} GPU-hours a month"))
    for col in ("term", "USD", "why"):
        t.add_column(col, justify="right" if col == "USD" else "left")
    b = own["breakdown"]
    bought_why = "--price" if bought["kind"] == "user" else f"{bought['kind']} price of {bought['date']} (source below)"
    t.add_row("purchase", usd(b["purchase_usd"]), escape(bought_why))
    t.add_row(
        "host share",
        usd(b["hosting_usd"]),
        escape(f"${s['hosting_usd_per_month']:,.2f} a month: {rec['basis']['hosting_usd_per_month']}"),
    )
    t.add_row(
        "electricity",
        usd(b["electricity_usd"]),
        escape(
            f"{own['energy_kwh']:,.0f} kWh: {s['board_power_w']:g} W x PUE {s['pue']:g} x ${s['usd_per_kwh']:.4f}/kWh "
            f"over {own['used_hours']:,.0f} GPU-hours"
        ),
    )
    t.add_row(
        f"resale after {years_txt}",
        usd(b["resale_usd"]),
        escape(f"{s['resale_fraction']:.0%} of the price: {rec['basis']['resale_fraction']}"),
    )
    t.add_row(
        "total",
        usd(own["total_usd"]),
        f"{usd(own['usd_per_year'])} a year · {per_hour(own['usd_per_used_hour'])} per used GPU-hour",
    )
    c.print(t)

    r = Table(title=escape(f"Against renting the same {nice(h)} GPU-hours a month"))
    for col in ("option", "per GPU-hour", "per year", f"{years_txt}", "break-even use", "payback", "cheaper"):
        r.add_column(col, justify="left" if col in ("option", "cheaper") else "right")
    r.add_row("own", per_hour(own["usd_per_used_hour"]), usd(own["usd_per_year"]), usd(own["total_usd"]), "", "", "")
    sources: list[str] = []
    for kind, label in (("on_demand", "rent on demand"), ("spot", "rent on spot")):
        o = rec["rent"][kind]
        if o is None:
            r.add_row(label, "no price listed", "", "", "", "", "")
            continue
        be = o["break_even_hours_per_month"]
        if be is None:
            be_txt = "never (rent < electricity)"
        elif not o["break_even_reachable"]:
            be_txt = f"{be:,.0f} h/month: never"
        else:
            be_txt = f"{be:,.0f} h/month ({o['break_even_share_of_month']:.0%})"
        pb = o["payback_months"]
        r.add_row(
            label,
            per_hour(o["usd_per_hour"]),
            usd(o["usd_per_year"]),
            usd(o["total_usd"]),
            be_txt,
            "never" if pb is None else f"{pb:,.1f} months",
            o["cheaper"],
        )
        sources.append(f"{label}: {o['price_source']}")
    c.print(r)
    if bought["kind"] != "user":
        sources.insert(0, f"purchase price: {bought['source']}")
    for line in sources:
        c.print(escape(line))
    c.print(
        escape(
            "break-even use: GPU-hours a month (share of an average month) above which buying is cheaper over the "
            f"horizon; payback: months at {nice(h)} h/month until the rent saved repays the price less resale."
        )
    )
    c.print(escape(f"Not counted: {rec['basis']['not_counted']}."))


def main(argv: list[str] | None = None) -> int:
    """Entry point: run the CLI; input errors become one line on stderr and exit code 2."""
    try:
        # without standalone mode click returns a command's `typer.Exit(code)` instead of raising it
        code = app(args=argv, prog_name="gpuplan", standalone_mode=False)
        if isinstance(code, int) and not isinstance(code, bool):
            return code
    except GpuplanError as exc:
        sys.stderr.write(f"gpuplan: error: {one_line(str(exc))}\n")
        return 2
    except typer.Exit as exc:
        return int(getattr(exc, "exit_code", 0) or 0)
    except typer.Abort:
        sys.stderr.write("gpuplan: aborted\n")
        return 1
    except BrokenPipeError:
        return 0
    except Exception as exc:
        # usage errors (bad option value, unknown command) are click exceptions; typer vendors its
        # own copy of click, so they are recognised by their interface rather than their class
        if hasattr(exc, "format_message") and hasattr(exc, "exit_code"):
            message = str(exc.format_message())
            if not message:  # no arguments: the help was printed
                return 0
            sys.stderr.write(f"gpuplan: error: {one_line(message)}\n")
            return 2
        raise
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
