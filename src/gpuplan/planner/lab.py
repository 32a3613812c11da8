"""Lab mode: which job runs on which GPU type, sharing a small mixed pool fairly.

1. The throughput matrix (`job_options`): for each job and each of the lab's GPU types, whether it
   fits on one node, on how many GPUs (the job's own count if it fits, else the fewest that do),
   its tokens/s there from gpuplan's estimate, and the hours it would take alone. This is what
   Gavel (Narayanan et al., "Heterogeneity-Aware Cluster Scheduling Policies for Deep Learning
   Workloads", OSDI 2020) profiles on real hardware; gpuplan predicts it.
2. The allocation (`allocate`): Gavel's formulation, a linear program over X[j, t], the share of
   time job j runs on type t (with its GPU count there): sum_t X <= 1 per job, sum_j X * gpus <=
   the type's count. Effective rate of job j = sum_t X[j, t] * rate[j, t].
   - fair: max-min of rate_j / (w_j * equal_j), w_j the owner's share split over the owner's jobs
     and equal_j the rate the job gets from an equal split of every type (Gavel sec. 4.1, "LAS"
     with heterogeneity-aware normalisation); then the spare capacity goes to the most total
     normalised rate (a second LP with the minimum held).
   - makespan: max-min of rate_j / work_j (the least time to finish all, Gavel sec. 4.2).
   - cost: the least cloud spend so every job meets its deadline (or the horizon): GPU-seconds per
     job and type as variables, the lab's GPUs free and bounded by their count over each deadline,
     the catalog's GPUs rentable at their cheapest on-demand price (Gavel sec. 4.3 with bursting).
   Re-solved whenever a job finishes (Gavel recomputes on every arrival and completion), which
   gives each job's expected finish.
3. Baselines on the same simulator: an equal split (every job an equal slice of every type) and
   first-come-first-served (queue order, each job on the fastest type free for it, to completion).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final

import numpy as np
from scipy.optimize import linprog

from gpuplan.errors import GpuplanError, InvalidSettingError
from gpuplan.estimators.perf import estimate_inference_time, estimate_training_time
from gpuplan.planner.fit import smallest_gpu_count
from gpuplan.specs.gpu import GPU
from gpuplan.specs.lab import Job, Lab
from gpuplan.specs.model import ModelSpec

POLICIES: Final = ("fair", "makespan", "cost")
HORIZON_S: Final = 30 * 86400.0  # cost policy: jobs without a deadline finish within a month
_EPS: Final = 1e-9


@dataclass(frozen=True)
class JobOption:
    gpu: str
    fits: bool
    num_gpus: int  # 0 where it does not fit
    tokens_per_s: float  # 0 where it does not fit
    hours: float | None  # alone on num_gpus GPUs of this type
    layout: dict[str, object]  # keys changed to fit (zero / tp) at num_gpus
    reason: str  # why it does not fit, or ""


@dataclass(frozen=True)
class Segment:
    job: str
    gpu: str
    num_gpus: int
    share: float  # of the time between start and end
    start_s: float
    end_s: float


@dataclass
class Schedule:
    finish_s: dict[str, float]
    segments: list[Segment] = field(default_factory=list)
    cloud_usd: float = 0.0

    @property
    def makespan_s(self) -> float:
        return max(self.finish_s.values(), default=0.0)

    @property
    def average_jct_s(self) -> float:
        return sum(self.finish_s.values()) / len(self.finish_s) if self.finish_s else 0.0


def work_tokens(job: Job) -> float:
    w = job.workload
    tokens = w.train_tokens if w.is_training else w.tokens
    assert tokens is not None  # parse_lab requires the size
    return float(tokens)


def job_option(model: ModelSpec, job: Job, gpu: GPU, per_node: int) -> JobOption:
    """Whether and how `job` runs on `gpu` in this lab (one node of at most `per_node` of them)."""
    w = job.workload.with_(gpu=gpu.name)
    counts = [c for c in (1, 2, 4, 8, 16, 32, 64) if w.num_gpus <= c <= per_node]
    if w.num_gpus > per_node:
        return JobOption(gpu.name, False, 0, 0.0, None, {}, f"asks for {w.num_gpus} GPUs; a node has {per_node}")
    try:
        need = smallest_gpu_count(model, w, gpu, counts=[w.num_gpus, *[c for c in counts if c > w.num_gpus]])
    except InvalidSettingError as exc:
        return JobOption(gpu.name, False, 0, 0.0, None, {}, str(exc))
    if need.num_gpus is None:
        return JobOption(gpu.name, False, 0, 0.0, None, {}, f"does not fit on {per_node} (one node's worth)")
    layout = dict(need.layout)
    run = w.with_(**layout) if layout else w
    try:
        if run.is_training:
            rate = estimate_training_time(model, run, gpu).tokens_per_s
        else:
            rate = estimate_inference_time(model, run, gpu).output_tokens_per_s
    except GpuplanError as exc:
        return JobOption(gpu.name, False, 0, 0.0, None, {}, str(exc))
    if not rate > 0:
        return JobOption(gpu.name, False, 0, 0.0, None, {}, "no throughput")
    return JobOption(gpu.name, True, need.num_gpus, rate, work_tokens(job) / rate / 3600, layout, "")


def job_options(lab: Lab, models: Mapping[str, ModelSpec]) -> dict[str, list[JobOption]]:
    """The throughput matrix: job name -> one option per lab GPU type (inventory order)."""
    return {
        j.name: [job_option(models[j.name], j, lab.gpus[t], lab.per_node(t)) for t in lab.inventory()] for j in lab.jobs
    }


def speed_weights(lab: Lab, options: Mapping[str, Sequence[JobOption]]) -> dict[str, float]:
    """Each GPU type's speed per GPU relative to the lab's slowest type (= 1): the geometric mean,
    over the jobs that fit on both, of tokens/s per GPU against the type that runs the most jobs,
    scaled so the slowest is 1. These are the billing weights that make fair-share charge
    speed-normalised GPU-hours (Slurm's TRESBillingWeights). A type no job fits on gets 1."""
    types = list(lab.inventory())
    per_gpu = {t: {j: o.tokens_per_s / o.num_gpus for j, opts in options.items() for o in opts if o.gpu == t and o.fits}
               for t in types}  # fmt: skip
    ref = max(types, key=lambda t: len(per_gpu[t]))
    ratio: dict[str, float] = {}
    for t in types:
        common = [j for j in per_gpu[t] if j in per_gpu[ref]]
        if common:
            ratio[t] = float(np.exp(np.mean([math.log(per_gpu[t][j] / per_gpu[ref][j]) for j in common])))
    slowest = min(ratio.values(), default=1.0)
    return {t: ratio[t] / slowest if t in ratio else 1.0 for t in types}


# --- the linear programs ---------------------------------------------------------------------


def _matrices(jobs: Sequence[str], types: Sequence[str], options: Mapping[str, Sequence[JobOption]]
              ) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
    """rate[j, t] (tokens/s) and gpus[j, t] (0 where it does not fit)."""
    rate = np.zeros((len(jobs), len(types)))
    gpus = np.zeros((len(jobs), len(types)))
    for a, j in enumerate(jobs):
        by_type = {o.gpu: o for o in options[j]}
        for b, t in enumerate(types):
            o = by_type.get(t)
            if o is not None and o.fits:
                rate[a, b], gpus[a, b] = o.tokens_per_s, o.num_gpus
    return rate, gpus


def equal_split(rate: np.ndarray, gpus: np.ndarray, capacity: np.ndarray) -> np.ndarray:
    """X for an equal split: each job an equal slice of every type it fits on (a job's time shares
    summing over 1 are scaled down to 1); heterogeneity-unaware, as a plain time-share is."""
    n = rate.shape[0]
    x = np.zeros_like(rate)
    ok = gpus > 0
    x[ok] = (capacity[None, :].repeat(n, 0)[ok] / n) / gpus[ok]
    total = x.sum(1)
    x[total > 1] /= total[total > 1, None]
    out: np.ndarray = np.minimum(x, 1.0)
    return out


def _solve_maxmin(rate: np.ndarray, gpus: np.ndarray, capacity: np.ndarray, scale: np.ndarray) -> np.ndarray:
    """max z s.t. rate_j(X) >= z * scale_j, then (z held) max sum rate_j / scale_j. X as above."""
    n, m = rate.shape
    nx = n * m
    allowed = (gpus > 0).ravel()
    bounds = [(0.0, 1.0 if allowed[i] else 0.0) for i in range(nx)]
    a_ub, b_ub = [], []
    for a in range(n):  # a job's shares of time sum to at most 1
        row = np.zeros(nx + 1)
        row[a * m : (a + 1) * m] = 1
        a_ub.append(row)
        b_ub.append(1.0)
    for b in range(m):  # a type's GPUs
        row = np.zeros(nx + 1)
        row[b:nx:m] = gpus[:, b]
        a_ub.append(row)
        b_ub.append(float(capacity[b]))
    fair_rows = []
    for a in range(n):  # z * scale_j - rate_j(X) <= 0
        row = np.zeros(nx + 1)
        row[a * m : (a + 1) * m] = -rate[a]
        row[nx] = scale[a]
        fair_rows.append(row)
    c = np.zeros(nx + 1)
    c[nx] = -1.0
    res = linprog(c, A_ub=np.array(a_ub + fair_rows), b_ub=np.array(b_ub + [0.0] * n),
                  bounds=[*bounds, (0, None)], method="highs")  # fmt: skip
    if res.status != 0:
        raise GpuplanError(f"the allocation LP failed: {res.message}")
    z = float(res.x[nx])
    # stage 2: keep everyone at >= z (less a rounding margin), share what is left by normalised rate
    c2 = np.zeros(nx + 1)
    c2[:nx] = -(rate / scale[:, None]).ravel()
    b2 = np.array(b_ub + [0.0] * n)
    bounds2 = [*bounds, (z * (1 - 1e-7), z * (1 - 1e-7))]
    res2 = linprog(c2, A_ub=np.array(a_ub + fair_rows), b_ub=b2, bounds=bounds2, method="highs")
    x = res2.x if res2.status == 0 else res.x
    out: np.ndarray = np.clip(np.asarray(x[:nx], dtype=float).reshape(n, m), 0.0, 1.0)
    return out


# --- simulation ----------------------------------------------------------------------------------


def simulate(
    jobs: Sequence[Job],
    types: Sequence[str],
    capacity: Mapping[str, int],
    options: Mapping[str, Sequence[JobOption]],
    allocation: str,
    weights: Mapping[str, float] | None = None,
) -> Schedule:
    """Run the queue to the end: `allocation` is 'fair', 'makespan', 'equal' or 'fcfs'. The first
    three re-solve their time shares at every completion; fcfs starts jobs in queue order on the
    fastest type with enough free GPUs and runs each to completion."""
    names = [j.name for j in jobs if any(o.fits for o in options[j.name])]
    work = {j.name: work_tokens(j) for j in jobs if j.name in names}
    remaining = dict(work)
    cap = np.array([float(capacity[t]) for t in types])
    if allocation == "fcfs":
        return _fcfs(jobs, names, types, cap, options, remaining)
    sched = Schedule({})
    now = 0.0
    while remaining:
        active = [j for j in names if j in remaining]
        rate, gpus = _matrices(active, types, options)
        if allocation == "equal":
            x = equal_split(rate, gpus, cap)
        else:
            eq = (equal_split(rate, gpus, cap) * rate).sum(1)
            if allocation == "fair":
                scale = np.array([(weights or {}).get(j, 1.0) for j in active]) * eq
            else:  # makespan
                scale = np.array([remaining[j] for j in active])
            x = _solve_maxmin(rate, gpus, cap, np.maximum(scale, _EPS))
        speed = (x * rate).sum(1)
        if not (speed > 0).any():
            raise GpuplanError("no job can make progress: every job's GPUs are taken")
        dt = float(min(remaining[j] / s for j, s in zip(active, speed, strict=True) if s > 0))
        for a, j in enumerate(active):
            for b, t in enumerate(types):
                if x[a, b] > 1e-6:
                    sched.segments.append(Segment(j, t, int(gpus[a, b]), float(x[a, b]), now, now + dt))
            remaining[j] -= float(speed[a]) * dt
        now += dt
        for j in active:
            if remaining[j] <= 1e-6 * work[j]:
                del remaining[j]
                sched.finish_s[j] = now
    return sched


def _fcfs(jobs: Sequence[Job], names: Sequence[str], types: Sequence[str], cap: np.ndarray,
          options: Mapping[str, Sequence[JobOption]], remaining: dict[str, float]) -> Schedule:  # fmt: skip
    sched = Schedule({})
    free = cap.copy()
    queue = [j.name for j in sorted(jobs, key=lambda j: j.order) if j.name in names]
    running: dict[str, tuple[int, float, int]] = {}  # job -> (type index, end, gpus)
    now = 0.0
    while queue or running:
        for j in list(queue):  # in order; a job that cannot start now lets later ones try (backfill)
            opts = {o.gpu: o for o in options[j]}
            cands = [(opts[t].tokens_per_s, b) for b, t in enumerate(types)
                     if opts[t].fits and opts[t].num_gpus <= free[b]]  # fmt: skip
            if cands:
                r, b = max(cands)
                g = opts[types[b]].num_gpus
                free[b] -= g
                end = now + remaining[j] / r
                running[j] = (b, end, g)
                sched.segments.append(Segment(j, types[b], g, 1.0, now, end))
                queue.remove(j)
        if not running:
            raise GpuplanError("no job can start: every job's GPUs are taken")
        j, (b, finish, g) = min(running.items(), key=lambda kv: kv[1][1])
        now = finish
        free[b] += g
        del running[j]
        sched.finish_s[j] = now
    return sched


def solve_cost(
    jobs: Sequence[Job],
    types: Sequence[str],
    capacity: Mapping[str, int],
    options: Mapping[str, Sequence[JobOption]],
    cloud: Mapping[str, tuple[float, Mapping[str, JobOption]]],
    horizon_s: float = HORIZON_S,
) -> tuple[dict[str, dict[str, float]], float]:
    """The cheapest way for every job to finish by its deadline (or `horizon_s`): seconds of each
    job on each lab type (free, within the type's GPU-seconds before each deadline) and on each
    cloud type (`cloud`: GPU -> (USD per GPU-hour, job -> option); unbounded). Preemptive and
    one type at a time per job. Returns (job -> type -> seconds, USD); cloud types as 'cloud:NAME'."""
    cloud_names = list(cloud)
    all_types = [*types, *[f"cloud:{c}" for c in cloud_names]]
    names = [j.name for j in jobs]
    lab_rate, lab_gpus = _matrices(names, types, options)
    # a cloud type is one more column: the job's option there, from `cloud` (a column per GPU)
    cloud_options = {j: [o for c in cloud_names if (o := cloud[c][1].get(j)) is not None] for j in names}
    cloud_rate, cloud_gpus = _matrices(names, cloud_names, cloud_options)
    rate, gpus = np.hstack([lab_rate, cloud_rate]), np.hstack([lab_gpus, cloud_gpus])
    price = np.array([0.0] * len(types) + [cloud[c][0] / 3600.0 for c in cloud_names])
    deadline = {j.name: (j.workload.deadline or horizon_s) for j in jobs}
    by_name = {j.name: j for j in jobs}
    n, m = rate.shape
    nx = n * m
    a_ub, b_ub = [], []
    for a, j in enumerate(names):
        row = np.zeros(nx)  # it finishes: sum_t seconds x rate >= its tokens
        row[a * m : (a + 1) * m] = -rate[a]
        a_ub.append(row)
        b_ub.append(-work_tokens(by_name[j]))
        row = np.zeros(nx)  # one type at a time: its seconds fit before its deadline
        row[a * m : (a + 1) * m] = 1.0
        a_ub.append(row)
        b_ub.append(deadline[j])
    for d in sorted(set(deadline.values())):  # the lab's GPU-seconds before each deadline
        for b in range(len(types)):
            row = np.zeros(nx)
            for a, j in enumerate(names):
                if deadline[j] <= d:
                    row[a * m + b] = gpus[a, b]
            a_ub.append(row)
            b_ub.append(float(capacity[types[b]]) * d)
    cost = (gpus * price[None, :]).ravel()
    bounds = [(0.0, None if g > 0 else 0.0) for g in gpus.ravel()]
    res = linprog(cost, A_ub=np.array(a_ub), b_ub=np.array(b_ub), bounds=bounds, method="highs")
    if res.status != 0:
        raise InvalidSettingError(
            "No allocation meets every deadline, even renting: a job does not fit anywhere, or its deadline is too "
            f"close ({str(res.message).strip()})."
        )
    y = np.asarray(res.x).reshape(n, m)
    out = {j: {all_types[b]: float(y[a, b]) for b in range(m) if y[a, b] > 1e-6} for a, j in enumerate(names)}
    return out, float(res.fun)
