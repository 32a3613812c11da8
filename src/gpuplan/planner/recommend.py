"""Which GPU, and how many: every catalog GPU type at 1, 2, 4 and 8 GPUs in one node, the
layouts that make the job fit, its time, cost and energy, ranked by the objective.

Nothing is tabulated: an option's place comes from the memory estimate (does it fit, with which
layout), the performance model (how fast) and the price file (what it costs). Options that miss
the deadline or the budget stay in the list, marked, so a user sees what they would need.

What "time" means depends on the job:
- training: time to train on `tokens` (or epochs x dataset_tokens); without either, time per
  step, and cost and energy per million tokens;
- inference with `tokens`: time to generate that many output tokens at `batch_size` concurrent
  sequences (a batch job);
- inference without `tokens`: a service holding `batch_size` concurrent sequences; time is one
  request's latency, cost is per hour of service (or per `deadline` of it), and options whose
  per-token latency is slower than the workload's `max_tpot_ms` (default SERVICE_MAX_TPOT_S), or
  whose time to first token is over its `max_ttft_ms`, are marked too slow.
Every inference option of a generating model also quotes $ per million output tokens at the largest
batch that fits and meets the latency targets (planner/serving.py).
"""

from __future__ import annotations

import math
from collections.abc import Collection, Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from typing import Any, Final

from gpuplan.errors import GpuplanError
from gpuplan.estimators.cost import CostEnergy, busy_share, cost_and_energy, training_job
from gpuplan.estimators.memory import MemoryEstimate, estimate_memory
from gpuplan.estimators.perf import (
    InferenceTime,
    TrainingTime,
    estimate_inference_time,
    estimate_training_time,
    inference_rate,
)
from gpuplan.planner.fit import serving_layout
from gpuplan.planner.screening import Candidates, memory, shared_estimates
from gpuplan.planner.serving import (
    ServingBatch,
    queued_note,
    queued_serving,
    queued_time,
    running_batch,
    serving_batch,
)
from gpuplan.specs.gpu import GPU, Catalog
from gpuplan.specs.model import ModelSpec
from gpuplan.specs.precision import training_precision_gap
from gpuplan.specs.prices import Price
from gpuplan.specs.workload import Workload

PLAN_COUNTS: Final = (1, 2, 4, 8)
GEFORCE_LICENCE: Final = (
    "the GeForce driver licence bars datacenter deployment (set datacenter: false for your own workstation)"
)
# The GeForce licence (NVIDIA GeForce driver software licence, sec. 2.1.3 "No Datacenter
# Deployment") concerns where the driver runs, not who owns the card: a user's own GeForce card at a
# desk or in a lab is a note; plans that rent (cloud datacenters) are barred.
GEFORCE_OWNED: Final = "your own GeForce: its licence bars only datacenter use"
# A chat stream must come out at least as fast as people read: ~10 tokens/s (reading speed is
# ~200-300 words/min = 4-7 tokens/s; 10 tokens/s is the usual interactive floor).
SERVICE_MAX_TPOT_S: Final = 0.1
# Replicas replace tensor parallelism in a batch-generation plan only when they are faster by more
# than the model's resolution (its validation medians are ~10%): otherwise the simpler layout,
# one copy of the weights over all GPUs, stays.
REPLICA_MIN_GAIN: Final = 0.05


@dataclass(frozen=True)
class Option:
    gpu: GPU
    num_gpus: int
    layout: dict[str, Any]
    fits: bool
    memory: MemoryEstimate | None
    bottleneck: str
    why: str
    training: TrainingTime | None = None
    inference: InferenceTime | None = None
    time_s: float | None = None
    throughput: float | None = None  # tokens/s (images/s for CNNs), all GPUs together
    cost: CostEnergy | None = None
    meets_deadline: bool | None = None
    within_budget: bool | None = None
    too_slow: bool = False
    licence_barred: bool = False
    serving: ServingBatch | None = None  # $/Mtok at the largest batch within the latency targets

    @property
    def ok(self) -> bool:
        return (
            self.fits
            and not self.too_slow
            and not self.licence_barred
            and self.meets_deadline is not False
            and self.within_budget is not False
        )


def _layouts(model: ModelSpec, w: Workload, n: int) -> Iterator[dict[str, Any]]:
    """Layouts to try on n GPUs, least intrusive first."""
    if w.is_training:
        base = {"num_gpus": n, "tp": 1, "pp": 1}
        if n == 1:
            one = {**base, "zero": 0 if w.offload == "none" else w.zero}  # offload keeps its ZeRO stage
            yield one
            if w.activation_checkpointing != "full":
                yield {**one, "activation_checkpointing": "full"}
            return
        yield {**base, "zero": w.zero}
        if w.zero < 3:
            yield {**base, "zero": 3}
        if w.activation_checkpointing != "full":
            yield {**base, "zero": 3, "activation_checkpointing": "full"}
    else:
        layout = serving_layout(model, w, n)  # the engine's own way: layers in turn, or tensor parallel
        if layout is not None:
            yield layout


def _replica_layouts(model: ModelSpec, w: Workload, n: int) -> Iterator[dict[str, Any]]:
    """For a batch generation job on n GPUs: replicas of t-way tensor parallelism for every t < n
    that divides n (vLLM --data-parallel-size n/t), the job's `batch_size` concurrent sequences
    shared among them: each replica runs its own batch, so throughput adds up without the
    per-layer all-reduces of wider tensor parallelism, at a smaller batch per copy of the weights."""
    for t in range(1, n):
        if n % t == 0 and model.tp_splits_heads(t):
            yield {"num_gpus": n, "tp": t, "pp": 1, "batch_size": math.ceil(w.batch_size / (n // t))}


def _why_training(t: TrainingTime, gpu: GPU, n: int, layout: dict[str, Any]) -> str:
    parts = [f"{t.tokens_per_s:,.0f} tokens/s at MFU {t.mfu:.0%}, {t.bottleneck}-bound"]
    if t.exposed_comm_s > 0.05 * t.step_time_s:
        parts.append(f"{t.exposed_comm_s / t.step_time_s:.0%} of each step waits on communication")
    if layout.get("zero") == 3 and n > 1:
        parts.append("FSDP/ZeRO-3 to fit")
    if layout.get("activation_checkpointing") == "full":
        parts.append("needs full activation checkpointing")
    if gpu.supports("fp8") and layout.get("precision", "bf16") != "fp8" and t.mfu > 0:
        parts.append("fp8 would speed the matmuls")
    return "; ".join(parts)


def _why_inference(it: InferenceTime, layout: dict[str, Any], service: bool) -> str:
    # a service: one request's time to first token; a batch job: the whole batch's prefill
    first = f"TTFT {it.ttft_single_s * 1e3:,.0f} ms" if service else f"batch prefill {it.ttft_s * 1e3:,.0f} ms"
    s = f"{first}, {it.tpot_s * 1e3:,.1f} ms/token at batch {it.batch} ({it.bottleneck}-bound)"
    if layout.get("tp", 1) > 1:
        s += f", tensor-parallel over {layout['tp']}"
    if layout.get("pp", 1) > 1:
        s += f", layers split over {layout['pp']} (pipeline)"
    replicas = layout.get("num_gpus", 1) // max(layout.get("tp", 1) * layout.get("pp", 1), 1)
    if replicas > 1:
        s += f", {replicas} data-parallel replicas"
    if not service and it.best_batch > it.batch:
        s += f"; up to {it.best_output_tokens_per_s:,.0f} tokens/s at batch {it.best_batch} (continuous batching)"
    return s


def evaluate(
    model: ModelSpec,
    w: Workload,
    gpu: GPU,
    n: int,
    price: Price | None,
    carbon_g_per_kwh: float | None = None,
    candidates: Candidates | None = None,
) -> Option:
    """One option: the first layout on n GPUs that fits, timed and priced. `candidates`: the
    plan's layouts validated once for every GPU (planner/screening.py)."""
    gap = training_precision_gap(w.precision, gpu) if w.is_training else None
    if gap:  # the card cannot run the precision at all: that, not memory, rules it out
        return Option(gpu, n, {}, False, None, "unsupported precision", gap.split(" (", 1)[0])
    cands = candidates if candidates is not None else Candidates(w)
    chosen: dict[str, Any] | None = None
    mem: MemoryEstimate | None = None
    last: MemoryEstimate | None = None
    cand_w = w
    for layout in _layouts(model, w, n):
        try:
            cand = cands.get(w, gpu.name, layout)
            e = memory(model, cand, gpu)
        except GpuplanError:
            continue
        last = e
        if e.fits:
            chosen, mem, cand_w = layout, e, cand
            break
    if chosen is None or mem is None:
        need = f"{last.per_gpu_bytes / 2**30:,.1f} GiB per GPU" if last else "no valid layout"
        why = f"does not fit: {need} of {gpu.memory_bytes / 2**30:,.0f} GiB"
        if (
            last is not None
            and last.serving is not None
            and last.kv_short_bytes > 0
            and (last.headroom_bytes or 0) >= 0
        ):
            why = f"does not fit: {last.serving.limit} is {last.kv_short_bytes / 2**30:,.2f} GiB short of one sequence"
        return Option(gpu, n, {}, False, last, "memory capacity", why)
    try:
        if w.is_training:
            return _training_option(
                model, cand_w, gpu, n, {**chosen, "precision": cand_w.precision}, mem, price, carbon_g_per_kwh
            )
        best = _inference_option(model, cand_w, gpu, n, chosen, mem, price, carbon_g_per_kwh)
    except GpuplanError as exc:
        return Option(gpu, n, chosen, False, mem, "unsupported", str(exc).rstrip("."))
    if w.tokens is not None and not model.is_moe and best.fits:
        # a batch job counts throughput: data-parallel replicas may beat one wide tensor-parallel
        # copy. Candidates are compared at the job's batch (no best-batch search); the winner is
        # then timed in full.
        rate = best.throughput or 0.0
        winner: tuple[dict[str, Any], Workload, MemoryEstimate] | None = None
        for layout in _replica_layouts(model, w, n):
            try:
                cand = cands.get(w, gpu.name, layout)
                e = estimate_memory(model, cand, gpu)
                if not e.fits:
                    continue
                r = inference_rate(model, cand, gpu)
            except GpuplanError:
                continue
            if r > rate * (1 + REPLICA_MIN_GAIN):
                rate, winner = r, (layout, cand, e)
        if winner is not None:
            o = _inference_option(model, winner[1], gpu, n, winner[0], winner[2], price, carbon_g_per_kwh)
            if o.fits:
                best = o
    return best


def _marks(w: Workload, time_s: float | None, usd: float | None) -> tuple[bool | None, bool | None]:
    deadline = None if w.deadline is None or time_s is None else time_s <= w.deadline
    budget = None if w.budget is None or usd is None else usd <= w.budget
    return deadline, budget


def _training_option(
    model: ModelSpec,
    w: Workload,
    gpu: GPU,
    n: int,
    layout: dict[str, Any],
    mem: MemoryEstimate,
    price: Price | None,
    carbon: float | None,
) -> Option:
    t = estimate_training_time(model, w, gpu)
    seconds, ce = training_job(t, gpu, n, price, carbon)
    deadline, budget = _marks(w, t.time_to_train_s, ce.usd if w.train_tokens else None)
    why = _why_training(t, gpu, n, layout)
    return Option(gpu, n, layout, True, mem, t.bottleneck, why, training=t, time_s=seconds,
                  throughput=t.tokens_per_s, cost=ce, meets_deadline=deadline, within_budget=budget)  # fmt: skip


def _inference_option(
    model: ModelSpec,
    w: Workload,
    gpu: GPU,
    n: int,
    layout: dict[str, Any],
    mem: MemoryEstimate,
    price: Price | None,
    carbon: float | None,
) -> Option:
    service = w.tokens is None
    cap = mem.serving.max_sequences if mem.serving else w.batch_size
    # a preallocating engine's KV cache holding fewer of the batch's requests (sent at once) than were
    # sent: that many run at once and the rest wait, the whole job in waves, its throughput and median
    # request as validation predicts them (planner/serving.queued_serving; estimate does the same);
    # under request_rate or for `tokens` (the engine refills a slot), timed at the batch that runs, with a note
    job = queued_serving(model, w, gpu, mem)
    if job is not None:
        it, queued = queued_time(job), queued_note(job)
    else:
        held, queued = running_batch(w, mem)
        run = w.with_(batch_size=held) if held < w.batch_size else w
        it = estimate_inference_time(model, run, gpu, max_batch=max(cap, held) if not service else held)
    busy = busy_share((o.bound, o.time_s) for o in it.running_ops)
    rate = it.output_tokens_per_s
    generates = model.kind not in ("cnn", "encoder", "vision-transformer")
    serving = serving_batch(model, w, gpu, n, price, own=it) if generates else None
    if service:
        duration = w.deadline or 3600.0
        ce = cost_and_energy(gpu, n, duration, busy, price, rate * duration, carbon)
        slow = _too_slow(w, it)
        why = (f"{queued}; " if queued else "") + _why_inference(it, layout, True)
        latency = it.ttft_single_s + (max(w.output_len, 1) - 1) * it.tpot_s
        if slow:
            why = f"{slow}; " + why
        _, budget = _marks(w, None, ce.usd)  # a service has no deadline to meet, only a budget
        return Option(gpu, n, layout, True, mem, it.bottleneck, why, inference=it, time_s=latency,
                      throughput=rate, cost=ce, within_budget=budget, too_slow=bool(slow), serving=serving)  # fmt: skip
    assert w.tokens is not None
    seconds = w.tokens / rate
    ce = cost_and_energy(gpu, n, seconds, busy, price, w.tokens, carbon)
    deadline, budget = _marks(w, seconds, ce.usd)
    why = (f"{queued}; " if queued else "") + _why_inference(it, layout, False)
    return Option(gpu, n, layout, True, mem, it.bottleneck, why, inference=it, time_s=seconds,
                  throughput=rate, cost=ce, meets_deadline=deadline, within_budget=budget, serving=serving)  # fmt: skip


def _too_slow(w: Workload, it: InferenceTime) -> str:
    """What a service at the workload's batch misses: its `max_tpot_ms` (without one, the
    interactive floor SERVICE_MAX_TPOT_S) or its `max_ttft_ms`; '' when it meets them."""
    tpot_ms = it.tpot_s * 1e3
    limit = w.max_tpot_ms if w.max_tpot_ms is not None else SERVICE_MAX_TPOT_S * 1e3
    if tpot_ms > limit:
        if w.max_tpot_ms is None:
            return f"too slow for interactive use ({tpot_ms:,.0f} ms/token > {limit:.0f})"
        return f"too slow for max_tpot_ms={limit:g} ({tpot_ms:,.1f} ms/token)"
    if w.max_ttft_ms is not None and it.ttft_single_s * 1e3 > w.max_ttft_ms:
        return f"too slow for max_ttft_ms={w.max_ttft_ms:g} (TTFT {it.ttft_single_s * 1e3:,.0f} ms)"
    return ""


def _rank_key(o: Option, objective: str, service: bool) -> tuple[float, ...]:
    inf = float("inf")
    usable = 0.0 if o.ok else 1.0
    if not o.fits:
        return (2.0, inf, o.num_gpus)
    ce = o.cost
    if objective == "cost":
        if service:
            v = ce.usd if ce and ce.usd is not None else inf
        else:
            v = ce.usd_per_million_tokens if ce and ce.usd_per_million_tokens is not None else inf
    elif objective == "energy":
        v = ce.kwh_per_million_tokens if ce and ce.kwh_per_million_tokens is not None else inf
    elif o.training is not None and o.training.time_to_train_s is None:
        # no job size: the faster option is the one with more tokens per second, not a shorter step
        v = 1.0 / o.throughput if o.throughput else inf
    else:
        v = o.time_s if o.time_s is not None else inf
    tie = o.time_s if o.time_s is not None else inf
    return (usable, v, tie, o.num_gpus)


def plan_options(
    model: ModelSpec,
    w: Workload,
    catalog: Catalog,
    prices: dict[str, Price],
    gpus: Iterable[GPU] | None = None,
    counts: Iterable[int] = PLAN_COUNTS,
    carbon_g_per_kwh: float | None = None,
    owned: Collection[str] = (),
) -> list[Option]:
    """Every (GPU type, count) option, ranked by the workload's objective (usable ones first).
    A GeForce card is barred from datacenter plans by its licence unless the user owns it
    (`owned`, catalog names) and did not say it sits in a datacenter (`datacenter: true`)."""
    out: list[Option] = []
    cands = Candidates(w)
    with shared_estimates():  # a training layout's memory estimated once, not once per GPU type
        for gpu in gpus if gpus is not None else catalog:
            for n in counts:
                o = evaluate(model, w, gpu, n, prices.get(gpu.name), carbon_g_per_kwh, cands)
                if gpu.name in owned and o.cost is not None:  # no rent on the user's own cards
                    o = _owned(o, w)
                if o.fits and gpu.geforce_eula and w.datacenter:
                    if gpu.name in owned and "datacenter" not in w.model_fields_set:
                        o = replace(o, why=f"{o.why}; {GEFORCE_OWNED}")  # a note: the user's own card
                    else:
                        o = replace(o, licence_barred=True, why=f"{o.why}; {GEFORCE_LICENCE}")
                out.append(o)
    service = not w.is_training and w.tokens is None
    out.sort(key=lambda o: _rank_key(o, w.objective, service))
    return out


def _owned(o: Option, w: Workload) -> Option:
    """An option on cards the user owns: its cost is their electricity, not a cloud's rent."""
    from gpuplan.estimators.ownership import own_power_cost  # only plans with `have` need it

    assert o.cost is not None
    ce = own_power_cost(o.cost)
    sv = o.serving
    if sv is not None and sv.tokens_per_s and ce.usd_per_gpu_hour is not None:
        # the serving batch's $/Mtok at the same electricity price as the cost column
        # (planner/serving.py: $/h x GPUs / (tokens/s x 3600) x 1e6)
        sv = replace(sv, usd_per_million_tokens=ce.usd_per_gpu_hour * o.num_gpus / (sv.tokens_per_s * 3600.0) * 1e6)
    return replace(o, cost=ce, within_budget=_marks(w, o.time_s, ce.usd)[1], serving=sv)


def pareto_front(points: Sequence[tuple[float, float] | None]) -> list[bool]:
    """For each (time, cost) point, whether no other point is at least as good in both and better
    in one (both minimised); None (no time or no price) is never on the front. Ties are kept."""
    # one sweep in time order instead of every pair: a point is dominated by an earlier time at a
    # cost no higher (`cheapest` before its time), or by the same time at a lower cost
    valid = sorted(((p[0], p[1], i) for i, p in enumerate(points) if p is not None), key=lambda x: x[0])
    out = [False] * len(points)
    cheapest: float | None = None  # the lowest cost among points of an earlier time
    start = 0
    while start < len(valid):
        end = start
        while end < len(valid) and valid[end][0] == valid[start][0]:
            end += 1
        low = min(c for _, c, _ in valid[start:end])
        for _, c, i in valid[start:end]:
            out[i] = not ((cheapest is not None and cheapest <= c) or low < c)
        cheapest = low if cheapest is None else min(cheapest, low)
        start = end
    return out
