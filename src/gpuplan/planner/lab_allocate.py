"""Lab mode's planning: a lab file loaded with each job's options on each GPU type, the check
(what fits where), and the allocation under a policy (fair, makespan, or the least cloud spend)
with its gains over an equal split and first-come-first-served. The arithmetic of the schedules is
in planner/lab.py; interfaces/lab.py renders Slurm files and talks to Slurm."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from gpuplan.errors import GpuplanError, InvalidSettingError
from gpuplan.planner import lab as plan_lab
from gpuplan.planner.lab import JobOption, Schedule
from gpuplan.results import (
    CloudBaseline,
    CloudJob,
    InventoryRow,
    LabAllocation,
    LabCheck,
    LabCostAllocation,
    LabJob,
    LabJobCheck,
    LabOption,
    MemberUse,
    Refused,
    ScheduleFigures,
    SegmentRecord,
)
from gpuplan.specs.cluster import gres_name
from gpuplan.specs.context import Context
from gpuplan.specs.lab import Job, Lab, read_lab_file
from gpuplan.specs.model import ModelSpec
from gpuplan.specs.models import load_model


@dataclass(frozen=True)
class Loaded:
    lab: Lab
    models: dict[str, ModelSpec]
    options: dict[str, list[JobOption]]
    ctx: Context  # the user's catalog and prices: the cost policy's cloud GPUs come from it


def lab_gres(lab: Lab) -> dict[str, str]:
    """GRES type per lab GPU type (launch.gres_name), with the memory appended where two of the
    lab's types would share a name (A100 40GB and 80GB: "a100_40g", "a100_80g")."""
    base = {t: gres_name(t) for t in lab.inventory()}
    out = {}
    for t, g in base.items():
        twins = [u for u, h in base.items() if h == g]
        out[t] = g if len(twins) == 1 else f"{g}_{round(lab.gpus[t].memory_bytes / 2**30)}g"  # the "40GB" of the name
    return out


def load(path: str | Path, ctx: Context | None = None) -> Loaded:
    ctx = ctx if ctx is not None else Context()
    cat = ctx.catalog
    lab = read_lab_file(path, cat)
    models: dict[str, ModelSpec] = {}
    for j in lab.jobs:
        try:
            models[j.name] = load_model(j.workload.model)
        except GpuplanError as exc:
            raise type(exc)(f"job {j.name!r}: {exc}") from None
    return Loaded(lab, models, plan_lab.job_options(lab, models), ctx)


# --- check ---------------------------------------------------------------------------------------


def option_record(o: JobOption) -> LabOption:
    return LabOption(
        gpu=o.gpu,
        fits=o.fits,
        num_gpus=o.num_gpus,
        hours=o.hours,
        tokens_per_s=o.tokens_per_s,
        layout=dict(o.layout),
        reason=o.reason,
    )


def check(path: str | Path, ctx: Context | None = None) -> LabCheck:
    """`gpuplan lab check`: per job, on each of the lab's GPU types, whether it fits, on how many
    GPUs, and the hours to finish alone (0 throughput where it does not fit)."""
    ld = load(path, ctx)
    inv = ld.lab.inventory()
    gn = lab_gres(ld.lab)
    return LabCheck(
        inventory=[InventoryRow(gpu=t, count=c, gres=gn[t], per_node=ld.lab.per_node(t)) for t, c in inv.items()],
        jobs=[
            LabJobCheck(
                name=j.name,
                owner=j.owner,
                model=ld.models[j.name].name,
                task=j.workload.task,
                tokens=plan_lab.work_tokens(j),
                fits_anywhere=any(o.fits for o in ld.options[j.name]),
                options=[option_record(o) for o in ld.options[j.name]],
            )
            for j in ld.lab.jobs
        ],
        speed_weights=plan_lab.speed_weights(ld.lab, ld.options),
    )


# --- allocate ------------------------------------------------------------------------------------


def refused_of(ld: Loaded) -> list[Refused]:
    """Jobs that fit on none of the lab's GPU types, with each type's reason."""
    return [
        Refused(name=j.name, owner=j.owner, reasons={o.gpu: o.reason for o in ld.options[j.name]})
        for j in ld.lab.jobs
        if not any(o.fits for o in ld.options[j.name])
    ]


def _job_weights(lab: Lab) -> dict[str, float]:
    """A member's share split evenly over the member's jobs (Gavel's weights per job)."""
    count = {m.name: sum(1 for j in lab.jobs if j.owner == m.name) for m in lab.members}
    return {j.name: lab.member(j.owner).share / count[j.owner] for j in lab.jobs}


def _main_type(sched: Schedule, job: str) -> tuple[str, int, dict[str, float]]:
    """The type a job spends most GPU-time on, its count there, and its share of time by type."""
    by_type: dict[str, float] = {}
    gpus: dict[str, int] = {}
    for s in sched.segments:
        if s.job == job:
            by_type[s.gpu] = by_type.get(s.gpu, 0.0) + s.share * (s.end_s - s.start_s)
            gpus[s.gpu] = s.num_gpus
    total = sum(by_type.values()) or 1.0
    main = max(by_type, key=lambda t: by_type[t])
    return main, gpus[main], {t: v / total for t, v in by_type.items()}


def _gpu_hours(sched: Schedule, jobs: Sequence[Job], weights: Mapping[str, float]) -> dict[str, tuple[float, float]]:
    """Member -> (GPU-hours, speed-normalised GPU-hours) used by the schedule."""
    owner = {j.name: j.owner for j in jobs}
    out: dict[str, list[float]] = {}
    for s in sched.segments:
        h = s.share * s.num_gpus * (s.end_s - s.start_s) / 3600
        acc = out.setdefault(owner[s.job], [0.0, 0.0])
        acc[0] += h
        acc[1] += h * weights.get(s.gpu, 1.0)
    return {m: (v[0], v[1]) for m, v in out.items()}


def _schedule_record(s: Schedule) -> ScheduleFigures:
    return ScheduleFigures(average_jct_s=s.average_jct_s, makespan_s=s.makespan_s, finish_s=s.finish_s)


def allocate(
    path: str | Path,
    policy: str = "fair",
    ctx: Context | None = None,
    burst: bool = True,
    spot: bool = False,
) -> LabAllocation | LabCostAllocation:
    """`gpuplan lab allocate`: a heterogeneity-aware allocation (planner/lab.py) with each job's
    type, count and expected finish, each member's GPU-hours, and the gain over an equal split
    and over first-come-first-served."""
    return allocate_loaded(load(path, ctx), policy, burst, spot)


def allocate_loaded(
    ld: Loaded, policy: str = "fair", burst: bool = True, spot: bool = False
) -> LabAllocation | LabCostAllocation:
    """`allocate` of a lab already loaded (its throughput matrix computed)."""
    if policy not in plan_lab.POLICIES:
        raise InvalidSettingError(
            f"The 'policy' parameter must be one of {', '.join(plan_lab.POLICIES)}. Got {policy!r}."
        )
    lab = ld.lab
    types = list(lab.inventory())
    weights = plan_lab.speed_weights(lab, ld.options)
    runnable = [j for j in lab.jobs if any(o.fits for o in ld.options[j.name])]
    refused = refused_of(ld)
    if not runnable:
        raise InvalidSettingError("No job fits on any of the lab's GPU types; see `gpuplan lab check`.")
    jw = _job_weights(lab)
    equal = plan_lab.simulate(runnable, types, lab.inventory(), ld.options, "equal")
    fcfs = plan_lab.simulate(runnable, types, lab.inventory(), ld.options, "fcfs")
    if policy == "cost":
        return _cost(ld, types, equal, fcfs, burst, spot, weights)
    ours = plan_lab.simulate(runnable, types, lab.inventory(), ld.options, policy, jw)
    jobs = []
    for j in runnable:
        main, n, shares = _main_type(ours, j.name)
        alone = next(o for o in ld.options[j.name] if o.gpu == main)
        jobs.append(
            LabJob(
                name=j.name,
                owner=j.owner,
                gpu=main,
                num_gpus=n,
                time_shares=shares,
                expected_finish_s=ours.finish_s[j.name],
                hours_alone_on_gpu=alone.hours,
                deadline_s=j.workload.deadline,
                meets_deadline=None
                if j.workload.deadline is None
                else bool(ours.finish_s[j.name] <= j.workload.deadline),
            )
        )
    metric = "makespan_s" if policy == "makespan" else "average_jct_s"
    return LabAllocation(
        policy=policy,
        speed_weights=weights,
        refused=refused,
        jobs=jobs,
        members=_members(lab, ours, weights),
        schedule=_schedule_record(ours),
        equal_split=_schedule_record(equal),
        fcfs=_schedule_record(fcfs),
        metric=metric,
        gain_vs_equal_split=getattr(equal, metric) / getattr(ours, metric),
        gain_vs_fcfs=getattr(fcfs, metric) / getattr(ours, metric),
        segments=[SegmentRecord(**s.__dict__) for s in ours.segments],
    )


def _members(lab: Lab, sched: Schedule, weights: Mapping[str, float]) -> list[MemberUse]:
    used = _gpu_hours(sched, lab.jobs, weights)
    rows = []
    for m in lab.members:
        raw, norm = used.get(m.name, (0.0, 0.0))
        rows.append(
            MemberUse(
                name=m.name,
                share=m.share,
                gpu_hours=raw,
                normalised_gpu_hours=norm,
                budget_gpu_hours_per_month=m.gpu_hours_per_month,
                over_budget=None if m.gpu_hours_per_month is None else bool(norm > m.gpu_hours_per_month),
            )
        )
    return rows


def _cost(
    ld: Loaded,
    types: Sequence[str],
    equal: Schedule,
    fcfs: Schedule,
    burst: bool,
    spot: bool,
    weights: dict[str, float],
) -> LabCostAllocation:
    """The cost policy: the least cloud spend that meets every deadline (horizon: 30 days). With
    bursting, a job too big for the lab runs on rented GPUs (up to 8 per instance) instead of
    being refused."""
    lab = ld.lab
    cloud: dict[str, tuple[float, dict[str, JobOption]]] = {}
    if burst:
        cat = ld.ctx.catalog
        for name, price in ld.ctx.prices(spot).items():
            gpu = cat.get(name)
            opts = {j.name: plan_lab.job_option(ld.models[j.name], j, gpu, 8) for j in lab.jobs}
            if any(o.fits for o in opts.values()):
                cloud[name] = (price.usd_per_hour, opts)
    in_cloud = {j for _, opts in cloud.values() for j, o in opts.items() if o.fits}
    runnable = [j for j in lab.jobs if any(o.fits for o in ld.options[j.name]) or j.name in in_cloud]
    seconds, usd = plan_lab.solve_cost(runnable, types, lab.inventory(), ld.options, cloud)

    def baseline(s: Schedule) -> float:
        """Cloud spend to rescue, on each job's cheapest cloud type, the work a schedule leaves
        undone at the job's deadline (the horizon where it has none)."""
        total = 0.0
        for j in runnable:
            limit = j.workload.deadline or plan_lab.HORIZON_S
            if s.finish_s.get(j.name, math.inf) <= limit:
                continue
            rate = {o.gpu: o.tokens_per_s for o in ld.options[j.name]}
            done = sum(x.share * rate[x.gpu] * max(0.0, min(x.end_s, limit) - x.start_s)
                       for x in s.segments if x.job == j.name)  # fmt: skip
            left = max(plan_lab.work_tokens(j) - done, 0.0)
            costs = [p * o.num_gpus * left / o.tokens_per_s / 3600
                     for p, opts in cloud.values() for o in [opts[j.name]] if o.fits]  # fmt: skip
            total += min(costs) if costs else float("nan")
        return total

    eq_usd, fcfs_usd = baseline(equal), baseline(fcfs)
    jobs = []
    for j in runnable:
        by = seconds.get(j.name, {})
        main = max(by, key=lambda t: by[t]) if by else types[0]
        opts = {o.gpu: o for o in ld.options[j.name]}
        n = (
            opts[main].num_gpus
            if main in opts and opts[main].fits
            else cloud[main.removeprefix("cloud:")][1][j.name].num_gpus
        )
        jobs.append(
            CloudJob(
                name=j.name,
                owner=j.owner,
                gpu=main,
                num_gpus=n,
                seconds_by_type=by,
                expected_finish_s=sum(by.values()),
                deadline_s=j.workload.deadline or plan_lab.HORIZON_S,
            )
        )

    def cloud_baseline(s: Schedule, spend: float) -> CloudBaseline:
        return CloudBaseline(
            cloud_usd=spend, average_jct_s=s.average_jct_s, makespan_s=s.makespan_s, finish_s=s.finish_s
        )

    return LabCostAllocation(
        policy="cost",
        speed_weights=weights,
        refused=[r for r in refused_of(ld) if r.name not in {j.name for j in runnable}],
        jobs=jobs,
        cloud_usd=usd,
        equal_split=cloud_baseline(equal, eq_usd),
        fcfs=cloud_baseline(fcfs, fcfs_usd),
        metric="cloud_usd",
        gain_vs_equal_split=(eq_usd / usd) if usd > 0 else (None if eq_usd > 0 else 1.0),
        gain_vs_fcfs=(fcfs_usd / usd) if usd > 0 else (None if fcfs_usd > 0 else 1.0),
        horizon_s=plan_lab.HORIZON_S,
        spot=spot,
    )
