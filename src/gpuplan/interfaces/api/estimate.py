"""`estimate` and `fit`: one workload's memory, time, cost and energy, and what fits where."""

from __future__ import annotations

from dataclasses import replace
from functools import partial
from typing import TYPE_CHECKING

from gpuplan.errors import InvalidSettingError
from gpuplan.estimators.cost import CostEnergy, busy_share, cost_and_energy, training_job
from gpuplan.estimators.memory import MemoryEstimate, estimate_memory
from gpuplan.interfaces.api.catalog import catalog, context, prices
from gpuplan.interfaces.api.records import (
    band,
    bandwidth_of,
    cost_result,
    energy_result,
    fit_need,
    inference_speed,
    memory_kind,
    memory_result,
    serving_queue,
    training_speed,
    verdict_result,
)
from gpuplan.interfaces.api.workloads import engine_for_model, gpu_for, resolve_cluster
from gpuplan.results import (
    BestPrecision,
    Estimate,
    FitResult,
    FitRow,
    FitTable,
    InferenceSpeed,
    Suggestion,
    TrainingSpeed,
)
from gpuplan.specs.context import Context
from gpuplan.specs.gpu import GPU
from gpuplan.specs.model import ModelSpec
from gpuplan.specs.models import load_model
from gpuplan.specs.precision import training_precision_gap
from gpuplan.specs.prices import Price
from gpuplan.specs.workload import Workload

if TYPE_CHECKING:  # a graphics job's plan type: results/plan.py loads where one is planned
    from gpuplan.results import GraphicsPlan

NO_GPU_NOTE = "no GPU given: time, cost and energy need one (gpu: NAME)"
# a job that does not fit has no time, cost or energy: it would not run (the verdict says what would)
WOULD_NOT_RUN = (
    "would not run: it needs more memory than {gpu} has (verdict.short_by_bytes per GPU); time, cost and "
    "energy are left out; verdict.fixes lists verified changes that fit"
)
WOULD_NOT_START = (
    "would not run: {limit} cannot hold one sequence (verdict.short_by_bytes short), so the engine does not "
    "start; time, cost and energy are left out; verdict.fixes lists verified changes that fit"
)


def estimate(
    w: Workload,
    ctx: Context | None = None,
    carbon_g_per_kwh: float | None = None,
    model: ModelSpec | None = None,
) -> Estimate:
    """`gpuplan estimate`: memory, time, cost and energy of one workload (its JSON contract: docs/api.md).
    `model` (e.g. from a pasted config.json) stands in for the workload's `model` name."""
    from gpuplan.estimators.perf import estimate_training_time  # numpy: not for `fit`

    if w.is_graphics:  # streams, desktops and frames have no memory breakdown or step time to estimate
        raise InvalidSettingError(
            f"estimate covers ML jobs; a graphics job (task: {w.task}) is sized by `gpuplan fit` "
            "(which GPUs hold it) or `gpuplan plan` (ranked by cost or time)"
        )
    ctx = context(ctx)  # read once: the estimate, its price and its fixes share it
    cat = catalog(ctx)
    model = model or load_model(w.model)
    w = engine_for_model(w, model)
    w, cl = resolve_cluster(w, cat)
    gpu = gpu_for(w, cat)
    e = estimate_memory(model, w, gpu)
    memory = memory_result(e)
    head = partial(
        Estimate,
        verdict=verdict_result(model, w, gpu, memory, ctx),
        workload=w.model_dump(exclude_none=True),
        model=model.name,
        gpu=gpu.name if gpu else None,
        num_gpus=w.num_gpus,
        throughput_unit="images/s" if model.kind == "cnn" else "tokens/s",
        memory=memory,
    )
    if gpu is None:
        return head(time=None, notes=[NO_GPU_NOTE])
    if not e.fits:
        kv = e.serving is not None and e.kv_short_bytes > 0 and (e.headroom_bytes or 0.0) >= 0
        why = WOULD_NOT_START.format(limit=e.serving.limit) if kv and e.serving else WOULD_NOT_RUN.format(gpu=gpu.name)
        return head(time=None, notes=[why])
    price = prices(ctx).get(gpu.name)
    time: TrainingSpeed | InferenceSpeed
    ce: CostEnergy
    if w.is_training:
        t = estimate_training_time(model, w, gpu, cl)
        seconds, ce = training_job(t, gpu, w.num_gpus, price, carbon_g_per_kwh)
        time = training_speed(t, gpu.architecture, model.kind, job_s=seconds)
    else:
        time, ce, lead, misses = _inference(model, w, gpu, e, price, carbon_g_per_kwh)
        if lead or misses:  # it runs, but queued or not as fast as asked: the verdict says so, the queue first
            v = head.keywords["verdict"]
            head = partial(head, verdict=replace(v, notes=[*lead, *v.notes, *misses]))
    return head(time=time, cost=cost_result(ce), energy=energy_result(ce))


def _inference(
    model: ModelSpec, w: Workload, gpu: GPU, e: MemoryEstimate, price: Price | None, carbon: float | None
) -> tuple[InferenceSpeed, CostEnergy, list[str], list[str]]:
    """An inference job's time, cost and energy, with the verdict's notes: first (`lead`) how many of
    a batch the KV cache does not hold run at once, then (`misses`) the latency targets it misses."""
    from gpuplan.estimators.perf import estimate_inference_time  # numpy: not for `fit`
    from gpuplan.planner.serving import queued_note, queued_serving, queued_time, running_batch, target_misses

    # a preallocating engine whose KV cache holds fewer of the batch's requests (sent at once) than
    # were sent runs that many at once and the rest wait: the whole job in waves, as validation
    # predicts it (planner/serving.queued_serving; plan rows the same)
    job = queued_serving(model, w, gpu, e)
    queued = ""
    if job is not None:
        i, run = queued_time(job), w.with_(batch_size=job.held)
    else:  # under request_rate or for `tokens`, one that holds fewer is timed at the batch it holds, with a note
        cap = e.serving.max_sequences if e.serving else w.batch_size
        held, queued = running_batch(w, e)
        run = w.with_(batch_size=held) if held < w.batch_size else w
        i = estimate_inference_time(model, run, gpu, max_batch=max(cap, held))
    rate = i.output_tokens_per_s
    # one batch of requests: its output tokens, or the images / input tokens of a one-pass model
    # (a finite run: its num_prompts, which the workload accepts only beside request_rate)
    sent = w.num_prompts if w.num_prompts is not None else w.batch_size
    tokens = w.tokens or (sent * max(w.output_len, 1) if i.decode_ops else rate * i.ttft_s)
    seconds = tokens / rate if rate > 0 else i.request_latency_s
    busy = busy_share((o.bound, o.time_s) for o in i.running_ops)
    ce = cost_and_energy(gpu, w.num_gpus, seconds, busy, price, tokens, carbon)
    time = inference_speed(
        i,
        gpu.architecture,
        model.kind,
        job_s=seconds,
        bandwidth_bytes_per_s=bandwidth_of(gpu),
        queue=serving_queue(job) if job else None,
    )
    lead = [queued_note(job)] if job else []
    misses = [queued] if queued else []  # the request_rate note after the verdict's own, as before
    return time, ce, lead, misses + [f"misses its latency target {m}" for m in target_misses(run, i)]


def fit(w: Workload, ctx: Context | None = None, model: ModelSpec | None = None) -> FitResult | FitTable | GraphicsPlan:
    """`gpuplan fit`: with a GPU, the breakdown, inverse questions and suggestions; without one,
    every catalog GPU with whether it fits (and its breakdown at num_gpus) and the fewest GPUs of
    that type that do. A graphics job gets its plan. `model` stands in for the workload's `model`."""
    ctx = context(ctx)
    targets = [k for k in ("max_tpot_ms", "max_ttft_ms") if getattr(w, k) is not None]
    if targets:  # fit answers memory only: a latency target would be silently ignored here
        raise InvalidSettingError(
            f"fit answers memory only and does not read {', '.join(targets)}; "
            "use `gpuplan estimate` (says whether the job meets it) or `gpuplan plan` (the best batch that does)"
        )
    if w.is_graphics:
        from gpuplan.interfaces.api.plan import plan_graphics

        return plan_graphics(w, catalog(ctx), model)
    cat = catalog(ctx)
    model = model or load_model(w.model)
    w = engine_for_model(w, model)
    w, _ = resolve_cluster(w, cat)
    gpu = gpu_for(w, cat)
    return fit_table(w, ctx, model) if gpu is None else fit_one(w, model, gpu, ctx)


def fit_one(w: Workload, model: ModelSpec, gpu: GPU, ctx: Context | None = None) -> FitResult:
    """`fit` on one GPU: the breakdown and the inverse questions."""
    # imported here: only `fit` needs the inverse questions (keeps `gpuplan plan` start-up short)
    from gpuplan.planner.fit import best_precision, largest_batch, longest_context, smallest_gpu_count, suggestions

    e = estimate_memory(model, w, gpu)
    count = smallest_gpu_count(model, w, gpu)
    best = None if w.is_training else best_precision(model, w, gpu)
    memory = memory_result(e)
    return FitResult(
        verdict=verdict_result(model, w, gpu, memory, ctx),
        model=model.name,
        gpu=gpu.name,
        num_gpus=w.num_gpus,
        workload=w.model_dump(exclude_none=True),
        memory=memory,
        min_gpus=count.num_gpus,
        min_gpus_layout=count.layout,
        largest_batch=largest_batch(model, w, gpu),
        longest_context=longest_context(model, w, gpu),
        suggestions=[
            Suggestion(label=s.label, change=s.change, per_gpu_bytes=s.per_gpu_bytes, fits=s.fits, cost=s.cost)
            for s in suggestions(model, w, gpu)
        ],
        best_precision=BestPrecision(weight_dtype=best[0], kv_dtype=best[1]) if best else None,
        training=w.is_training,
    )


def fit_table(w: Workload, ctx: Context | None, model: ModelSpec) -> FitTable:
    """`fit` without a GPU: every catalog GPU, whether it fits, and the fewest of it that do."""
    from gpuplan.planner.fit import GpuCount, smallest_gpu_count
    from gpuplan.planner.screening import Candidates, memory, shared_estimates

    rows = []
    cands = Candidates(w)  # each GPU count's workload validated once for the whole catalog
    cannot: list[str] = []
    runnable = []
    for g in catalog(ctx):
        gap = training_precision_gap(w.precision, g) if w.is_training else None
        if gap:  # no memory row for a card that cannot run the job's precision at all
            cannot.append(g.name)
        else:
            runnable.append(g)
    with shared_estimates():  # and a training job's memory estimated once per count, not per GPU type
        found = [(g, memory(model, w, g)) for g in runnable]
        needs: list[GpuCount | None] = [
            None if e.fits else smallest_gpu_count(model, w, g, candidates=cands) for g, e in found
        ]
    for (g, e), need in zip(found, needs, strict=True):
        # a preallocating engine's estimate is the share of the card it reserves: the row says what
        # the job needs (fit_need), and what the engine reserves beside it
        srv = fit_need(e)
        per_gpu = srv.per_gpu_bytes if srv else e.per_gpu_bytes
        cap = e.capacity_bytes
        low, high = band(per_gpu, memory_kind(g.architecture))
        rows.append(
            FitRow(
                gpu=g.name,
                memory_bytes=g.memory_bytes,
                fits=e.fits,
                per_gpu_bytes=per_gpu,
                per_gpu_bytes_low=low,
                per_gpu_bytes_high=high,
                capacity_bytes=cap,
                breakdown=srv.breakdown if srv else e.breakdown(),
                headroom_bytes=(None if cap is None else cap - per_gpu) if srv else e.headroom_bytes,
                paged_spill_bytes=e.paged_spill_bytes,
                min_gpus=w.num_gpus if e.fits else (need.num_gpus if need else None),
                min_gpus_layout={} if e.fits or need is None else need.layout,
                min_gpus_per_gpu_bytes=per_gpu if e.fits else (_needed(need.estimate) if need else None),
                serving=srv.serving if srv else None,
            )
        )
    rows.sort(key=lambda r: (r.min_gpus is None, r.min_gpus or 0, r.memory_bytes))
    why = f"{w.precision} training needs {w.precision.upper()} tensor cores; these have none" if cannot else ""
    return FitTable(
        model=model.name,
        num_gpus=w.num_gpus,
        workload=w.model_dump(exclude_none=True),
        gpus=rows,
        cannot_run=cannot,
        cannot_run_why=why,
    )


def _needed(e: MemoryEstimate | None) -> float | None:
    """What the job needs per GPU on `e`'s layout: fit_need's where the engine preallocates."""
    if e is None:
        return None
    srv = fit_need(e)
    return srv.per_gpu_bytes if srv else e.per_gpu_bytes
