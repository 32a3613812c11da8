"""`plan`: GPU types and counts ranked for a workload, a cluster's layouts, graphics jobs."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

import typer

from gpuplan.interfaces.cli.answers import TOP_MAX, TOP_MIN, is_lab_file, plan_answer
from gpuplan.interfaces.cli.common import (
    WORKLOAD_PANEL,
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
    finite,
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

    from gpuplan.results import GraphicsPlan, LayoutPlan, Plan, PlanOption


def print_graphics_plan(c: Console, rec: GraphicsPlan) -> None:
    from rich.markup import escape
    from rich.table import Table

    w = rec.workload
    res = w.get("resolution", "1080p")
    what = {
        "streaming": f"game/app streaming, {w.get('streams', 1)} × {res}{w.get('fps', 60):g}, {w.get('scene', 'medium')} scenes",
        "vdi": f"virtual desktops, {w.get('users', 1)} {w.get('persona', 'knowledge')} users at {res}",
        "render": f"rendering {w.get('frames', 1)} frames at {res}, {w.get('spp', 128)} spp on {w.get('num_gpus', 1)} GPU(s)",
        "ai-video": f"AI video, {w.get('streams', 1)} × {res}{w.get('fps', 30):g} through {w.get('model')}",
    }[w["task"]]
    t = Table(title=f"{what} · ranked by {rec.objective}")
    for col in ("GPU", "per GPU", "GPUs", "time", "cost", "energy", "limited by"):
        t.add_column(col, justify="left" if col in ("GPU", "limited by") else "right")
    for o in rec.options:
        count = f"{o.per_gpu:,.0f}"
        unit = o.unit[:-1] if count == "1" and o.unit in ("streams", "users") else o.unit
        per = f"{count} {unit}"
        time = "—" if o.time_s is None else f"{o.time_s / 3600:,.2f} h"
        cost = "no price" if o.cost_usd is None else fmt_usd(o.cost_usd) + ("/h" if o.time_s is None else "")
        energy = fmt_energy(o.energy_kwh) + ("/h" if o.time_s is None else "")
        t.add_row(o.gpu, per, str(o.num_gpus), time, cost, energy, escape(o.bottleneck))
    c.print(t)
    if rec.unsuitable:
        c.print("Unsuitable:")
        by_reason: dict[str, list[str]] = {}
        for u in rec.unsuitable:
            by_reason.setdefault(u.why, []).append(u.gpu)
        for why, names in by_reason.items():
            c.print(f"  • {escape(why)}: {', '.join(names)}")


def _print_llm_plan(c: Console, rec: Plan) -> None:
    from rich.markup import escape

    from gpuplan.specs.prices import OWN_POWER

    w = rec.workload
    mode = rec.mode
    unit = rec.throughput_unit
    job = {
        "training": f"{w.get('task')} {rec.model}, {w.get('precision', 'bf16')}, batch {w.get('batch_size', 1)}"
        + ("" if unit == "images/s" else f" × {w.get('seq_len', 2048)}"),
        "service": f"serving {rec.model} to {w.get('batch_size', 1)} concurrent streams, {w.get('input_len', 128)} in / {w.get('output_len', 128)} out",
        "batch inference": f"generating {w.get('tokens', 0):,.0f} tokens with {rec.model}",
    }[mode]
    if mode == "training" and w.get("tokens"):
        job += f", {w['tokens']:,.3g} " + ("images" if unit == "images/s" else "tokens")
    if rec.have is None:
        c.print(_plan_answer(rec))  # the answer first, then the table
    if rec.have is not None:
        owned = ", ".join(f"{n}× {g}" for g, n in rec.have.items())
        if rec.owned_verdicts:  # nothing owned holds it: the verdict on each, answer first
            from gpuplan.interfaces.cli.estimate import print_verdict

            c.print(f"{escape(job)} · on your GPUs ({escape(owned)}):")
            for v in rec.owned_verdicts:
                print_verdict(c, v)
        else:
            title = f"{escape(job)} · on your GPUs ({escape(owned)}) · by {rec.objective}"
            c.print(_options_table(rec, rec.options, title, True))
            c.print(f"Power cost on your GPUs: {OWN_POWER}; `gpuplan rent-vs-buy` weighs buying the cards.")
        if any(o.fits and "your own GeForce" in o.why for o in rec.options):
            c.print("GeForce cards you own are usable; set datacenter: true if they sit in a datacenter.")
        if rec.rent_options:
            c.print(_options_table(rec, rec.rent_options, "What renting would add (priced offers, best first)"))
    else:
        c.print(_options_table(rec, rec.options, f"{escape(job)} · ranked by {rec.objective}"))
    if any(o.serving for o in rec.options):
        targets = [f"{k}={w[k]:g}" for k in ("max_tpot_ms", "max_ttft_ms") if w.get(k) is not None]
        at = f"the largest batch that fits and meets {', '.join(targets)}" if targets else "the workload's batch_size"
        c.print(
            f"$/Mtok @ batch: $ per million output tokens at {at} (concurrent sequences)"
            + ("" if targets else "; set max_tpot_ms (or max_ttft_ms) to price the largest batch within it")
            + "."
        )
    cannot = {o.gpu: o.why for o in rec.options if o.bottleneck == "unsupported precision"}
    for why in dict.fromkeys(cannot.values()):  # the card cannot run the job at all, whatever its memory
        c.print(f"Cannot run: {escape(why)}")
    unfit = [o for o in rec.options if not o.fits and o.gpu not in cannot]
    if unfit:
        names = sorted({o.gpu for o in unfit if not any(x.gpu == o.gpu and x.fits for x in rec.options)})
        if names and rec.have is not None:
            c.print(f"Does not fit on the GPUs you have: {', '.join(f'{rec.have.get(g, 0)}× {g}' for g in names)}")
        elif names:
            c.print(f"Does not fit on up to 8 of: {', '.join(names)}")
    if any(o.pinned for o in rec.options):
        c.print(
            f"Pinned: {escape(rec.chosen_gpu or '')}'s rows (the workload's gpu), ranked below the top "
            f"{sum(1 for o in rec.options if not o.pinned)}; # is their place in the whole ranking."
        )
    c.print(
        f"{rec.considered} options considered (GPU types × 1, 2, 4, 8); ranges are the 10th–90th percentile "
        "of validation errors for that kind of figure (gpuplan validate)."
    )


def _plan_answer(rec: Plan) -> str:
    """One line above plan's table: the winner by the objective and what limits it, else why none."""
    from rich.markup import escape

    b = rec.best
    if b is None:
        fit = next((o for o in rec.options if o.fits), None)
        if fit is not None:
            return f"[yellow]No option meets every target[/yellow]; the best that fits: {fit.num_gpus}× {escape(fit.gpu)} (see misses)."
        cannot = [o for o in rec.options if o.bottleneck == "unsupported precision"]
        if cannot and len(cannot) == len(rec.options):  # the cards' units, not their memory, rule it out
            return f"[red]✗ Cannot run:[/red] {escape(cannot[0].why)}."
        return "[red]✗ Fits none of the options below[/red] (up to 8 of each GPU type)."
    if b.serving is not None and b.serving.usd_per_million_tokens is not None:
        price = f" at {fmt_usd(b.serving.usd_per_million_tokens)}/Mtok"
    elif b.usd_per_million_tokens is not None:
        price = f" at {fmt_usd(b.usd_per_million_tokens)}/Mtok"
    else:
        price = "" if b.cost_usd is None else f" at {fmt_usd(b.cost_usd)}"
    limit = f", limited by {escape(b.bottleneck)}" if b.bottleneck else ""
    return f"[green]Best by {escape(rec.objective)}:[/green] {b.num_gpus}× {escape(b.gpu)}{price}{limit}."


def _mark(rec: Plan, gpu: str) -> str:
    """The workload's `gpu` is the user's own card only when `have` lists it; else it is their pick."""
    return "(yours)" if rec.have and gpu in rec.have else "(your pick)"


def _options_table(rec: Plan, options: list[PlanOption], title: str, owned: bool = False) -> Table:
    from rich.markup import escape
    from rich.table import Table

    w, mode, unit = rec.workload, rec.mode, rec.throughput_unit
    t = Table(title=title)
    # a training job without tokens has no end: its figure is one step, and says so
    trains = "time to train" if w.get("tokens") or w.get("epochs") else "step time"
    time_head = {"training": trains, "service": "request latency", "batch inference": "time"}[mode]
    cost_head = "cost/hour" if mode == "service" else "cost"
    cost_head = f"power {cost_head}" if owned else cost_head  # the user's own cards pay no rent
    # serving: $ per million output tokens at the largest batch within the latency targets
    per_mtok = "$/Mtok @ batch" if any(o.serving for o in options) else None
    cols = ("#", "GPU", "GPUs", time_head, unit, cost_head, *([per_mtok] if per_mtok else []), "energy")
    for col in (*cols, "limited by", "why", "misses"):
        t.add_column(col, justify="right" if col in cols and col != "GPU" else "left")
    shown = 0
    sectioned = False
    for o in options:
        if not o.fits:
            continue
        if o.pinned and not sectioned:  # the chosen GPU's rows below the top N, set apart
            t.add_section()
            sectioned = True
        shown += 0 if o.pinned else 1
        cost = "no price" if o.cost_usd is None else fmt_usd(o.cost_usd)
        if mode == "training" and not w.get("tokens") and o.usd_per_million_tokens is not None:
            cost = f"{fmt_usd(o.usd_per_million_tokens)}/M" + ("images" if unit == "images/s" else "tok")
        energy = "—" if o.energy_kwh is None else fmt_energy(o.energy_kwh)
        marks = []  # what rules the option out, in its own column
        if o.meets_deadline is False:
            marks.append("deadline")
        if o.within_budget is False:
            marks.append("budget")
        if o.too_slow:
            marks.append("too slow")
        if o.licence_barred:
            marks.append("licence")
        misses = f"[red]{', '.join(marks)}[/red]" if marks else ""
        why = escape(o.why)
        gpu = f"[bold]{escape(o.gpu)}[/bold] {_mark(rec, o.gpu)}" if o.gpu == rec.chosen_gpu else escape(o.gpu)
        gpu += ", pinned" if o.pinned else ""
        if o.same_as:  # other cards with these very figures, folded into this row
            gpu += f" (= {escape(', '.join(o.same_as))})"
        t.add_row(
            str(o.rank if o.pinned else shown),
            gpu,
            str(o.num_gpus),
            with_range(o, "time_s", fmt_dur),
            with_range(o, "throughput", lambda v: f"{v:,.0f}"),
            cost,
            *([_per_mtok(o)] if per_mtok else []),
            energy,
            escape(o.bottleneck or ""),
            why,
            misses,
        )
    return t


def _per_mtok(o: PlanOption) -> str:
    s = o.serving
    if s is None:
        return "—"
    if s.batch is None:
        return "[red]misses target[/red]"
    cost = "no price" if s.usd_per_million_tokens is None else fmt_usd(s.usd_per_million_tokens)
    return f"{cost} @ {s.batch:,}"


@app.command()
@workload_flags
def plan(
    workload: WorkloadArg,
    flags: dict[str, Any] | None = None,
    objective: Annotated[
        str | None, typer.Option(help="Rank by: time | cost | energy.", rich_help_panel=WORKLOAD_PANEL)
    ] = None,
    deadline: Annotated[
        str | None,
        typer.Option(help="Deadline, e.g. 24h or 3d (options past it are marked).", rich_help_panel=WORKLOAD_PANEL),
    ] = None,
    budget: Annotated[
        float | None,
        typer.Option(
            callback=finite, help="Budget in USD (options over it are marked).", rich_help_panel=WORKLOAD_PANEL
        ),
    ] = None,
    gpus: Annotated[
        str | None, typer.Option("--gpus", help="Only these GPUs, comma-separated, e.g. 3090,A100.")
    ] = None,
    top: Annotated[int | None, typer.Option(min=TOP_MIN, max=TOP_MAX, help="Show the best N options.")] = 10,
    prices: PricesOpt = None,
    spot: Annotated[bool, typer.Option("--spot", help="Use spot prices.")] = False,
    carbon: CarbonOpt = None,
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
    have: Annotated[
        str | None,
        typer.Option(
            "--have",
            help="The GPUs you own, e.g. '4x RTX 3090, 1x A100 40GB', or a lab file (lab.yaml: its nodes' GPUs): "
            "plans on them, then what renting adds.",
        ),
    ] = None,
    set_: SetOpt = None,
    catalog: CatalogOpt = None,
    calibration: CalibrationOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Rank GPU types and counts for a workload by time, cost or energy, with reasons; with
    --cluster (or a `cluster` key), the fastest parallel layouts of a training job on it."""
    from gpuplan.results import GraphicsPlan, LayoutPlan, Plan

    rec = plan_answer(
        workload,
        flags or {},
        set_,
        objective=objective,
        deadline=deadline,
        budget=budget,
        gpus=gpus,
        top=top,
        prices=prices,
        spot=spot,
        carbon=carbon,
        cluster=cluster,
        cross_node_tp=cross_node_tp,
        have=have,
        catalog=catalog,
        calibration=calibration,
    )
    lab = have is not None and is_lab_file(have)
    if as_json:
        emit_json(rec)
        return
    from rich.markup import escape  # tables only: --json does not load rich

    if lab and isinstance(rec, Plan):
        console().print(f"Your GPUs from {escape(str(have))}: of each type, one node's worth (a job runs on one node).")
    if isinstance(rec, LayoutPlan):
        _print_cluster_plan(console(), rec)
    elif isinstance(rec, GraphicsPlan):
        print_graphics_plan(console(), rec)
    else:
        _print_llm_plan(console(), rec)


def _print_cluster_plan(c: Console, rec: LayoutPlan) -> None:
    from rich.markup import escape
    from rich.table import Table

    cl, search = rec.cluster, rec.search
    w = rec.workload
    tab = Table(
        title=f"{escape(rec.model)} {w.get('task')} on {cl.nodes} x {cl.gpus_per_node} {escape(cl.gpu)} "
        f"({escape(cl.interconnect)}), global batch {rec.global_batch} x {w.get('seq_len')} tokens"
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
    for i, r in enumerate(rec.layouts, 1):
        tab.add_row(
            str(i),
            escape(r.layout),
            with_range(r, "step_time_s", fmt_dur),
            f"{r.tokens_per_s:,.0f}",
            f"{r.tokens_per_s_per_gpu:,.0f}",
            f"{r.mfu:.1%}",
            gib(r.per_gpu_bytes),
            f"{r.comm_share:.0%}",
            f"{r.bubble_share:.0%}",
        )
    c.print(tab)
    if rec.layouts and rec.layouts[0].time_to_train_s is not None:
        best = rec.layouts[0]
        cost = f", ${best.cost_usd:,.0f}" if best.cost_usd is not None else ""
        toks = w.get("tokens")
        what = f"{toks:,.3g} tokens" if toks else "its tokens"
        c.print(f"The best layout trains {what} in {with_range(best, 'time_to_train_s', fmt_dur)}{cost}.")
    rej = ", ".join(f"{v:,} {k}" for k, v in search.rejected.items() if v)
    c.print(
        f"Searched {search.evaluated:,} layouts ({search.fitting:,} fit in memory; "
        f"{search.micro_batch_shapes:,} micro-batch shapes) in {search.seconds:.2f} s."
        + (f" Ruled out: {escape(rej)}." if rej else "")
    )
    for note in rec.notes:
        c.print(f"[yellow]note:[/] {escape(note)}")
    fw = w.get("framework")
    if fw and rec.layouts:  # the framework's own launch runs the workload's layout: set the best one's keys
        keys = " ".join(f"--set {k}={v}" for k, v in rec.layouts[0].keys.items())
        c.print(
            f"Launch the best layout with {escape(str(fw))}'s own file: gpuplan launch WORKLOAD.yaml {escape(keys)}"
        )
    else:
        c.print(
            "Launch files for the best layout: gpuplan launch WORKLOAD.yaml --format torchrun|slurm|skypilot "
            "(--cluster if the file names none)"
        )
