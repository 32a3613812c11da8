"""`fit` and `estimate`: will it fit, and how fast, at what cost and energy."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Final

from gpuplan.interfaces.cli.answers import estimate_answer, fit_answer
from gpuplan.interfaces.cli.common import (
    CalibrationOpt,
    CarbonOpt,
    CatalogOpt,
    JsonOpt,
    PricesOpt,
    SetOpt,
    WorkloadArg,
    app,
    console,
    emit_json,
    fmt_dur,
    fmt_energy,
    fmt_usd,
    gib,
    with_range,
    workload_flags,
)

if TYPE_CHECKING:
    from rich.console import Console
    from rich.table import Table

    from gpuplan.results import (
        Estimate,
        FitResult,
        FitRow,
        FitTable,
        InferenceSpeed,
        Memory,
        ServingQueue,
        TrainingSpeed,
        Verdict,
    )


def _workload_title(model: str, w: dict[str, Any], throughput_unit: str = "tokens/s") -> str:
    task = w.get("task", "inference")
    if throughput_unit == "images/s":
        what = f"{task}, batch {w.get('batch_size', 1)} images"
    elif task == "inference":
        what = (
            f"inference, batch {w.get('batch_size', 1)} × {w.get('input_len', 128)}+{w.get('output_len', 128)} tokens"
        )
    else:
        what = f"{task}, batch {w.get('batch_size', 1)} × {w.get('seq_len', 2048)} tokens"
    precision = w.get("precision", "bf16")
    # the weights' own format where it is not the precision (a GGUF, AWQ or fp8-weight job): the
    # engines' defaults as Workload.effective_weight_dtype has them (Ollama Q4_K_M, AutoAWQ AWQ)
    weights = (
        w.get("weight_dtype") or {"ollama": "q4_k_m", "autoawq": "awq"}.get(w.get("engine", ""))
        if task == "inference"
        else None
    )
    return f"{model} · {what} · {precision}" + (f", {weights} weights" if weights and weights != precision else "")


def _changes(changes: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v}" for k, v in changes.items())


def print_verdict(c: Console, v: Verdict) -> None:
    """The answer first: fits or not, by how much, what binds, and the verified fixes."""
    from rich.markup import escape

    if v.fits is None or v.gpu is None:  # the answer first even so: what it needs to give one
        c.print(
            "No GPU given: pass --gpu NAME for a verdict, time and cost (`gpuplan fit` lists every GPU that holds it)."
        )
        return
    where = f"{v.num_gpus}× {v.gpu}"
    if v.fits:
        c.print(f"[green]✓ Fits[/green] on {where} with {gib(v.headroom_bytes)} per GPU to spare ({v.limit} binds)")
        for note in v.notes:
            c.print(f"  [yellow]![/yellow] {escape(note)}")
        return
    if v.capacity_bytes is not None and v.per_gpu_bytes <= v.capacity_bytes:  # the engine's KV budget binds
        c.print(
            f"[red]✗ Does not fit[/red] on {where}: {escape(v.limit)} is {gib(v.short_by_bytes)} short of one "
            f"sequence's KV cache; the engine would not start ({gib(v.per_gpu_bytes)} peak of "
            f"{gib(v.capacity_bytes)} usable)"
        )
    else:
        c.print(
            f"[red]✗ Does not fit[/red] on {where}: {gib(v.short_by_bytes)} short per GPU "
            f"({gib(v.per_gpu_bytes)} needed, {gib(v.capacity_bytes)} usable; {v.limit} binds)"
        )
    for note in v.notes:
        c.print(f"  [yellow]![/yellow] {escape(note)}")
    if not v.fixes:
        c.print("  No change gpuplan knows makes it fit on these GPUs or any larger one in the catalog.")
        return
    c.print("  What makes it fit (each verified by the estimate; the least change first):")
    for i, f in enumerate(v.fixes, 1):
        time = "" if f.time_s is None else f", {f.time_what} {fmt_dur(f.time_s)}"
        if f.time_s is not None and f.time_what == "output token":  # a partial offload: its decode speed
            time = f", {fmt_dur(f.time_s)} per output token"
        price = "" if f.usd_per_hour is None else f", {fmt_usd(f.usd_per_hour)}/h"
        c.print(
            f"  {i}. {escape(f.label)}: {escape(_changes(f.changes))} → {gib(f.per_gpu_bytes)} per GPU on "
            f"{f.num_gpus}× {escape(f.gpu)}{time}{price}"
        )


def _breakdown_table(mem: Memory, title: str) -> Table:
    from rich.markup import escape
    from rich.table import Table

    t = Table(title=title)
    t.add_column("term")
    t.add_column("per GPU", justify="right")
    t.add_column("why")
    for line in mem.lines:
        t.add_row(escape(line.name), gib(line.bytes), escape(line.note))
    t.add_row("[bold]total[/bold]", f"[bold]{gib(mem.per_gpu_bytes)}[/bold]", f"peak during the {mem.peak_phase}")
    return t


def _verdict(mem: Memory, gpu: str, n: int) -> str:
    from rich.markup import escape

    if mem.fits is None:
        return "No GPU given: pass --gpu to get a verdict."
    where = f"{gpu}" + (f" × {n}" if n > 1 else "")
    need = with_range(mem, "per_gpu_bytes", gib)  # with the validation range where estimate gives one
    spill = mem.paged_spill_bytes or 0.0
    short = -(mem.headroom_bytes or 0.0)
    if mem.fits and spill > 0:
        return (
            f"[green]✓ fits[/green] on {where} with {gib(spill)} of the paged optimizer states in host RAM: "
            f"{gib(mem.on_card_bytes)} on the card of {gib(mem.capacity_bytes)} usable "
            f"({need} in all; the spilled states cross PCIe every optimizer step)"
        )
    if mem.fits:
        return (
            f"[green]✓ fits[/green] on {where}: {need} of {gib(mem.capacity_bytes)} usable, "
            f"headroom {gib(mem.headroom_bytes)}"
        )
    srv = mem.serving
    if srv is not None and srv.binds and (mem.headroom_bytes or 0.0) >= 0:
        return (
            f"[red]✗ does not fit[/red] on {where}: the peak, {need}, is within {gib(mem.capacity_bytes)} usable, "
            f"but {escape(srv.limit)} cannot hold one sequence (below)"
        )
    if spill > 0:
        return (
            f"[red]✗ does not fit[/red] on {where}: {gib(mem.on_card_bytes)} must stay on the card "
            f"even with {gib(spill)} of paged optimizer states in host RAM ({need} in all), "
            f"{gib(mem.capacity_bytes)} usable ({gib(short)} short)"
        )
    return f"[red]✗ does not fit[/red] on {where}: {need} needed, {gib(mem.capacity_bytes)} usable ({gib(short)} short)"


# engines whose KV budget the serving line reports (estimators/memory/inference.py _serving)
SERVING_VIEW_ENGINES: Final = frozenset({"vllm", "sglang", "tgi"})


# engines that are not a PyTorch process: their peak is not torch.cuda.max_memory_allocated
NON_TORCH_ENGINES: Final = frozenset({"llama.cpp", "ollama", "tensorrt-llm", "mlc"})
# engines without a KV pool to fill: their best batch is the one that fits in memory
NO_KV_POOL_ENGINES: Final = frozenset({"transformers", "autoawq", "llama.cpp", "ollama"})


def _print_memory_detail(c: Console, mem: Memory, engine: Any = "vllm") -> None:
    from rich.markup import escape

    peak = "peak" if engine in NON_TORCH_ENGINES else "torch peak"
    c.print(
        f"allocated ({peak}) {gib(mem.allocated_bytes)} · reserved {gib(mem.reserved_bytes)} · "
        f"device {gib(mem.per_gpu_bytes)}"
        + (f" · host RAM {gib(mem.host_bytes)}" if mem.host_bytes else "")
        + (f" (of which {gib(mem.paged_spill_bytes)} paged out to host RAM)" if mem.paged_spill_bytes else "")
    )
    for note in mem.notes:
        c.print(f"  • {escape(note)}")
    # the serving line is the engine's own view of its KV budget: only engines that size one
    # (vLLM, SGLang, TGI); llama.cpp, Ollama, transformers and the others have none to report
    srv = mem.serving if engine in SERVING_VIEW_ENGINES else None
    who = (
        "TGI, cuda_memory_fraction"
        if engine == "tgi"
        else f"{srv.engine if srv and srv.engine else 'vLLM'}, gpu_memory_utilization"
    )
    if srv and srv.max_sequences == 0:
        left = (
            "no room left for a KV cache after weights and the profile run"
            if srv.kv_budget_bytes <= 0
            else f"a KV budget of {gib(srv.kv_budget_bytes)}"
        )
        c.print(
            f"serving ({who} {srv.gpu_memory_utilization:g}): {left}, "
            f"{gib(srv.kv_short_bytes)} short of one sequence ({gib(srv.sequence_kv_bytes)} of KV cache); "
            + (
                "it would not start: see the fixes above"
                if srv.engine
                else "for reference only: the workload's engine does not refuse to start on it"
            )
        )
    elif srv:
        c.print(
            f"serving ({who} {srv.gpu_memory_utilization:g}): KV budget "
            f"{gib(srv.kv_budget_bytes)} = {srv.max_tokens:,} tokens, at most {srv.max_sequences:,} "
            "concurrent sequences of this length"
        )


@app.command()
@workload_flags
def fit(
    workload: WorkloadArg = None,
    flags: dict[str, Any] | None = None,
    set_: SetOpt = None,
    catalog: CatalogOpt = None,
    calibration: CalibrationOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Will it fit? A memory breakdown on one GPU (--gpu), or without one a table over every GPU in
    the catalog."""
    rec = fit_answer(workload, flags or {}, set_, catalog, calibration)
    if as_json:
        emit_json(rec)
        return
    from gpuplan.results import FitTable, GraphicsPlan  # the plan's types load where a table is drawn

    if isinstance(rec, GraphicsPlan):
        from gpuplan.interfaces.cli.plan import print_graphics_plan  # plan's module: a graphics job only

        print_graphics_plan(console(), rec)
    elif isinstance(rec, FitTable):
        _print_fit_table(console(), rec)
    else:
        _print_fit(console(), rec)


def _fit_table_answer(rec: FitTable) -> str:
    """One line above fit's table: the smallest card that holds the job at its GPU count (rows come
    fewest GPUs first, then least memory), else the fewest GPUs by sharding alone."""
    from rich.markup import escape

    fits = [r for r in rec.gpus if r.fits]
    n = rec.num_gpus
    if fits and fits[0].serving is not None:
        return f"{_serving_answer(fits, n)}; {len(fits)} of {len(rec.gpus)} GPU types do."
    if fits:
        r = fits[0]
        return f"[green]✓ Fits[/green] on {n}× {escape(r.gpu)} ({gib(r.per_gpu_bytes)} per GPU), the smallest that holds it; {len(fits)} of {len(rec.gpus)} GPU types do."
    more = [r for r in rec.gpus if r.min_gpus is not None]
    if not more:
        return f"[red]✗ Fits no catalog GPU[/red] at {n} or with sharding up to 1024 GPUs: see `gpuplan estimate --gpu NAME` for fixes."
    r = more[0]
    how = _count_layout(r.min_gpus_layout)
    return (
        f"[red]✗ Fits no single GPU type at {n}[/red]; fewest by sharding alone: {r.min_gpus}× {escape(r.gpu)}{how} "
        "(`gpuplan plan` also tries checkpointing and may need fewer)."
    )


def _serving_answer(fits: list[FitRow], n: int) -> str:
    """The answer for an engine that preallocates its KV cache: what the job needs on the smallest
    card that starts it, what the engine reserves there, and how much of the batch runs at once."""
    from rich.markup import escape

    r, s = fits[0], fits[0].serving
    assert s is not None
    start = f", {gib(s.start_bytes)} to start with one" if s.start_bytes < r.per_gpu_bytes - 0.5 else ""
    out = (
        f"[green]✓ Fits[/green] on {n}× {escape(r.gpu)} (needs {gib(r.per_gpu_bytes)} per GPU for its batch of "
        f"{s.batch_size}{start}; {escape(s.engine)} reserves {gib(s.reserved_bytes)} at gpu_memory_utilization "
        f"{s.gpu_memory_utilization:g}), the smallest that holds it"
    )
    if s.runs_at_once < s.batch_size:
        whole = next((x for x in fits if x.serving and x.serving.runs_at_once >= s.batch_size), None)
        out += f"; it runs {s.runs_at_once} of the {s.batch_size} sequences at once and the rest wait"
        out += f" (all {s.batch_size} at once from {n}× {escape(whole.gpu)})" if whole else ""
    return out


def _runs_at_once(r: FitRow) -> str:
    s = r.serving
    if s is None or not r.fits:
        return ""
    if s.runs_at_once >= s.batch_size:
        return f"all {s.batch_size} (holds {s.max_sequences:,})"
    return f"{s.runs_at_once} of {s.batch_size} ({s.batch_size - s.runs_at_once} wait)"


def _print_fit_table(c: Console, rec: FitTable) -> None:
    from rich.markup import escape
    from rich.table import Table

    c.print(_fit_table_answer(rec))  # the answer first, then the table
    t = Table(title=f"{escape(_workload_title(rec.model, rec.workload))} · {rec.num_gpus} GPU(s)")
    srv = next((r.serving for r in rec.gpus if r.serving), None)  # every row's engine preallocates, or none
    start = srv is not None and any(r.serving and r.serving.start_bytes < r.per_gpu_bytes - 0.5 for r in rec.gpus)
    for col, j in (("GPU", "left"), ("memory", "right"), ("needs per GPU", "right")):
        t.add_column(col, justify=j)  # type: ignore[arg-type]
    if start:
        t.add_column("to start", justify="right")
    if srv:
        t.add_column(f"{escape(srv.engine)} reserves", justify="right")
    t.add_column("fits", justify="center")
    t.add_column("runs at once" if srv else "headroom", justify="right")
    # the fewest GPUs by sharding alone (ZeRO-3 / TP / PP): `plan` may need fewer with checkpointing
    t.add_column("GPUs needed (sharding alone)", justify="right")
    for r in rec.gpus:
        need = "—" if r.min_gpus is None else str(r.min_gpus)
        if r.min_gpus_layout:
            lay = r.min_gpus_layout
            how = "ZeRO-3" if lay.get("zero") == 3 else (f"TP {lay['tp']}" if lay.get("tp", 1) > 1 else "")
            if lay.get("pp", 1) > 1:
                how = f"PP {lay['pp']}"
            need += f" ({how}, {gib(r.min_gpus_per_gpu_bytes)} each)" if how else ""
        if r.fits and r.paged_spill_bytes:
            need += f" ({gib(r.paged_spill_bytes)} of paged states in host RAM)"
        t.add_row(
            r.gpu,
            gib(r.memory_bytes),
            with_range(r, "per_gpu_bytes", gib),
            *([gib(r.serving.start_bytes if r.serving else None)] if start else []),
            *([gib(r.serving.reserved_bytes if r.serving else None)] if srv else []),
            "[green]yes[/green]" if r.fits else "[red]no[/red]",
            _runs_at_once(r) if srv else (gib(r.headroom_bytes) if r.fits else ""),
            need,
        )
    c.print(t)
    if srv:
        c.print(
            "needs per GPU: the weights, activations, CUDA context and the whole batch's KV cache. "
            f"{escape(srv.engine)} reserves gpu_memory_utilization {srv.gpu_memory_utilization:g} of each card "
            "at start-up whatever the job needs (its KV pool fills the rest) and starts where one sequence's KV "
            "fits in it; where the pool holds fewer sequences than the batch, that many run at once and the rest wait."
        )
    if rec.cannot_run:
        c.print(f"Cannot run it ({escape(rec.cannot_run_why)}): {escape(', '.join(rec.cannot_run))}.")


def _count_layout(layout: Mapping[str, Any]) -> str:
    """How the fewest-GPU count splits the job, in words: " (ZeRO-3)", " (TP 4)", or ""."""
    parts = [f"ZeRO-{layout['zero']}"] if layout.get("zero") else []
    parts += [f"{key.upper()} {layout[key]}" for key in ("tp", "pp") if int(layout.get(key) or 1) > 1]
    return f" ({', '.join(parts)})" if parts else ""


def _print_fit(c: Console, rec: FitResult) -> None:
    from rich.markup import escape
    from rich.table import Table

    print_verdict(c, rec.verdict)
    mem = rec.memory
    c.print(_breakdown_table(mem, f"{escape(_workload_title(rec.model, rec.workload))} on {rec.gpu} × {rec.num_gpus}"))
    c.print(_verdict(mem, rec.gpu, rec.num_gpus))
    _print_memory_detail(c, mem, rec.workload.get("engine"))
    if rec.min_gpus is not None and rec.min_gpus != rec.num_gpus:
        c.print(f"fewest {rec.gpu} that fit: {rec.min_gpus}{_count_layout(rec.min_gpus_layout)}")
    elif rec.min_gpus is None:
        c.print(f"no count of {rec.gpu} up to 1024 fits with these settings")
    ctx = "longest input+output" if rec.workload.get("task", "inference") == "inference" else "longest sequence"
    c.print(f"largest batch that fits: {rec.largest_batch} · {ctx}: {rec.longest_context:,} tokens")
    if rec.best_precision:
        b = rec.best_precision
        c.print(f"least-lossy precision that fits: weights {b.weight_dtype}, KV cache {b.kv_dtype}")
    if rec.suggestions:
        t = Table(title="What makes it fit" if not mem.fits else "What saves memory")
        t.add_column("change")
        t.add_column("per GPU", justify="right")
        t.add_column("fits", justify="center")
        t.add_column("costs")
        for s in rec.suggestions:
            t.add_row(
                escape(s.label),
                f"{gib(mem.per_gpu_bytes)} → {gib(s.per_gpu_bytes)}",
                "[green]yes[/green]" if s.fits else "no",
                escape(s.cost),
            )
        c.print(t)


def _rate(v: float) -> str:
    return f"{v:,.0f}"


def _time_rows(
    tab: Table,
    t: TrainingSpeed | InferenceSpeed,
    images: bool,
    rate: float | None = None,
    engine: Any = "vllm",
    closed_loop: bool = False,
    prompts: int | None = None,
) -> None:
    """The speed rows of the time table: a training step, or latency and throughput of inference
    (`prompts`: a finite run's num_prompts, whose first token is its median prompt's)."""
    from gpuplan.results import TrainingSpeed

    if isinstance(t, TrainingSpeed):
        tab.add_row("step time", with_range(t, "step_time_s", fmt_dur))
        tab.add_row(f"{'images' if images else 'tokens'}/s (all GPUs)", with_range(t, "tokens_per_s", _rate))
        tab.add_row("MFU / HFU", f"{t.mfu:.1%} / {t.hfu:.1%}")
        if t.time_to_train_s is not None:
            tab.add_row(f"time to train {t.train_tokens:,.3g} tokens", with_range(t, "time_to_train_s", fmt_dur))
    elif images:
        tab.add_row(f"batch of {t.batch} images", with_range(t, "prefill_batch_s", fmt_dur))
        tab.add_row("images/s", with_range(t, "output_tokens_per_s", _rate))
    elif t.queue is not None:
        _queue_rows(tab, t, t.queue)
    else:
        who = f"{t.batch} kept in flight" if closed_loop and t.batch > 1 else "one request"
        who = f"the median of {prompts} prompts sent at {rate:g}/s" if prompts and rate else who
        tab.add_row(f"time to first token ({who})", with_range(t, "ttft_s", fmt_dur))
        if t.batch > 1 and not (prompts and rate):
            tab.add_row(f"prefill of the batch ({t.batch} prompts)", with_range(t, "prefill_batch_s", fmt_dur))
        tab.add_row("time per output token", with_range(t, "tpot_s", fmt_dur))
        per = f" per replica x {t.replicas}" if t.replicas > 1 else ""
        # under request_rate, what the arrivals deliver (at most batch k's rate, which times the latency)
        what = f"delivered at request_rate {rate:g}/s (batch {t.batch})" if rate else f"at batch {t.batch}"
        tab.add_row(f"output tokens/s {what}{per}", with_range(t, "output_tokens_per_s", _rate))
        if t.best_batch != t.batch:
            where = "within memory" if engine in NO_KV_POOL_ENGINES else "within the KV cache"
            tab.add_row(
                f"best {where} (batch {t.best_batch}{per})",
                with_range(t, "best_output_tokens_per_s", _rate),
            )


def _queue_rows(tab: Table, t: InferenceSpeed, q: ServingQueue) -> None:
    """A batch the KV cache does not hold at once: how many run at once first, then the whole batch's
    figures (the median request's, over the whole batch) and a wave's."""
    per = f" per replica x {t.replicas}" if t.replicas > 1 else ""
    tab.add_row("requests at once", f"{q.held} of {q.requests}{per}; the other {q.requests - q.held} wait")
    tab.add_row(f"whole batch ({q.waves} waves)", fmt_dur(q.batch_s))
    tab.add_row("output tokens/s over the whole batch", with_range(t, "output_tokens_per_s", _rate))
    tab.add_row("time to first token (median request)", with_range(t, "ttft_s", fmt_dur))
    tab.add_row("time per output token (median gap)", with_range(t, "tpot_s", fmt_dur))
    tab.add_row(f"prefill of a wave ({q.held} prompts)", with_range(t, "prefill_batch_s", fmt_dur))
    tab.add_row(f"output tokens/s while {q.held} run", _rate(q.wave_output_tokens_per_s))


def _print_time(c: Console, rec: Estimate) -> None:
    from rich.markup import escape
    from rich.table import Table

    from gpuplan.results import TrainingSpeed

    t, cost, energy = rec.time, rec.cost, rec.energy
    if t is None or cost is None or energy is None:
        return
    tab = Table(title="Time, cost and energy")
    tab.add_column("figure")
    tab.add_column("value (validation range)", justify="right")
    images = rec.throughput_unit == "images/s"
    w = rec.workload
    _time_rows(
        tab, t, images, w.get("request_rate"), w.get("engine", "vllm"), bool(w.get("closed_loop")), w.get("num_prompts")
    )
    tab.add_row("limited by", escape(t.bottleneck))
    tab.add_row(
        "cost", "no price listed" if cost.usd is None else f"{fmt_usd(cost.usd)} ({escape(cost.price_source or '')})"
    )
    if cost.usd_per_million_tokens is not None:
        tab.add_row(f"cost per million {'images' if images else 'tokens'}", fmt_usd(cost.usd_per_million_tokens))
    tab.add_row("energy (GPU)", f"{fmt_energy(energy.kwh)} at {energy.avg_power_w_per_gpu:,.0f} W/GPU")
    if energy.co2_kg is not None:
        tab.add_row("emissions", f"{energy.co2_kg:,.3g} kg CO2e")
    c.print(tab)
    ops = t.ops if isinstance(t, TrainingSpeed) else t.prefill_ops + t.decode_ops
    if ops:
        top_ops = Table(title="Largest operators (roofline)")
        for col in ("operator", "phase", "time", "bound"):
            top_ops.add_column(col, justify="right" if col == "time" else "left")
        for o in ops[:8]:
            top_ops.add_row(escape(o.name), o.phase, fmt_dur(o.time_s), o.bound)
        c.print(top_ops)
    shown = set(rec.memory.notes)
    for note in dict.fromkeys(t.notes):
        if note not in shown:
            c.print(f"  • {escape(note)}")


@app.command()
@workload_flags
def estimate(
    workload: WorkloadArg,
    flags: dict[str, Any] | None = None,
    prices: PricesOpt = None,
    carbon: CarbonOpt = None,
    set_: SetOpt = None,
    catalog: CatalogOpt = None,
    calibration: CalibrationOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Memory, time, cost and energy of one workload on one GPU type, each with its breakdown."""
    rec = estimate_answer(workload, flags or {}, prices, carbon, set_, catalog, calibration)
    if as_json:
        emit_json(rec)
        return
    from rich.markup import escape  # tables only: --json does not load rich

    c = console()
    print_verdict(c, rec.verdict)
    mem = rec.memory
    title = escape(_workload_title(rec.model, rec.workload, rec.throughput_unit))
    title += f" on {rec.gpu} × {rec.num_gpus}" if rec.gpu else ""
    c.print(_breakdown_table(mem, title))
    if rec.gpu:  # without one, the first line said what to pass
        c.print(_verdict(mem, rec.gpu, rec.num_gpus))
    _print_memory_detail(c, mem, rec.workload.get("engine"))
    if rec.verdict.fits is False:
        c.print("Time, cost and energy are left out: the job would not run (apply a fix above).")
        return
    _print_time(c, rec)
