"""Typed answers of `estimate` and `fit`: memory (with its breakdown), time, cost and energy.

Field names and order are the estimate's JSON contract (docs/api.md): `to_dict()` is the `--json` document.
Units are SI: bytes, seconds, tokens per second, USD, kWh.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from gpuplan.results.base import Result, band, optional


@dataclass(frozen=True, kw_only=True)
class Uncertainty(Result):
    """The range a figure's validation errors give it: 10th-90th percentile of the residuals of
    its kind (e.g. decode on Hopper)."""

    low: float
    high: float
    basis: str
    median_abs_error: float


@dataclass(frozen=True, kw_only=True)
class MemoryLine(Result):
    """One term of the memory breakdown (weights, gradients, optimizer states, activations...)."""

    name: str
    bytes: float
    kind: str
    note: str


@dataclass(frozen=True, kw_only=True)
class ServingMemory(Result):
    """An inference engine's KV-cache budget: what is left for the cache, and how many tokens and
    sequences it holds. `engine` names an engine that preallocates it (vLLM, SGLang; null: the
    workload's engine does not, and this is vLLM's view for reference); such an engine does not
    start when the budget is short of one sequence (`kv_short_bytes` > 0), and the job does not fit."""

    gpu_memory_utilization: float
    kv_budget_bytes: float
    kv_bytes_per_token: float
    max_tokens: int
    max_sequences: int
    sequence_kv_bytes: float  # one sequence of input_len + output_len tokens, in whole KV blocks
    kv_short_bytes: float  # sequence_kv_bytes less the budget, when positive; else 0
    engine: str | None

    @property
    def binds(self) -> bool:
        """A preallocating engine whose budget cannot hold one sequence: it would not start."""
        return self.engine is not None and self.kv_short_bytes > 0

    @property
    def limit(self) -> str:
        # the same words as estimators/memory/base.py ServingCapacity.limit (plan rows use that one)
        return f"{self.engine or 'vLLM'}'s KV cache at gpu_memory_utilization {self.gpu_memory_utilization:g}"


@dataclass(frozen=True, kw_only=True)
class Memory(Result):
    """Per-GPU memory at the peak, what it is made of, and whether it fits."""

    per_gpu_bytes: float
    per_gpu_bytes_low: float | None = band()
    per_gpu_bytes_high: float | None = band()
    breakdown: dict[str, float]
    fits: bool | None  # None: no GPU to fit on
    capacity_bytes: float | None
    headroom_bytes: float | None  # capacity less per_gpu_bytes; negative: the shortfall
    allocated_bytes: float
    reserved_bytes: float
    host_bytes: float
    paged_spill_bytes: float
    on_card_bytes: float
    peak_phase: str
    phases: dict[str, float]
    trainable_params: int
    lines: list[MemoryLine]
    not_at_peak: dict[str, float]
    notes: list[str]
    serving: ServingMemory | None = optional()


@dataclass(frozen=True, kw_only=True)
class OpTime(Result):
    """An operator's time in one step (merged over layers), and what bounds it."""

    name: str
    phase: str
    time_s: float
    flops: float
    bytes: float
    bound: str


@dataclass(frozen=True, kw_only=True)
class TrainingSpeed(Result):
    """Step time, throughput and utilisation of a training job, each with its validation range."""

    step_time_s: float
    step_time_s_low: float | None = band()
    step_time_s_high: float | None = band()
    tokens_per_s: float
    tokens_per_s_low: float | None = band()
    tokens_per_s_high: float | None = band()
    tokens_per_s_per_gpu: float
    tokens_per_step: float
    mfu: float
    hfu: float
    model_flops_per_token: float
    time_to_train_s: float | None
    time_to_train_s_low: float | None = band()
    time_to_train_s_high: float | None = band()
    train_tokens: float | None
    bottleneck: str
    compute_s: float
    exposed_comm_s: float
    bubble_s: float
    ops: list[OpTime]
    uncertainty: Uncertainty | None
    notes: list[str]
    job_s: float | None = optional()  # `estimate`: the job's whole time


@dataclass(frozen=True, kw_only=True)
class ServingQueue(Result):
    """`requests` (the workload's `batch_size`, sent at once: no `request_rate`, no `tokens`) on a preallocating
    engine (vLLM, SGLang, TGI) whose KV cache holds only `held` of them: `held` run at once and the
    rest wait, in `waves` of `held` one after another (the last the remainder). The same model the
    validation's queued rows are predicted by (planner/serving.py queued_job). `batch_s`: the whole
    batch, first request sent to last token; `output_tokens_per_s`: over that whole time, all
    replicas (the time's own `output_tokens_per_s`); `median_ttft_s`: the median request's time to
    its first token, its wait included (the time's `ttft_s`); `median_itl_s`: the median gap between
    a running request's tokens, a decode step of `held` plus, under vLLM, a waiting prompt's prefill
    chunk where most steps carry one (the time's `tpot_s`); `wave_output_tokens_per_s` and
    `wave_tpot_s`: while a full wave of `held` runs, waits aside."""

    requests: int
    held: int
    waves: int
    batch_s: float
    output_tokens_per_s: float
    median_ttft_s: float
    median_itl_s: float
    wave_output_tokens_per_s: float
    wave_tpot_s: float


@dataclass(frozen=True, kw_only=True)
class InferenceSpeed(Result):
    """Latency and throughput of a serving or batch-inference job, each with its validation range.
    `ttft_s` is one request's time to first token (its prompt's prefill alone, as a user waits);
    `prefill_batch_s` the whole batch's prefill (every prompt at once: a one-pass model's answer).
    Where the engine's KV cache holds fewer of the batch's requests than were sent at once, `queue`
    says how many run at once, and `ttft_s`, `tpot_s` and `output_tokens_per_s` are the whole
    queued batch's (the median request's, over the whole batch); `batch`, `prefill_batch_s` and
    `request_latency_s` are those of a wave of the `queue.held` that run at once."""

    ttft_s: float
    ttft_s_low: float | None = band()
    ttft_s_high: float | None = band()
    prefill_batch_s: float
    prefill_batch_s_low: float | None = band()
    prefill_batch_s_high: float | None = band()
    tpot_s: float
    tpot_s_low: float | None = band()
    tpot_s_high: float | None = band()
    output_tokens_per_s: float
    output_tokens_per_s_low: float | None = band()
    output_tokens_per_s_high: float | None = band()
    request_latency_s: float
    batch: int
    replicas: int
    max_batch: int
    best_output_tokens_per_s: float
    best_output_tokens_per_s_low: float | None = band()
    best_output_tokens_per_s_high: float | None = band()
    best_batch: int
    prefill_tokens_per_s: float
    bottleneck: str
    prefill_ops: list[OpTime]
    decode_ops: list[OpTime]
    uncertainty: Uncertainty | None
    notes: list[str]
    job_s: float | None = optional()  # `estimate`: the time to serve the job's tokens
    queue: ServingQueue | None = optional()  # a batch the KV cache does not hold at once


@dataclass(frozen=True, kw_only=True)
class Cost(Result):
    usd: float | None
    usd_per_gpu_hour: float | None
    price_source: str | None
    gpu_hours: float
    usd_per_million_tokens: float | None


@dataclass(frozen=True, kw_only=True)
class Energy(Result):
    kwh: float
    avg_power_w_per_gpu: float
    kwh_per_million_tokens: float | None
    co2_kg: float | None
    basis: str


@dataclass(frozen=True, kw_only=True)
class FixResult(Result):
    """Workload changes that make the job fit, verified: the estimate run again with exactly
    `changes` gives `per_gpu_bytes` of `capacity_bytes` on `num_gpus` x `gpu`, and `time_s`."""

    label: str
    changes: dict[str, Any]
    per_gpu_bytes: float
    headroom_bytes: float
    gpu: str
    num_gpus: int
    time_s: float | None  # a training step, or one request (inference), after the change
    time_what: str  # "step", "request", or "output token" (a partial offload: its decode speed)
    usd_per_hour: float | None  # all its GPUs, where a price is listed
    cost: str  # what the change costs in speed, quality or money


@dataclass(frozen=True, kw_only=True)
class Verdict(Result):
    """Does the job fit, by how much, what binds, and the smallest verified changes that make it
    fit (`fixes`, the least change first; empty when it fits). `short_by_bytes` is the peak less the
    usable memory per GPU; where the peak fits but a preallocating engine's KV budget cannot hold one
    sequence (`limit`: "vLLM's KV cache at gpu_memory_utilization 0.9"), it is that sequence's KV
    bytes less the budget: what the budget lacks for the engine to start."""

    fits: bool | None  # None: no GPU named
    gpu: str | None
    num_gpus: int
    per_gpu_bytes: float
    capacity_bytes: float | None
    headroom_bytes: float | None  # spare bytes per GPU when it fits
    # missing bytes per GPU when it does not: the peak less the usable memory; or, when the peak fits
    # but a preallocating engine's KV budget cannot hold one sequence (limit "vLLM's KV cache at
    # gpu_memory_utilization 0.9"), that sequence's KV bytes less the budget (Memory.serving)
    short_by_bytes: float | None
    # what binds: memory at the phase whose memory peaks (e.g. "backward", "decode"), or the engine's
    # KV cache at its gpu_memory_utilization
    limit: str
    fixes: list[FixResult]
    notes: list[str]  # what else the answer depends on (e.g. a context past the model's limit)

    @classmethod
    def of(
        cls,
        memory: Memory,
        gpu: str | None,
        num_gpus: int,
        fixes: list[FixResult] | None = None,
        notes: list[str] | None = None,
    ) -> Verdict:
        s = memory.serving
        kv = (s.kv_short_bytes, s.limit) if s is not None and s.binds else None
        return cls.of_figures(
            memory.fits, gpu, num_gpus, memory.per_gpu_bytes, memory.capacity_bytes, memory.headroom_bytes,
            memory.peak_phase, fixes, notes, kv,
        )  # fmt: skip

    @classmethod
    def of_figures(
        cls,
        fits: bool | None,
        gpu: str | None,
        num_gpus: int,
        per_gpu_bytes: float,
        capacity_bytes: float | None,
        room: float | None,
        peak_phase: str | None,
        fixes: list[FixResult] | None = None,
        notes: list[str] | None = None,
        kv: tuple[float, str] | None = None,
    ) -> Verdict:
        """The verdict from a memory estimate's figures: `room` (capacity less need) splits into
        headroom (>= 0) or a shortfall. `kv`: (bytes short, limit) where a preallocating engine's KV
        budget cannot hold one sequence; it binds when the peak itself fits, else it is a note."""
        limit = f"memory at {peak_phase}" if peak_phase else "memory"
        notes = list(notes or [])
        short = -room if room is not None and room < 0 else None
        if kv is not None and short is None:
            short, limit, room = kv[0], kv[1], None
        elif kv is not None:
            notes.append(f"{kv[1]} is also {kv[0] / 2**30:,.2f} GiB short of one sequence's KV cache")
        return cls(
            fits=fits,
            gpu=gpu,
            num_gpus=num_gpus,
            per_gpu_bytes=per_gpu_bytes,
            capacity_bytes=capacity_bytes,
            headroom_bytes=room if room is not None and room >= 0 else None,
            short_by_bytes=short,
            limit=limit,
            fixes=list(fixes or []),
            notes=notes,
        )


@dataclass(frozen=True, kw_only=True)
class Estimate(Result):
    """`gpuplan estimate`: the verdict first, then memory, time, cost and energy of one workload on
    one GPU type. A job that does not fit has no time, cost or energy: it would not run."""

    verdict: Verdict
    workload: dict[str, Any]
    model: str
    gpu: str | None
    num_gpus: int
    throughput_unit: str
    memory: Memory
    time: TrainingSpeed | InferenceSpeed | None
    notes: list[str] | None = optional()
    cost: Cost | None = optional()
    energy: Energy | None = optional()


@dataclass(frozen=True, kw_only=True)
class Suggestion(Result):
    """A change that lowers per-GPU memory, with what it gives and what it costs."""

    label: str
    change: dict[str, Any]
    per_gpu_bytes: float
    fits: bool
    cost: str


@dataclass(frozen=True, kw_only=True)
class BestPrecision(Result):
    weight_dtype: str
    kv_dtype: str


@dataclass(frozen=True, kw_only=True)
class FitResult(Result):
    """`gpuplan fit` on one GPU: the breakdown, the inverse questions (fewest GPUs, largest batch,
    longest context) and changes that fit. `best_precision` is for inference jobs only."""

    verdict: Verdict
    model: str
    gpu: str
    num_gpus: int
    workload: dict[str, Any]
    memory: Memory
    min_gpus: int | None
    min_gpus_layout: dict[str, Any]
    largest_batch: int
    longest_context: int
    suggestions: list[Suggestion]
    best_precision: BestPrecision | None = None
    training: bool = False  # not serialised: whether `best_precision` belongs in the document

    def to_dict(self) -> dict[str, Any]:
        out = super().to_dict()
        del out["training"]
        if self.training:
            del out["best_precision"]
        return out


@dataclass(frozen=True, kw_only=True)
class FitServing(Result):
    """A fit row's engine that preallocates its KV cache (vLLM, SGLang): it takes
    `gpu_memory_utilization` of the card at start-up (`reserved_bytes`) whatever the job needs, and
    starts when the weights, its activations, non-torch memory and one sequence's KV fit in that
    share (`start_bytes`). Its KV pool holds `max_sequences` sequences of input_len + output_len
    tokens; of the batch's `batch_size`, `runs_at_once` run together and the rest wait for a slot."""

    engine: str
    gpu_memory_utilization: float
    reserved_bytes: float  # gpu_memory_utilization x the usable memory: what the engine takes at start-up
    start_bytes: float  # the least that starts it: per_gpu_bytes with one sequence's KV, not the batch's
    max_sequences: int  # sequences the KV pool holds at once (0: the engine does not start)
    batch_size: int
    runs_at_once: int  # min(max_sequences, batch_size)


@dataclass(frozen=True, kw_only=True)
class FitRow(Result):
    """One catalog GPU in `gpuplan fit` without a GPU: does it fit, and on how many. `per_gpu_bytes`
    is what the job needs per GPU; for an engine that preallocates its KV cache (`serving`) that is
    the weights, activations, non-torch memory and the whole batch's KV cache, not the share of the
    card the engine reserves (`serving.reserved_bytes`), and `breakdown` lists those terms.
    `headroom_bytes` is the usable memory less `per_gpu_bytes` (negative: the shortfall)."""

    gpu: str
    memory_bytes: float
    fits: bool | None
    per_gpu_bytes: float
    per_gpu_bytes_low: float | None = band()
    per_gpu_bytes_high: float | None = band()
    capacity_bytes: float | None
    breakdown: dict[str, float]
    headroom_bytes: float | None
    paged_spill_bytes: float
    min_gpus: int | None
    min_gpus_layout: dict[str, Any]
    min_gpus_per_gpu_bytes: float | None
    serving: FitServing | None = optional()  # present where the engine preallocates its KV cache


@dataclass(frozen=True, kw_only=True)
class FitTable(Result):
    """`gpuplan fit` without a GPU: every catalog GPU, fewest GPUs first."""

    model: str
    num_gpus: int
    workload: dict[str, Any]
    gpus: list[FitRow]
    cannot_run: list[str] = field(default_factory=list)  # catalog GPUs that cannot run the job's precision
    cannot_run_why: str = ""  # why, in words ("no FP8 tensor cores ...")
