"""Typed records of the estimators' answers: memory, time (each figure with its validation range),
cost and energy (results/estimate.py's types)."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from gpuplan.errors import InvalidSettingError
from gpuplan.estimators import runtime, uncertainty
from gpuplan.estimators.cost import CostEnergy
from gpuplan.estimators.memory import MemoryEstimate, estimate_memory
from gpuplan.interfaces.api.catalog import context
from gpuplan.results import (
    Cost,
    Energy,
    FitServing,
    FixResult,
    InferenceSpeed,
    Memory,
    MemoryLine,
    OpTime,
    ServingMemory,
    ServingQueue,
    TrainingSpeed,
    Uncertainty,
    Verdict,
)
from gpuplan.specs.context import Context
from gpuplan.specs.gpu import GPU
from gpuplan.specs.model import ModelSpec
from gpuplan.specs.workload import Workload

if TYPE_CHECKING:  # the time estimators (numpy) load where a time is estimated: `fit` needs none
    from gpuplan.estimators.perf import InferenceTime, Op, TrainingTime
    from gpuplan.planner.serving import QueuedJob

ENERGY_BASIS = "GPU board power = TDP x (0.2 + 0.8 x busy share), busy from the operators' bounds; GPU only"


def band(value: float | None, kind: str, time: bool = False) -> tuple[float | None, float | None]:
    """The validation range (low, high) of `value` from the residuals of `kind`, or (None, None)
    where no residuals cover it (`time`: a duration, whose error runs opposite to its rate's)."""
    if value is None:
        return None, None
    b = uncertainty.band(kind)
    if b is None:
        return None, None
    return b.range(value, time)


def uncertainty_of(kind: str, predicted: float) -> Uncertainty | None:
    b = uncertainty.band(kind)
    return Uncertainty(**b.record(predicted)) if b else None


def memory_kind(architecture: str | None) -> str:
    return f"memory/{architecture}" if architecture else "memory/none"


def memory_result(e: MemoryEstimate) -> Memory:
    """The memory part of the estimate's JSON contract (docs/api.md), with the breakdown's notes."""
    low, high = band(e.per_gpu_bytes, memory_kind(e.gpu.architecture if e.gpu else None))
    s = e.serving
    return Memory(
        per_gpu_bytes=e.per_gpu_bytes,
        per_gpu_bytes_low=low,
        per_gpu_bytes_high=high,
        breakdown=e.breakdown(),
        fits=e.fits,
        capacity_bytes=e.capacity_bytes,
        headroom_bytes=e.headroom_bytes,
        allocated_bytes=e.allocated_bytes,
        reserved_bytes=e.reserved_bytes,
        host_bytes=e.host_bytes,
        paged_spill_bytes=e.paged_spill_bytes,
        on_card_bytes=e.on_card_bytes,
        peak_phase=e.peak_phase,
        phases=e.phases,
        trainable_params=e.trainable_params,
        lines=[MemoryLine(name=x.name, bytes=x.bytes, kind=x.kind, note=x.note) for x in e.lines],
        not_at_peak={x.name: x.bytes for x in e.not_at_peak},
        notes=list(e.notes),
        serving=None
        if s is None
        else ServingMemory(
            gpu_memory_utilization=s.gpu_memory_utilization,
            kv_budget_bytes=s.kv_budget_bytes,
            kv_bytes_per_token=s.kv_bytes_per_token,
            max_tokens=s.max_tokens,
            max_sequences=s.max_sequences,
            sequence_kv_bytes=s.sequence_kv_bytes,
            kv_short_bytes=s.kv_short_bytes,
            engine=s.engine,
        ),
    )


@dataclass(frozen=True)
class ServingNeed:
    """What a job on a preallocating engine needs per GPU (fit_need), beside what the engine takes."""

    per_gpu_bytes: float  # the weights, activations, non-torch memory and the whole batch's KV cache
    breakdown: dict[str, float]  # those terms; the KV pool's line becomes the batch's "KV cache"
    serving: FitServing


def fit_need(e: MemoryEstimate) -> ServingNeed | None:
    """The per-GPU bytes a job on an engine that preallocates its KV cache (vLLM, SGLang:
    runtime.PREALLOCATING_ENGINES) needs to run its whole batch at once, from the memory estimate
    alone: its lines less the KV pool (estimators/memory/inference.py _pool_lines sizes the pool to
    gpu_memory_utilization x the card less the rest), plus batch_size sequences of input_len +
    output_len tokens in whole KV blocks (runtime.VLLM_BLOCK_TOKENS, as ServingCapacity.max_sequences
    counts them: the batch's KV fits the pool exactly when max_sequences >= batch_size). None for
    any other engine or job: its per_gpu_bytes already is what it needs."""
    s, cap = e.serving, e.capacity_bytes
    if s is None or s.engine is None or cap is None:
        return None
    w = e.workload
    rest = e.per_gpu_bytes - s.kv_budget_bytes  # the pool's line is kv_budget_bytes (absent when 0)
    blocks = math.ceil(max(w.input_len + w.output_len, 1) / runtime.VLLM_BLOCK_TOKENS)
    batch_kv = w.batch_size * blocks * runtime.VLLM_BLOCK_TOKENS * s.kv_bytes_per_token
    lines = [x for x in e.lines if not x.name.startswith("KV cache")]
    breakdown = {x.name: x.bytes for x in lines[:1]} | {"KV cache": batch_kv} | {x.name: x.bytes for x in lines[1:]}
    serving = FitServing(
        engine=s.engine,
        gpu_memory_utilization=s.gpu_memory_utilization,
        reserved_bytes=s.gpu_memory_utilization * cap,
        start_bytes=rest + s.sequence_kv_bytes,
        max_sequences=s.max_sequences,
        batch_size=w.batch_size,
        runs_at_once=min(s.max_sequences, w.batch_size),
    )
    return ServingNeed(rest + batch_kv, breakdown, serving)


def op_times(ops: Iterable[Op]) -> list[OpTime]:
    """Operators merged by (name, phase), largest time first."""
    merged: dict[tuple[str, str], list[float]] = {}
    bound: dict[tuple[str, str], str] = {}
    for o in ops:
        key = (o.name, o.phase)
        acc = merged.setdefault(key, [0.0, 0.0, 0.0])
        acc[0] += o.time_s
        acc[1] += o.flops
        acc[2] += o.bytes
        bound[key] = o.bound
    order = sorted(merged, key=lambda k: -merged[k][0])
    return [
        OpTime(name=k[0], phase=k[1], time_s=merged[k][0], flops=merged[k][1], bytes=merged[k][2], bound=bound[k])
        for k in order
    ]


def training_speed(
    t: TrainingTime, arch: str, model_kind: str = "decoder", job_s: float | None = None
) -> TrainingSpeed:
    """The time part of the estimate's JSON contract (docs/api.md) for training, each figure with its range."""
    kind = uncertainty.kind_of("training", model_kind, arch)
    step_low, step_high = band(t.step_time_s, kind, time=True)
    rate_low, rate_high = band(t.tokens_per_s, kind)
    ttt_low, ttt_high = band(t.time_to_train_s, kind, time=True)
    return TrainingSpeed(
        step_time_s=t.step_time_s,
        step_time_s_low=step_low,
        step_time_s_high=step_high,
        tokens_per_s=t.tokens_per_s,
        tokens_per_s_low=rate_low,
        tokens_per_s_high=rate_high,
        tokens_per_s_per_gpu=t.tokens_per_s_per_gpu,
        tokens_per_step=t.tokens_per_step,
        mfu=t.mfu,
        hfu=t.hfu,
        model_flops_per_token=t.model_flops_per_token,
        time_to_train_s=t.time_to_train_s,
        time_to_train_s_low=ttt_low,
        time_to_train_s_high=ttt_high,
        train_tokens=t.train_tokens,
        bottleneck=t.bottleneck,
        compute_s=t.compute_s,
        exposed_comm_s=t.exposed_comm_s,
        bubble_s=t.bubble_s,
        ops=op_times(t.ops),
        uncertainty=uncertainty_of(kind, t.tokens_per_s),
        notes=list(t.notes),
        job_s=job_s,
    )


def bandwidth_of(gpu: GPU) -> float:
    """The card's peak device-memory bandwidth, or a calibration's measured one where higher: the
    roofline a decode step cannot beat."""
    return max(gpu.memory_bandwidth_bytes_per_s, gpu.measured_bandwidth_bytes_per_s or 0.0)


def decode_roofline_s(t: InferenceTime, bandwidth_bytes_per_s: float | None) -> float | None:
    """The fastest a decode step can be: the bytes its operators stream from device memory (weights,
    KV cache, activations; not the interconnect's) at the card's peak bandwidth."""
    if not bandwidth_bytes_per_s or not t.decode_ops:
        return None
    moved = sum(o.bytes for o in t.decode_ops if o.bound in ("memory", "compute"))
    return moved / bandwidth_bytes_per_s if moved > 0 else None


def decode_band(
    t: InferenceTime, arch: str, model_kind: str, bandwidth_bytes_per_s: float | None
) -> tuple[tuple[float, float], uncertainty.Band] | None:
    """A generating model's TPOT range (the roofline caps its optimistic end) and the residuals that
    set it; None for a model that does not decode, or a kind without residuals. Throughput and
    duration ranges of the same run take this range's ratios (uncertainty.decode_rate_band)."""
    decode = uncertainty.band(uncertainty.kind_of("decode", model_kind, arch))
    if decode is None or not t.decode_ops or t.tpot_s <= 0:
        return None
    return uncertainty.decode_time_band(decode, t.tpot_s, decode_roofline_s(t, bandwidth_bytes_per_s)), decode


def inference_speed(
    t: InferenceTime,
    arch: str,
    model_kind: str = "decoder",
    job_s: float | None = None,
    bandwidth_bytes_per_s: float | None = None,
    queue: ServingQueue | None = None,
) -> InferenceSpeed:
    """The time part of the estimate's JSON contract (docs/api.md) for inference, each figure with its
    range. A generating model's throughput ranges come from its TPOT range (tokens/s = batch x
    replicas / TPOT), whose optimistic end stops at the memory roofline at `bandwidth_bytes_per_s`.
    `queue`: a batch the KV cache does not hold at once (`t` is then planner/serving.queued_time)."""

    def k(what: str) -> str:
        return uncertainty.kind_of(what, model_kind, arch)

    serving = k("serving throughput")
    ttft = band(t.ttft_single_s, k("prefill"), time=True)
    prefill = band(t.ttft_s, k("prefill"), time=True)
    tpot = band(t.tpot_s, k("decode"), time=True)
    rate = band(t.output_tokens_per_s, serving)
    best = band(t.best_output_tokens_per_s, serving)
    spread: Uncertainty | None = uncertainty_of(serving, t.output_tokens_per_s)
    tied = decode_band(t, arch, model_kind, bandwidth_bytes_per_s)
    if tied is not None:
        tpot, decode = tied
        rate = uncertainty.decode_rate_band(t.output_tokens_per_s, t.tpot_s, tpot)
        best = uncertainty.decode_rate_band(t.best_output_tokens_per_s, t.tpot_s, tpot)
        spread = Uncertainty(
            low=rate[0],
            high=rate[1],
            basis=f"from the TPOT range: 10th-90th percentile of {decode.n} validation errors for {decode.kind}",
            median_abs_error=decode.median_abs,
        )
    offered = t.offered_tokens_per_s
    if offered is not None and rate[0] is not None and rate[1] is not None:  # an open loop delivers what arrives
        rate = (min(rate[0], offered), min(rate[1], offered))
        spread = replace(spread, low=rate[0], high=rate[1]) if spread is not None else None
    return InferenceSpeed(
        ttft_s=t.ttft_single_s,
        ttft_s_low=ttft[0],
        ttft_s_high=ttft[1],
        prefill_batch_s=t.ttft_s,
        prefill_batch_s_low=prefill[0],
        prefill_batch_s_high=prefill[1],
        tpot_s=t.tpot_s,
        tpot_s_low=tpot[0],
        tpot_s_high=tpot[1],
        output_tokens_per_s=t.output_tokens_per_s,
        output_tokens_per_s_low=rate[0],
        output_tokens_per_s_high=rate[1],
        request_latency_s=t.request_latency_s,
        batch=t.batch,
        replicas=t.replicas,
        max_batch=t.max_batch,
        best_output_tokens_per_s=t.best_output_tokens_per_s,
        best_output_tokens_per_s_low=best[0],
        best_output_tokens_per_s_high=best[1],
        best_batch=t.best_batch,
        prefill_tokens_per_s=t.prefill_tokens_per_s,
        bottleneck=t.bottleneck,
        prefill_ops=op_times(t.prefill_ops),
        decode_ops=op_times(t.decode_ops),
        uncertainty=spread,
        notes=list(t.notes),
        job_s=job_s,
        queue=queue,
    )


def serving_queue(job: QueuedJob) -> ServingQueue:
    """The queued job's part of the estimate's JSON contract (docs/api.md: ServingQueue)."""
    wave = job.running
    return ServingQueue(
        requests=job.requests,
        held=job.held,
        waves=job.waves,
        batch_s=job.batch_s,
        output_tokens_per_s=job.output_tokens_per_s,
        median_ttft_s=job.median_ttft_s,
        median_itl_s=job.median_itl_s,
        wave_output_tokens_per_s=wave.output_tokens_per_s,
        wave_tpot_s=wave.tpot_s,
    )


def cost_result(ce: CostEnergy) -> Cost:
    return Cost(
        usd=ce.usd,
        usd_per_gpu_hour=ce.usd_per_gpu_hour,
        price_source=ce.price_source,
        gpu_hours=ce.gpu_hours,
        usd_per_million_tokens=ce.usd_per_million_tokens,
    )


def energy_result(ce: CostEnergy) -> Energy:
    return Energy(
        kwh=ce.energy_kwh,
        avg_power_w_per_gpu=ce.avg_power_w,
        kwh_per_million_tokens=ce.kwh_per_million_tokens,
        co2_kg=ce.co2_kg,
        basis=ENERGY_BASIS,
    )


def _time_what(w: Workload, changes: Mapping[str, Any]) -> str:
    if w.is_training:
        return "step"
    return "output token" if "gpu_layers" in changes else "request"


def fix_results(model: ModelSpec, w: Workload, gpu: GPU, ctx: Context | None) -> list[FixResult]:
    """The verified fixes of a job that does not fit (planner/verdict.py), each with the time it
    gives: a training step, or one request."""
    from gpuplan.estimators.perf import estimate_inference_time, estimate_training_time
    from gpuplan.planner.serving import running_batch  # imports the time estimators (numpy)
    from gpuplan.planner.verdict import fixes

    c = context(ctx)
    out = []
    for f in fixes(model, w, gpu, c.catalog, c.prices()):
        fgpu = c.catalog.get(f.gpu)
        try:
            if f.workload.is_training:
                time: float | None = estimate_training_time(model, f.workload, fgpu).step_time_s
            else:  # at the batch that runs at once, as the estimate of the fixed job times it
                held, _ = running_batch(f.workload, estimate_memory(model, f.workload, fgpu))
                run = f.workload.with_(batch_size=held) if held < f.workload.batch_size else f.workload
                speed = estimate_inference_time(model, run, fgpu)
                # a partial offload is told by its decode speed: the host's layers bound each token
                time = speed.tpot_s if "gpu_layers" in f.changes else speed.request_latency_s
        except InvalidSettingError:
            time = None
        out.append(
            FixResult(
                label=f.label,
                changes=f.changes,
                per_gpu_bytes=f.per_gpu_bytes,
                headroom_bytes=f.capacity_bytes - f.per_gpu_bytes,
                gpu=f.gpu,
                num_gpus=f.num_gpus,
                time_s=time,
                time_what=_time_what(f.workload, f.changes),
                usd_per_hour=f.usd_per_hour,
                cost=f.cost,
            )
        )
    return out


def verdict_result(model: ModelSpec, w: Workload, gpu: GPU | None, memory: Memory, ctx: Context | None) -> Verdict:
    """The answer first: fits or not, by how much, what binds, and (when it does not) the fixes."""
    notes = context_notes(model, w)
    if gpu is None:
        return Verdict.of(memory, None, w.num_gpus, notes=notes)
    notes += precision_notes(w, gpu) + layer_split_notes(w) + ollama_context_notes(model, w, gpu)
    notes += host_bandwidth_notes(model, w, gpu)
    fixes = [] if memory.fits else fix_results(model, w, gpu, ctx)
    return Verdict.of(memory, gpu.name, w.num_gpus, fixes, notes)


def host_bandwidth_notes(model: ModelSpec, w: Workload, gpu: GPU) -> list[str]:
    """A partial offload timed at the default host bandwidth: a theoretical DRAM peak (specs/workload.py
    DEFAULT_HOST_MEMORY_BANDWIDTH_GBPS), which CPU reads do not sustain; no sourced sustained share
    for desktop DDR5 is applied, so the user is asked for their measured figure (QA F24)."""
    from gpuplan.estimators.engines import offload_of
    from gpuplan.specs.workload import DEFAULT_HOST_MEMORY_BANDWIDTH_GBPS as PEAK

    off = offload_of(model, w, gpu)
    if off is None or w.host_memory_bandwidth is not None or off.cpu_layers <= 0:
        return []
    return [
        f"the {off.cpu_layers} host layers are timed at {PEAK:g} GB/s, dual-channel DDR5-5600's peak: CPU reads "
        "sustain less, so the time per token is a floor; set host_memory_bandwidth to what STREAM or Intel MLC "
        "measures on your machine"
    ]


def layer_split_notes(w: Workload) -> list[str]:
    """llama.cpp and Ollama on more GPUs than the layout uses: neither runs replicas. llama.cpp splits a
    model's layers over all the GPUs it sees (-sm layer, its default: docs/multi-gpu.md); Ollama runs
    it on one card where it fits there and spreads it over the cards where not (server/sched.go,
    OLLAMA_SCHED_SPREAD unset). The estimate's replicas are separate servers; pp states a split."""
    from gpuplan.estimators.engines import LAYER_SPLIT_ENGINES

    if w.engine not in LAYER_SPLIT_ENGINES or w.task != "inference" or w.num_gpus <= w.tp * w.pp:
        return []
    dp = w.num_gpus // (w.tp * w.pp)
    how = (
        "splits a model's layers over the GPUs it sees"
        if w.engine == "llama.cpp"
        else ("runs a model on one card where it fits there and spreads its layers over the cards where not")
    )
    return [
        f"{w.engine} {how}, running no replicas: this estimate is of {dp} separate servers of "
        f"{w.tp * w.pp} GPU(s) each; set pp: {w.num_gpus} for one server split over all {w.num_gpus}"
    ]


def ollama_context_notes(model: ModelSpec, w: Workload, gpu: GPU) -> list[str]:
    """Ollama's default context (by GPU memory) pushing layers onto the CPU, and the num_ctx that
    keeps them all on the GPU while still holding the request (engines.ollama_context_that_fits)."""
    from gpuplan.estimators.engines import offload_of, ollama_context_that_fits, ollama_num_ctx

    ctx = ollama_context_that_fits(model, w, gpu)
    off = offload_of(model, w, gpu)
    if ctx is None or off is None:
        return []
    return [
        f"Ollama's default context ({ollama_num_ctx(w, model, gpu):,} tokens, by the GPUs' memory) leaves "
        f"{off.cpu_layers} of {off.layers} layers on the CPU; num_ctx: {ctx:,} still holds this request's "
        f"{w.input_len + w.output_len:,} tokens and keeps every layer on the GPU"
    ]


def precision_notes(w: Workload, gpu: GPU) -> list[str]:
    """A bf16 job on a card without BF16 tensor cores (pre-Ampere: T4, V100, RTX 2080 Ti; BF16 needs
    compute capability 8.0, Transformer Engine's support matrix) runs as fp16: the estimate times it so,
    and the job's files must say so (vLLM rejects --dtype bfloat16 below compute capability 8.0)."""
    if w.precision != "bf16" or gpu.supports("bf16") or not gpu.supports("fp16"):
        return []
    return [f"{gpu.name} runs as fp16 (no BF16 tensor cores): set precision: fp16"]


def context_notes(model: ModelSpec, w: Workload) -> list[str]:
    """A context past the model's position limit (config.json's max_position_embeddings, which
    carries its RoPE scaling): the memory and time are computed, but the model was not made for it."""
    limit = model.max_position_embeddings
    if not limit or model.kind in ("cnn", "vision-transformer") or w.is_graphics:
        return []
    tokens = w.seq_len if w.is_training else w.input_len + w.output_len
    if tokens <= limit:
        return []
    what = "sequence" if w.is_training else "prompt + output"
    return [
        f"a {tokens:,}-token {what} is past {model.name}'s {limit:,}-token limit (max_position_embeddings): "
        "the figures hold for the memory and compute, but the model was not trained for it"
    ]
