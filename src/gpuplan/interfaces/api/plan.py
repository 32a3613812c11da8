"""`plan`: GPU types and counts ranked for a workload, a cluster's best layouts, graphics jobs."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from gpuplan.estimators import uncertainty
from gpuplan.estimators.cost import training_job
from gpuplan.interfaces.api.catalog import catalog, context, prices
from gpuplan.interfaces.api.records import band, bandwidth_of, decode_band, memory_kind
from gpuplan.interfaces.api.workloads import engine_for_model, resolve_cluster
from gpuplan.planner.dedupe import Folded, dedupe
from gpuplan.planner.recommend import Option, pareto_front, plan_options
from gpuplan.results import Plan, PlanOption, ServingCost, Verdict
from gpuplan.specs.cluster import parse_have
from gpuplan.specs.context import Context
from gpuplan.specs.gpu import Catalog
from gpuplan.specs.model import ModelSpec
from gpuplan.specs.models import load_model
from gpuplan.specs.workload import Workload

if TYPE_CHECKING:  # a cluster's layouts and a graphics plan: their result types load where one is planned
    from gpuplan.results.graphics import GraphicsPlan
    from gpuplan.results.layouts import LayoutPlan


def plan(
    w: Workload,
    ctx: Context | None = None,
    gpus: Sequence[str] = (),
    top: int | None = None,
    spot: bool = False,
    carbon_g_per_kwh: float | None = None,
    cluster: str | None = None,
    allow_cross_node_tp: bool = False,
    model: ModelSpec | None = None,
    have: str | Mapping[str, int] | Path | None = None,
) -> Plan | LayoutPlan | GraphicsPlan:
    """`gpuplan plan`: ranked options (the plan's JSON contract: docs/api.md) for any workload; with a cluster
    (`cluster` or the `cluster` key) and a training job, the best parallel layouts on it. Each
    option says whether it is on the time-cost Pareto front (`pareto`). `have` (the GPUs the user
    owns: "4x RTX 3090", {name: count}, or a lab file's Path) plans on those, then what renting adds."""
    ctx = context(ctx)  # read once: the catalog, both price lists and the rent options share it
    cat = catalog(ctx)
    if w.is_graphics:
        return plan_graphics(w, cat, model, top)
    model = model or load_model(w.model)
    w = engine_for_model(w, model)
    if (cluster or w.cluster) and w.is_training:
        return plan_cluster(w, cat, model, cluster, top or 5, ctx, spot, carbon_g_per_kwh, allow_cross_node_tp)
    if isinstance(have, Path):  # a lab file: the GPUs of its nodes
        have = lab_have(have, ctx)
    owned = parse_have(have, cat) if have is not None else (parse_have(w.have, cat) if w.have else None)
    if owned is not None:
        gpus = list(owned)
    # each GPU once, however often (or under however many aliases) it is named: "H100" and
    # "h100 sxm" are one card, and a request listing it 200 times plans it once
    chosen = list({g.name: g for g in (cat.get(name) for name in gpus)}.values()) if gpus else None
    opts = plan_options(model, w, cat, prices(ctx, spot), chosen, carbon_g_per_kwh=carbon_g_per_kwh, owned=owned or ())
    if owned is not None:  # no more of a GPU than the user has
        opts = [o for o in opts if o.num_gpus <= owned.get(o.gpu.name, 0)]
    # what can be rented comes first: among usable options, those with a listed price, then the
    # unpriced (cards no cloud lists, e.g. GB200 racks); each group keeps the objective's order
    opts.sort(key=lambda o: (not o.ok, o.cost is None or not o.cost.usd_per_gpu_hour))
    distinct = dedupe(opts)  # one row per answer: a chip's memory variants with equal figures fold
    shown = distinct if top is None else distinct[:top]
    service = not w.is_training and w.tokens is None
    chosen_gpu = cat.get(w.gpu).name if w.gpu else None
    pinned = _pinned(distinct, len(shown), chosen_gpu, model.kind) if owned is None else []
    records = _with_front([*(_folded_result(f, model.kind) for f in shown), *pinned])
    rent = None
    verdicts = None
    if owned is not None and not any(o.fits for o in opts):  # nothing owned holds it: say why, first
        verdicts = owned_verdicts(model, w, owned, ctx)
    if owned is not None:
        everything = plan_options(model, w, cat, prices(ctx, spot), None, carbon_g_per_kwh=carbon_g_per_kwh)
        priced = [
            o for o in everything
            if o.ok and o.cost is not None and o.cost.usd_per_gpu_hour and o.num_gpus > owned.get(o.gpu.name, 0)
        ]  # fmt: skip
        rent = _with_front([_folded_result(f, model.kind) for f in dedupe(priced)[: top or 10]])
    return Plan(
        workload=w.model_dump(exclude_none=True),
        model=model.name,
        objective=w.objective,
        mode="training" if w.is_training else ("service" if service else "batch inference"),
        deadline_s=w.deadline,
        budget_usd=w.budget,
        options=records,
        considered=len(opts),
        throughput_unit="images/s" if model.kind == "cnn" else "tokens/s",
        chosen_gpu=chosen_gpu,
        have=owned,
        rent_options=rent,
        owned_verdicts=verdicts,
    )


def _pinned(distinct: list[Folded], top: int, chosen: str | None, model_kind: str) -> list[PlanOption]:
    """The rows of the workload's own GPU ranked below the top N, marked `pinned`, each with its
    place among the fitting rows of the whole ranking (the text table numbers fitting rows)."""
    if chosen is None:
        return []
    rank: dict[int, int] = {}
    for f in distinct:
        if f.option.fits:
            rank[id(f)] = len(rank) + 1
    mine = [f for f in distinct[top:] if f.option.gpu.name == chosen or chosen in f.same_as]
    return [replace(_folded_result(f, model_kind), pinned=True, rank=rank.get(id(f))) for f in mine]


def owned_verdicts(model: ModelSpec, w: Workload, owned: Mapping[str, int], ctx: Context | None) -> list[Verdict]:
    """For each GPU type the user owns, the verdict at all of them (tensor-parallel for serving):
    how far short, what binds, and the verified fixes on those GPUs (planner/verdict.py)."""
    from gpuplan.estimators.memory import estimate_memory
    from gpuplan.interfaces.api.records import memory_result, verdict_result
    from gpuplan.planner.fit import serving_layout

    cat = catalog(ctx)
    out = []
    for name, count in owned.items():
        gpu = cat.get(name)
        layout = {} if w.is_training else (serving_layout(model, w, count, gpu) or {})
        mine = w.with_(gpu=gpu.name, num_gpus=count, **{k: v for k, v in layout.items() if k != "num_gpus"})
        memory = memory_result(estimate_memory(model, mine, gpu))
        out.append(verdict_result(model, mine, gpu, memory, ctx))
    return out


def lab_have(path: str | Path, ctx: Context | None = None) -> dict[str, int]:
    """What a lab file's nodes hold, as `plan`'s `have`: of each GPU type, the most on one node, as
    lab mode places a job on one node (a lab of 3 nodes x 4 RTX 2080 Ti plans up to 4 of them)."""
    from gpuplan.specs.lab import read_lab_file  # a plan against a lab file only

    lab = read_lab_file(path, catalog(context(ctx)))
    return {gpu: lab.per_node(gpu) for gpu in lab.inventory()}


def _with_front(records: list[PlanOption]) -> list[PlanOption]:
    """The options, each marked whether it is on the time-cost Pareto front of the usable ones (a
    cheap option that misses the deadline is no choice)."""
    front = pareto_front([_time_cost(r) if r.usable else None for r in records])
    return [replace(r, pareto=on) for r, on in zip(records, front, strict=True)]


def _time_cost(r: PlanOption) -> tuple[float, float] | None:
    """An option's (time, cost) point for the Pareto front: for a service, request latency against
    the cost of serving for the deadline (an hour when none is given)."""
    if r.time_s is None or r.cost_usd is None:
        return None
    return float(r.time_s), float(r.cost_usd)


def plan_cluster(
    w: Workload,
    cat: Catalog,
    model: ModelSpec,
    spec: str | None,
    top: int,
    ctx: Context | None = None,
    spot: bool = False,
    carbon_g_per_kwh: float | None = None,
    allow_cross_node_tp: bool = False,
) -> LayoutPlan:
    """The best layouts of a training job on a cluster (`gpuplan plan --cluster`)."""
    from gpuplan.planner.layouts import search_layouts
    from gpuplan.results.layouts import ClusterInfo, LayoutPlan, LayoutRow, SearchStats

    w, cl = resolve_cluster(w, cat, spec)
    assert cl is not None
    res = search_layouts(model, w, cl, top=top, allow_cross_node_tp=allow_cross_node_tp)
    price = prices(ctx, spot).get(cl.gpu.name)
    kind = uncertainty.kind_of("training", model.kind, cl.gpu.architecture)
    layouts = []
    for r in res.best:
        t = r.time
        _, ce = training_job(t, cl.gpu, cl.num_gpus, price, carbon_g_per_kwh)
        step, rate = band(t.step_time_s, kind, time=True), band(t.tokens_per_s, kind)
        mem, ttt = band(r.memory.per_gpu_bytes, memory_kind(cl.gpu.architecture)), band(t.time_to_train_s, kind, True)
        layouts.append(
            LayoutRow(
                layout=r.layout.label,
                keys=r.layout.keys(),
                dp=r.layout.dp,
                micro_batches=r.layout.micro_batches,
                step_time_s=t.step_time_s,
                step_time_s_low=step[0],
                step_time_s_high=step[1],
                tokens_per_s=t.tokens_per_s,
                tokens_per_s_low=rate[0],
                tokens_per_s_high=rate[1],
                tokens_per_s_per_gpu=t.tokens_per_s_per_gpu,
                mfu=t.mfu,
                per_gpu_bytes=r.memory.per_gpu_bytes,
                per_gpu_bytes_low=mem[0],
                per_gpu_bytes_high=mem[1],
                comm_share=r.comm_share,
                bubble_share=r.bubble_share,
                bottleneck=t.bottleneck,
                time_to_train_s=t.time_to_train_s,
                time_to_train_s_low=ttt[0],
                time_to_train_s_high=ttt[1],
                cost_usd=ce.usd,
                energy_kwh=ce.energy_kwh,
                breakdown_s={o.name: o.time_s for o in t.ops if o.phase in ("communication", "optimizer", "launch")},
            )
        )
    return LayoutPlan(
        workload=w.model_dump(exclude_none=True),
        model=model.name,
        mode="cluster",
        cluster=ClusterInfo(
            spec=cl.label,
            gpu=cl.gpu.name,
            nodes=cl.nodes,
            gpus_per_node=cl.gpus_per_node,
            num_gpus=cl.num_gpus,
            interconnect=cl.fabric.name,
            interconnect_note=cl.fabric.source,
        ),
        global_batch=res.global_batch,
        layouts=layouts,
        search=SearchStats(
            evaluated=res.evaluated,
            fitting=res.fitting,
            micro_batch_shapes=res.shapes,
            seconds=res.seconds,
            rejected=dict(res.rejected),
        ),
        notes=res.notes,
    )


def _folded_result(f: Folded, model_kind: str) -> PlanOption:
    r = option_result(f.option, model_kind)
    return replace(r, same_as=list(f.same_as)) if f.same_as else r


def option_result(o: Option, model_kind: str = "decoder") -> PlanOption:
    """One ranked option, each figure with its validation range."""
    arch = o.gpu.architecture
    kind = uncertainty.kind_of("training" if o.training else "serving throughput", model_kind, arch)
    per_gpu = o.memory.per_gpu_bytes if o.memory else None
    mem, time, rate = band(per_gpu, memory_kind(arch)), band(o.time_s, kind, True), band(o.throughput, kind)
    tied = None if o.inference is None else decode_band(o.inference, arch, model_kind, bandwidth_of(o.gpu))
    if tied is not None and o.inference is not None:
        # a generating model's rate and time move with its TPOT (tokens/s = batch / TPOT): one range for all
        tpot_s, tpot = o.inference.tpot_s, tied[0]
        if o.throughput is not None:
            rate = uncertainty.decode_rate_band(o.throughput, tpot_s, tpot)
        if o.time_s is not None:
            time = (o.time_s * tpot[0] / tpot_s, o.time_s * tpot[1] / tpot_s)
    c = o.cost
    m = o.memory
    kv = (m.kv_short_bytes, m.serving.limit) if m and m.serving and m.kv_short_bytes > 0 else None
    verdict = Verdict.of_figures(
        o.fits, o.gpu.name, o.num_gpus, per_gpu if per_gpu is not None else 0.0, m.capacity_bytes if m else None,
        m.headroom_bytes if m else None, m.peak_phase if m else None, kv=kv,
    )  # fmt: skip
    if o.bottleneck == "unsupported precision":  # what binds is the card's units, not its memory
        verdict = replace(verdict, limit="precision", notes=[o.why])
    return PlanOption(
        verdict=verdict,
        gpu=o.gpu.name,
        num_gpus=o.num_gpus,
        fits=o.fits,
        layout=o.layout,
        per_gpu_bytes=per_gpu,
        per_gpu_bytes_low=mem[0],
        per_gpu_bytes_high=mem[1],
        time_s=o.time_s,
        time_s_low=time[0],
        time_s_high=time[1],
        throughput=o.throughput,
        throughput_low=rate[0],
        throughput_high=rate[1],
        cost_usd=c.usd if c else None,
        usd_per_hour=c.usd_per_gpu_hour * o.num_gpus if c and c.usd_per_gpu_hour else None,
        usd_per_million_tokens=c.usd_per_million_tokens if c else None,
        energy_kwh=c.energy_kwh if c else None,
        kwh_per_million_tokens=c.kwh_per_million_tokens if c else None,
        bottleneck=o.bottleneck,
        why=o.why,
        meets_deadline=o.meets_deadline,
        within_budget=o.within_budget,
        too_slow=o.too_slow,
        licence_barred=o.licence_barred,
        usable=o.ok,
        mfu=o.training.mfu if o.training else None,
        ttft_s=o.inference.ttft_single_s if o.inference else None,  # one request's, as in estimate
        tpot_s=o.inference.tpot_s if o.inference else None,
        serving=_serving(o),
    )


def _serving(o: Option) -> ServingCost | None:
    s = o.serving
    if s is None:
        return None
    return ServingCost(
        batch=s.batch,
        tokens_per_s=s.tokens_per_s,
        usd_per_million_tokens=s.usd_per_million_tokens,
        tpot_s=s.tpot_s,
        ttft_s=s.ttft_s,
        limited_by=s.limited_by,
    )


def plan_graphics(w: Workload, cat: Catalog, model: ModelSpec | None = None, top: int | None = None) -> GraphicsPlan:
    """GPUs for a graphics job (streaming, VDI, rendering, AI video), with those that cannot run it."""
    from gpuplan.planner.graphics import plan_graphics as plan_it
    from gpuplan.results.graphics import GraphicsOption, GraphicsPlan, Unsuitable

    model = model or (load_model(w.model) if w.model else None)
    options, unsuitable = plan_it(w, cat, model)
    options = options if top is None else options[:top]  # --top holds for graphics plans too
    return GraphicsPlan(
        workload=w.model_dump(exclude_none=True),
        objective=w.objective,
        options=[
            GraphicsOption(
                gpu=o.capacity.gpu.name,
                num_gpus=o.num_gpus,
                fits=True,
                per_gpu=o.capacity.per_gpu,
                unit=o.capacity.unit,
                demand=o.demand,
                hours=o.hours,
                time_s=o.time_s,
                cost_usd=o.cost_usd,
                usd_per_hour=o.usd_per_hour,
                energy_kwh=o.energy_kwh,
                bottleneck=o.capacity.bottleneck,
                limits=o.capacity.limits,
                why=o.why,
            )
            for o in options
        ],
        unsuitable=[Unsuitable(gpu=u.gpu.name, fits=False, why=u.reason) for u in unsuitable],
    )
