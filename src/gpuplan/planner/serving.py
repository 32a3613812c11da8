"""Cost per million output tokens of a serving option, at the batch that serves them cheapest within
the workload's latency targets.

A GPU's price per hour is fixed, so the cheapest tokens come from the most tokens per second: the
largest batch (concurrent sequences) the card holds, the engine schedules and the latency targets
allow. `max_tpot_ms` bounds the mean time per output token (it grows with the batch: each decode
step reads every sequence's KV cache), `max_ttft_ms` one request's time to first token. Without a
target the figure is at the workload's own `batch_size`. Every candidate batch is estimated afresh:
memory (it must fit, KV cache included, and a preallocating engine's KV budget must hold it) and
time, so the chosen batch is one the estimator says runs; the next batch up does not (it misses a
target, does not fit or exceeds the engine's cap).

    $/Mtok = usd_per_gpu_hour x num_gpus / (output tokens/s x 3600) x 1e6
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Final

from gpuplan.errors import GpuplanError
from gpuplan.estimators import engines, runtime
from gpuplan.estimators.memory import MemoryEstimate, ServingCapacity, estimate_memory
from gpuplan.estimators.perf import estimate_inference_time
from gpuplan.estimators.perf.ops import ENGINE_MAX_BATCH, InferenceTime
from gpuplan.specs.gpu import GPU
from gpuplan.specs.model import ModelSpec
from gpuplan.specs.prices import Price
from gpuplan.specs.workload import Workload

# Engines that reserve gpu_memory_utilization of the card up front and size the KV cache from what
# is left (vLLM, SGLang; estimators/runtime.py): a batch search stops at the sequences the KV budget
# holds at once (more would queue, not run concurrently).
PREALLOCATING_ENGINES: Final = frozenset(runtime.PREALLOCATING_ENGINES)
# transformers and llama.cpp have no scheduler cap of their own; the search stops here (a batch of
# 1,024 concurrent sequences is beyond any single-node serving deployment the catalog prices)
OTHER_ENGINE_MAX_BATCH: Final = 1024


@dataclass(frozen=True)
class ServingBatch:
    """The batch a serving option's $/Mtok is quoted at, and what stops a larger one."""

    batch: int | None  # concurrent sequences, all replicas together; None: no batch meets the targets
    tokens_per_s: float | None  # output tokens/s at that batch, all GPUs together
    usd_per_million_tokens: float | None  # None without a price or a batch
    tpot_s: float | None
    ttft_s: float | None  # one request's time to first token
    limited_by: str  # why not a larger batch
    evaluated: int  # batches estimated


def engine_cap(w: Workload, gpu: GPU) -> int:
    """The most sequences the engine schedules in one step (vLLM's max_num_seqs by card; TensorRT-LLM
    max_batch_size 2048), as estimators/perf/inference.py uses it."""
    if w.engine in ENGINE_MAX_BATCH:
        return ENGINE_MAX_BATCH[w.engine]
    return runtime.vllm_max_num_seqs(gpu) if w.engine == "vllm" else OTHER_ENGINE_MAX_BATCH


def running_batch(w: Workload, mem: MemoryEstimate) -> tuple[int, str]:
    """The sequences that run at once, and a note when it is fewer than the workload's batch: a
    preallocating engine whose KV budget holds fewer than `batch_size` sequences (but at least one)
    still runs the job, that many at a time, and queues the rest (vLLM's scheduler admits a request
    only when its KV blocks can be allocated). TGI the same (its router's queue waits for KV blocks,
    --max-batch-total-tokens), and it takes at most --max-concurrent-requests (128) at once."""
    held, limit, refused = _running(w, mem)
    if not limit:
        return held, ""
    b = w.batch_size
    if refused:
        why = f"{limit} admits {held} of the {b} requests at once: it runs {held} and refuses the rest (HTTP 429) until one finishes"
    else:
        why = f"{limit} holds {held} of the {b} sequences at once: it runs {held} and queues the rest"
    return held, f"{why} (time and throughput at batch {held})"


def _running(w: Workload, mem: MemoryEstimate) -> tuple[int, str, bool]:
    """running_batch's sequences at once, what holds them to it ('' when all run: the KV cache at
    its memory share, or TGI's --max-concurrent-requests) and whether that one refuses the rest."""
    s = mem.serving
    b = w.batch_size
    if w.engine == "tgi":
        return _tgi_running(b, s)
    if w.engine not in PREALLOCATING_ENGINES or s is None or s.engine is None or not 1 <= s.max_sequences < b:
        return b, "", False
    return s.max_sequences, s.limit, False


# SGLang admits a waiting request while the KV pool holds its prompt plus new_token_ratio x its
# max_new_tokens for it and for each running request (PrefillAdder); the ratio starts at
# init_new_token_ratio 0.7 (sgl-project/sglang python/sglang/global_config.py,
# SGLANG_INIT_NEW_TOKEN_RATIO, times --schedule-conservativeness 1.0) and is raised after a retraction
SGLANG_INIT_NEW_TOKEN_RATIO: Final = 0.7


def admitted_at_once(w: Workload, s: ServingCapacity, cap: int) -> int:
    """Of `w.batch_size` requests sent at once, how many a preallocating engine prefills before the
    first finishes: vLLM allocates KV blocks as tokens arrive (its scheduler admits a request when its
    prompt's blocks are free, vllm/v1/core/sched/scheduler.py allocate_slots) and preempts one when a
    decode step finds none; SGLang reserves prompt + 0.7 x the output. Both run fewer to the end
    (s.max_sequences of the full length): the rest are preempted or retracted, then run again."""
    if w.engine == "sglang":
        need = w.input_len + SGLANG_INIT_NEW_TOKEN_RATIO * max(w.output_len, 1)
    else:
        need = math.ceil(max(w.input_len, 1) / runtime.VLLM_BLOCK_TOKENS) * runtime.VLLM_BLOCK_TOKENS
    return max(1, min(w.batch_size, cap, int(s.max_tokens // max(need, 1.0))))


@dataclass(frozen=True)
class QueuedJob:
    """`requests` sent at once to an engine that runs `held` of them at a time (running_batch)."""

    requests: int  # the workload's batch_size, sent at once (per replica)
    held: int
    waves: int  # batches of `held` run one after another, the last one the remainder
    output_tokens_per_s: float  # over the whole job, all replicas together
    median_ttft_s: float  # the median request's time to its first token
    running: InferenceTime  # the estimate of one full wave
    median_itl_s: float  # the median gap between a running request's tokens
    batch_s: float  # every wave, one after another: the first request sent to the last token
    why: str = ""  # what holds it to `held` and what the rest do (queued_serving), for the note


def queued_serving(model: ModelSpec, w: Workload, gpu: GPU, mem: MemoryEstimate) -> QueuedJob | None:
    """The queued job of `w` (its `batch_size` requests sent at once, no `request_rate`) on a
    preallocating engine whose KV cache holds fewer of them at once (running_batch), or None when
    it holds them all, requests arrive at a rate (the open loop is estimate_inference_time's own) or
    the job is `tokens` (a stream of requests the engine's own queue refills a slot from at the next
    step, so `held` keep running: timed at that batch). The one path validation
    (planner/validation_perf.py), `estimate` and `plan` take to it."""
    if w.tokens is not None or mem.serving is None:
        return None
    burst = w.num_prompts is not None and "batch_size" not in w.model_fields_set
    if w.request_rate is not None and not burst:
        return None
    sent = w.with_(batch_size=w.num_prompts, request_rate=None, num_prompts=None) if burst else w
    held, limit, refused = _running(sent, mem)
    if held >= sent.batch_size:
        return None
    admitted = admitted_at_once(sent, mem.serving, engine_cap(sent, gpu))
    wait = (
        f"{limit} refuses them (HTTP 429) until one finishes, and a client retries"
        if refused
        else f"{limit} holds {held}"
    )
    job = replace(queued_job(model, sent, gpu, held, admitted), why=wait)
    return _arriving(model, w, gpu, job, admitted) if burst else job


def _arriving(model: ModelSpec, w: Workload, gpu: GPU, job: QueuedJob, admitted: int) -> QueuedJob | None:
    """A finite run (num_prompts at request_rate) as a queued job, or None where its arrivals do not
    outrun what the pool's `held` serve (rate x the latency of `held` in flight below `held`,
    Little's law: the steady state's open loop, estimate_inference_time's own, never fills the pool).
    Past it the prompts queue for slots like a batch sent at once, with two differences: a prompt
    the engine admits at once is prefilled as it arrives (estimate_inference_time's finite run, at
    most `admitted` in flight), not with the whole batch; one that waits for the waves before its
    own has its wait counted from its arrival (middle / rate), at least that; and the run lasts at
    least the arrival window and the last prompt's own latency."""
    replicas, n = job.running.replicas, job.requests
    rate = (w.request_rate or 0.0) / replicas
    if rate * _engine_latency(job.running, w) < job.held:
        return None
    middle = (n - 1) // 2
    arrival = estimate_inference_time(model, w, gpu, max_batch=admitted)
    ttft = arrival.ttft_s if middle < admitted else max(job.median_ttft_s - middle / rate, arrival.ttft_s)
    batch_s = max(job.batch_s, (n - 1) / rate + _engine_latency(job.running, w))
    out = n * max(w.output_len, 1) * replicas / batch_s
    return replace(job, median_ttft_s=ttft, batch_s=batch_s, output_tokens_per_s=out)


def queued_note(job: QueuedJob) -> str:
    """The answer first for a queued job: how many of the requests run at once, and what the wait
    makes of the whole batch (the figures of `queued_time`)."""
    n, held = job.requests, job.held
    return (
        f"{held} of the {n} requests run at once and the other {n - held} wait ({job.why}): the {n} take "
        f"{job.batch_s:,.1f} s in {job.waves} waves, {job.output_tokens_per_s:,.0f} output tokens/s "
        f"over the whole batch, the median request's first token after {job.median_ttft_s:,.2f} s"
    )


def queued_time(job: QueuedJob) -> InferenceTime:
    """A full wave's estimate with the whole job's headline figures in its place: output tokens/s
    over the whole batch, the median request's time to first token (`ttft_single_s`: the one a user
    waits) and its median gap between tokens (`tpot_s`); the wave's own prefill, request latency,
    operators and batch (`held`) stay."""
    return replace(
        job.running,
        output_tokens_per_s=job.output_tokens_per_s,
        ttft_single_s=job.median_ttft_s,
        tpot_s=job.median_itl_s,
    )


def queued_job(model: ModelSpec, w: Workload, gpu: GPU, held: int, admitted: int) -> QueuedJob:
    """`w.batch_size` requests sent at once, `held` of the full length fitting the KV pool: they run
    in waves, each the static batch of `held` (its prefill, then its decode steps), so the job takes
    full x latency(held) + latency(remainder). The median request (the middle one in arrival order:
    both engines serve the waiting queue first come, first served) has its first token with the
    first prefill when it is among the `admitted` (admitted_at_once; a request preempted later has
    streamed its first token already), else after the waves before its own. Equal lengths finish a
    wave together; real ones stagger it, which this mean-length view leaves out."""
    n = w.batch_size
    held = max(1, min(held, n))
    run = estimate_inference_time(model, w.with_(batch_size=held), gpu, max_batch=held)
    full, rest = divmod(n, held)
    total = full * _engine_latency(run, w)
    if rest:
        total += _engine_latency(estimate_inference_time(model, w.with_(batch_size=rest), gpu, max_batch=rest), w)
    middle = (n - 1) // 2  # the median request, 0-based, in arrival order
    if middle < admitted:
        first = min(admitted, n)  # the prompts prefilled together before the first decode step
        ttft = run.ttft_s if first == held else estimate_inference_time(model, w.with_(batch_size=first), gpu).ttft_s
    else:
        ttft = (middle // held) * _engine_latency(run, w) + run.ttft_s
    rate = n * max(w.output_len, 1) * run.replicas / total if total > 0 else 0.0
    itl = run.tpot_s + _chunk_in_step(model, w, gpu, held)
    return QueuedJob(n, held, full + (1 if rest else 0), rate, ttft, run, itl, total)


def _engine_latency(it: InferenceTime, w: Workload) -> float:
    """How long a request holds its engine slot: its latency less the engine's host time on the way to
    its first token (engines.REQUEST_HOST_S), which no step waits for."""
    return it.request_latency_s - engines.REQUEST_HOST_S.get(w.engine, 0.0)


def _chunk_in_step(model: ModelSpec, w: Workload, gpu: GPU, held: int) -> float:
    """What a waiting prompt's prefill chunk adds to the median decode step of a queued job. vLLM V1
    schedules the running requests' decode tokens first and fills the step's token budget
    (max_num_batched_tokens, runtime.VLLM_PROFILE_TOKENS) with a waiting prompt's chunk whenever KV
    blocks free (vllm/v1/core/sched/scheduler.py schedule), so once the queue runs each finished
    request's successor is prefilled ceil(input / budget) steps, inside the decode steps of the
    `held` others: held / output requests finish a step, so that share of the steps carries a chunk,
    and past half of them the median gap does. SGLang runs a prefill batch and a decode batch apart
    (its mixed chunk is off by default), so the median gap stays a decode step."""
    if w.engine != "vllm":
        return 0.0
    budget = runtime.VLLM_PROFILE_TOKENS
    chunks = math.ceil(max(w.input_len, 1) / budget)
    if chunks * held / max(w.output_len, 1) <= 0.5:
        return 0.0
    one = estimate_inference_time(model, w.with_(batch_size=1), gpu, max_batch=1).ttft_s
    return one * min(budget, w.input_len) / max(w.input_len, 1)  # one chunk's share of the prompt's prefill


def _tgi_running(b: int, s: ServingCapacity | None) -> tuple[int, str, bool]:
    """TGI's running batch: min(the sequences its KV cache holds, --max-concurrent-requests).
    Past the cap TGI refuses a request (HTTP 429, "Model is overloaded"; launcher reference:
    "Having a low limit will refuse clients requests instead of having them wait"), so a client
    retries it: `b` sequences still run that many at a time."""
    cap = engines.TGI_MAX_CONCURRENT_REQUESTS
    kv = s.max_sequences if s is not None and s.max_sequences >= 1 else b
    held = min(b, kv, cap)
    if held >= b:
        return b, "", False
    if kv <= cap:
        return held, "TGI's KV cache", False
    return held, f"TGI's --max-concurrent-requests {cap}", True


def usd_per_million(price: Price | None, n: int, tokens_per_s: float) -> float | None:
    if price is None or not price.usd_per_hour or tokens_per_s <= 0:
        return None
    return price.usd_per_hour * n / (tokens_per_s * 3600.0) * 1e6


def _targets(w: Workload) -> str:
    parts = [
        f"max_tpot_ms={w.max_tpot_ms:g}" if w.max_tpot_ms else "",
        f"max_ttft_ms={w.max_ttft_ms:g}" if w.max_ttft_ms else "",
    ]
    return ", ".join(p for p in parts if p)


NO_TARGET: Final = "the workload's batch_size (no latency target: set max_tpot_ms or max_ttft_ms)"


def serving_batch(
    model: ModelSpec, w: Workload, gpu: GPU, n: int, price: Price | None, own: InferenceTime | None = None
) -> ServingBatch:
    """The largest batch of `w` (a fitted layout on `n` GPUs of `gpu`) that fits and meets the
    workload's latency targets, with its tokens/s and $/Mtok; without a target, the workload's own
    batch (`own`: its estimate, when the caller has it)."""
    if w.max_tpot_ms is None and w.max_ttft_ms is None:
        fresh = own is None
        it = estimate_inference_time(model, w, gpu, max_batch=w.batch_size) if own is None else own
        return _result(it, NO_TARGET, price, n, int(fresh))
    cache: dict[int, tuple[str, InferenceTime | None]] = {}
    cap = engine_cap(w, gpu)

    def check(b: int) -> tuple[str, InferenceTime | None]:
        """'' when batch b runs within the targets, else what stops it."""
        if b not in cache:
            cache[b] = _check(model, w, gpu, b, cap)
        return cache[b]

    best, stop = _largest(check, w.batch_size, cap)
    if best is None:
        what = stop if stop.startswith("max_") else f"{_targets(w)}: {stop}"
        return ServingBatch(None, None, None, None, None, f"no batch meets {what}", len(cache))
    return _result(check(best)[1], stop, price, n, len(cache))


def _largest(check: Callable[[int], tuple[str, InferenceTime | None]], start: int, cap: int) -> tuple[int | None, str]:
    """The largest b with check(b) == '' (and what stops b + 1): double from `start` while it holds,
    then bisect between the last batch that holds and the first that does not."""
    start = min(start, cap)
    if check(start)[0]:
        lo, hi = 1, start
        if check(1)[0]:
            return None, check(1)[0]
    else:
        lo, hi = start, min(start * 2, cap)
        while not check(hi)[0]:
            if hi >= cap:
                return hi, check(hi + 1)[0]
            lo, hi = hi, min(hi * 2, cap)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if not check(mid)[0] else (lo, mid)
    return lo, check(hi)[0]


def _check(model: ModelSpec, w: Workload, gpu: GPU, b: int, cap: int) -> tuple[str, InferenceTime | None]:
    if b > cap:
        return f"the engine's cap ({w.engine} schedules at most {cap} sequences a step)", None
    try:
        cand = w.with_(batch_size=b)
        mem = estimate_memory(model, cand, gpu)
        if not mem.fits:
            return f"memory (batch {b} needs {mem.per_gpu_bytes / 2**30:,.1f} GiB per GPU)", None
        held = mem.serving.max_sequences if mem.serving else b
        if (w.engine in PREALLOCATING_ENGINES or w.engine == "tgi") and mem.serving is not None and held < b:
            return f"memory ({w.engine}'s KV cache holds {held} sequences)", None
        it = estimate_inference_time(model, cand, gpu, max_batch=b)
    except GpuplanError as exc:
        return str(exc).rstrip("."), None
    misses = target_misses(cand, it)
    return (misses[0] if misses else ""), it


def target_misses(w: Workload, it: InferenceTime) -> list[str]:
    """The workload's latency targets (`max_tpot_ms`, `max_ttft_ms`) that this batch misses, each
    with the figure that misses it; [] when none is set or all are met."""
    out = []
    if w.max_tpot_ms is not None and it.tpot_s * 1e3 > w.max_tpot_ms:
        out.append(f"max_tpot_ms={w.max_tpot_ms:g} (batch {w.batch_size} takes {it.tpot_s * 1e3:,.2f} ms/token)")
    if w.max_ttft_ms is not None and it.ttft_single_s * 1e3 > w.max_ttft_ms:
        out.append(f"max_ttft_ms={w.max_ttft_ms:g} (a request's first token takes {it.ttft_single_s * 1e3:,.0f} ms)")
    return out


def _result(it: InferenceTime | None, why: str, price: Price | None, n: int, evaluated: int) -> ServingBatch:
    if it is None:
        return ServingBatch(None, None, None, None, None, why, evaluated)
    rate = it.output_tokens_per_s
    return ServingBatch(
        it.batch * it.replicas, rate, usd_per_million(price, n, rate), it.tpot_s, it.ttft_single_s, why, evaluated
    )
