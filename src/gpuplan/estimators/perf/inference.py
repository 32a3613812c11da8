"""Inference: prefill and decode steps, serving throughput within the KV cache."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Final

from gpuplan.estimators import comm, engines, runtime
from gpuplan.estimators import efficiency as eff
from gpuplan.estimators.activations import stack_shapes
from gpuplan.estimators.perf.cnn import cnn_inference, one_pass
from gpuplan.estimators.perf.offload import offload_step
from gpuplan.estimators.perf.ops import (
    ENGINE_MAX_BATCH,
    PP_INFLIGHT_ENGINES,
    Ctx,
    InferenceTime,
    Op,
    bound_of,
    is_eager,
    make_ctx,
    total_time,
)
from gpuplan.estimators.perf.step_ops import attention_step_ops, bnb_kernel, linear_step_ops
from gpuplan.estimators.perf.training import check_layout, kernels_per_layer
from gpuplan.specs.gpu import GPU
from gpuplan.specs.model import ModelSpec
from gpuplan.specs.workload import Workload

# Inference
# ---------------------------------------------------------------------------------------------

# The continuous-batching servers whose schedulers take the prompts waiting at a step into its
# prefill (vLLM Scheduler.schedule, SGLang get_next_batch_to_run, TGI's router and TensorRT-LLM's
# in-flight batching, each up to a token budget per step): a finite open-loop run's prompts (the
# workload's num_prompts) are prefilled as they arrive. specs/workload_keys.py names the same engines.
BURST_ENGINES: Final = frozenset({"vllm", "sglang", "tgi", "tensorrt-llm"})


def _encoder_inference(c: Ctx) -> InferenceTime:
    """An encoder (BERT, ViT) reads its input in one forward pass; throughput counts input tokens."""
    w = c.w
    seq = max(w.input_len, 1) if c.model.kind == "encoder" else (c.model.max_position_embeddings or w.seq_len)
    ops = _inference_step(c, w.batch_size, seq, 0.0, "prefill")
    return one_pass(c, ops, w.batch_size * seq, "encoder: one forward pass; throughput counts input tokens per second")


def _prefill_ops(c: Ctx, batch: float) -> list[Op]:
    """A prompt's prefill for `batch` sequences. With a cached prefix (cached_prefix_tokens) the
    engine computes only the tokens after what it reuses (engines.prefix_reused_tokens: vLLM's whole
    16-token blocks, at least the last token), attending over the cached keys as well."""
    w = c.w
    reused = engines.prefix_reused_tokens(w) if c.model.kind == "decoder" else 0
    return _inference_step(c, batch, max(w.input_len - reused, 1), float(reused), "prefill")


def _stage_layers(c: Ctx) -> float:
    """Transformer layers on one pipeline stage (every stack's), once per context."""
    hit: float | None = c.memo.get("stage_layers")  # the memo read first: once() takes a closure a call
    return (
        hit
        if hit is not None
        else c.once("stage_layers", lambda: sum(s.layers for s in stack_shapes(c.model)) / c.w.pp)
    )


def _comm_step_ops(c: Ctx, tokens: float, ep: int, etp: int, dp: int) -> list[Op]:
    """The step's collectives: tensor-parallel all-reduces, and the expert-parallel all-to-alls
    across attention data-parallel replicas."""
    model, w = c.model, c.w
    tp, pp = w.tp, w.pp
    ops: list[Op] = []
    if tp <= 1 and not (ep > 1 and dp > 1):
        return ops  # one GPU per replica and no all-to-all: none
    # collectives: 2 all-reduces per layer under TP (Megatron), of tokens x d activations. Expert
    # parallelism inside one replica (dp = 1) keeps that: every GPU already holds all the tokens,
    # runs its own experts on them and the MoE output is all-reduced like a TP MLP's. Across
    # attention data-parallel replicas (dp > 1) a MoE layer dispatches tokens to the GPUs holding
    # their experts and combines the results back instead of its all-reduce.
    layers_total = _stage_layers(c)
    a2a = ep > 1 and dp > 1
    moe_layers = model.moe_layers / pp if a2a else 0.0
    if tp > 1:
        t_ar, nbytes = comm.allreduce_time(c.gpu, tp, tokens * model.hidden_size * c.act_b)
        n_ar = 2 * layers_total - (moe_layers if a2a else 0.0)
        ops.append(Op("tensor-parallel all-reduce", "communication", 0.0, nbytes * n_ar, t_ar * n_ar, "communication"))
    if a2a:
        # two all-to-alls per MoE layer over the stage's tp x dp GPUs, each GPU sending its 1/tp
        # share of its replica's tokens once to every expert group one of the token's top-k
        # experts sits in (ep x (1 - (1 - 1/ep)^k) groups under uniform routing; DeepEP's and
        # TensorRT-LLM's dispatch send a token once per rank), to all etp GPUs of the group. Where
        # the experts run in fp8/fp4 the dispatch is quantised to 1 byte a value and the combine
        # stays 16-bit (DeepEP README: "FP8 dispatching and BF16 combining").
        k_routed = max(model.experts_per_token, 1)
        groups_hit = ep * (1.0 - (1.0 - 1.0 / ep) ** k_routed)
        values = tokens / tp * groups_hit * etp * model.hidden_size
        dispatch_b = 1.0 if c.runs_as in ("fp8", "fp4") else c.act_b
        t_a2a = comm.all_to_all_time(c.gpu, tp * dp, values * dispatch_b) + comm.all_to_all_time(
            c.gpu, tp * dp, values * c.act_b
        )
        ops.append(
            Op(
                "expert-parallel dispatch + combine (all-to-all)",
                "communication",
                0.0,
                values * (dispatch_b + c.act_b) * moe_layers,
                t_a2a * moe_layers,
                "communication",
            )
        )
    return ops


def _inference_step(c: Ctx, batch: float, new_tokens: float, ctx_len: float, phase: str) -> list[Op]:
    """One engine step: `batch` sequences each adding `new_tokens` tokens at context `ctx_len`
    (prefill: new_tokens = the prompt's computed tokens after ctx_len cached ones; decode: new_tokens = 1
    at ctx_len)."""
    model, w = c.model, c.w
    pp = w.pp
    statics = c.memo.get("step")  # the memo read first: once() takes a closure a call
    if statics is None:
        statics = c.once("step", lambda: _step_statics(c))
    bnb, (ep, etp, dp), kernels, graph_max, eager, off = statics
    if pp > 1 and w.engine in PP_INFLIGHT_ENGINES:
        # one micro-batch per stage in flight: each stage works on batch / pp sequences at a time
        # (a sequence is not split: fewer sequences than stages leave stages idle)
        micro = max(batch / pp, min(batch, 1.0))
        passes, batch = batch / micro, micro
    else:
        passes = 1.0  # one batch through the stages in turn (llama.cpp's layer split), or no pipeline
    tokens = batch * new_tokens
    ops, calls, qcalls = linear_step_ops(c, batch, tokens, phase, ep, etp, dp, passes)
    ops += attention_step_ops(c, batch, tokens, new_tokens, ctx_len, phase)
    ops += _comm_step_ops(c, tokens, ep, etp, dp)
    if pp > 1:
        # every stage runs its layers pp times a step: for the serving engines once per micro-batch
        # of batch / pp (all stages busy), for the llama.cpp layer split on the whole batch while
        # the other stages wait; plus the hops between stages
        ops = [Op(o.name, o.phase, o.flops * pp, o.bytes * pp, o.time_s * pp, o.bound) for o in ops]
        t_p2p = comm.p2p_time(c.gpu, tokens * model.hidden_size * c.act_b)
        ops.append(Op("pipeline send/recv", "communication", 0.0, 0.0, t_p2p * (pp - 1), "communication"))
    # transformers' generate compiles the decode step with a static cache (generation/utils.py
    # _valid_auto_compile_criteria: a compileable cache on CUDA), the prefill stays eager
    static_decode = w.engine == "transformers" and w.cache_implementation == "static" and phase == "decode"
    if graph_max is not None and phase == "decode" and batch > graph_max:
        # TGI captures CUDA graphs for decode batches up to 32 only, SGLang up to 160: above, the
        # fused layers are issued from Python one kernel at a time, hidden behind the GPU's work while
        # that is longer, and never cheaper than the graph's per-kernel gaps
        issue = max(kernels * eff.LAUNCH_EAGER_S - total_time(ops), kernels * eff.LAUNCH_GRAPH_S)
        ops.append(Op(f"kernel launches (no CUDA graph above batch {graph_max})", "launch", 0.0, 0.0, issue, "launch"))
    elif not eager or static_decode:
        ops.append(Op("kernel launches (graph)", "launch", 0.0, 0.0, kernels * eff.LAUNCH_GRAPH_S, "launch"))
    else:
        if w.engine == "autoawq":
            # AutoAWQ's fused blocks hold no host sync: the CPU issues ahead of the GPU and a step
            # is the longer of the two (its benchmark syncs once per step, estimators/engines.py)
            issue = kernels * engines.AUTOAWQ_OPS_PER_KERNEL * eff.LAUNCH_EAGER_S
            extra = max(issue - total_time(ops), 0.0)
        else:
            extra = _eager_overhead(ops, kernels, calls * pp)
        if extra > 0:
            ops.append(Op("kernel launches (CPU-bound eager)", "launch", 0.0, 0.0, extra, "launch"))
    if bnb:
        per_call = {
            "int8": eff.BNB_INT8_CALL_S,
            "4bit": eff.BNB_4BIT_CALL_S,
            "4bit-dq": eff.BNB_4BIT_CALL_S + eff.BNB_4BIT_DQ_CALL_S,
        }[bnb]
        ops.append(Op(f"bitsandbytes {bnb} calls (host)", "launch", 0.0, 0.0, per_call * qcalls * pp, "launch"))
    if off is not None:  # llama.cpp -ngl: the host's layers on the CPU (perf/offload.py)
        ops = offload_step(c, ops, phase, tokens, off)
    return ops


def _step_statics(
    c: Ctx,
) -> tuple[str | None, tuple[int, int, int], float, int | None, bool, engines.Offload | None]:
    """What every step of a context reads alike: (bitsandbytes' kernel, (ep, etp, dp), kernels a
    step launches, the engine's largest CUDA-graph batch, eager?, llama.cpp's partial offload)."""
    model, w = c.model, c.w
    # kernel launches: a per-kernel cost on the GPU under graphs; eager PyTorch is CPU-bound
    kernels = kernels_per_layer(model) * _stage_layers(c) * w.pp + 4
    graph_max = engines.graph_max_batch(w.engine, c.gpu.memory_bytes, w.tp)
    off = engines.offload_of(model, w, c.gpu)
    return bnb_kernel(c), _serving_layout(model, w), kernels, graph_max, is_eager(w, model), off


def _serving_layout(model: ModelSpec, w: Workload) -> tuple[int, int, int]:
    """(ep, etp, dp) of a serving layout: dp = num_gpus / (tp x pp) replicas each run attention
    and the dense layers on their own sequences; with ep > 1 a MoE model's experts are spread over
    a stage's tp x dp GPUs instead, ep groups of them each split over etp = tp x dp / ep GPUs
    (attention data parallelism + expert parallelism: vLLM --data-parallel-size with
    --enable-expert-parallel, SGLang --enable-dp-attention, TensorRT-LLM enable_attention_dp)."""
    dp = w.dp
    if w.ep <= 1 or not model.is_moe:
        return 1, w.tp, dp
    return w.ep, max(w.tp * dp // w.ep, 1), dp


def _eager_overhead(ops: list[Op], kernels: float, calls: float) -> float:
    """Time eager PyTorch adds to a step's GPU time: each op takes max(CPU issue, GPU run). A weight
    GEMM runs longer than its issue, so the CPU queues ahead while it runs; the other ~2/3 of the
    ops (norm pieces, rotary, views, cache updates, casts) finish on the GPU in microseconds, so
    across them the GPU waits on the CPU. generate syncs the host every token (its stopping check),
    so the CPU never gets a whole step ahead: the step is about GEMMs + max(other ops' CPU, GPU).
    (LitGPT falcon-7b bf16 on an A100 40GB: 47.66 tok/s = 21 ms against ~11 ms of weight reads.)"""
    linear = [o for o in ops if o.name.startswith("linear ")]
    gpu_linear = sum(o.time_s for o in linear)
    gpu_other = sum(o.time_s for o in ops) - gpu_linear
    n_ops = kernels * eff.EAGER_OPS_PER_KERNEL
    cpu_other = max(n_ops - calls, 0.0) * eff.LAUNCH_EAGER_S
    step = max(gpu_linear, calls * eff.LAUNCH_EAGER_S) + max(cpu_other, gpu_other)
    return step - (gpu_linear + gpu_other)


def _steady_state(c: Ctx, rate: float, most: int) -> tuple[int, float | None, float, float, float]:
    """(requests in flight, their latency or None past what `most` serve, one prompt's prefill, q,
    requests/s `most` serve) at `rate` arrivals per second (per replica), as Little's law keeps them:
    k = rate x L(k). A request's latency L(k) is one prompt's prefill and its decode steps at k in
    flight, both stretched by the share of the engine's time that arriving prompts' prefills take
    (rho = rate x q: continuous batching interleaves them). q, the engine time one prompt's prefill
    costs, is the batched prefill's share, ttft(most) / most, at most one prompt's own prefill:
    vLLM and SGLang prefill the waiting prompts together (max_num_batched_tokens). Past what `most` in flight
    serve, the arrivals outrun the engine: it runs `most`.

    What `most` serve does not depend on the offered rate: the largest rate with
    rate x L(most) <= most, L(most) = (prefill + (out - 1) x step(most)) / (1 - rate x q),
    solves to served = most / (prefill + (out - 1) x step(most) + most x q), the same Little's-law
    balance in closed form: about `most` over the request latency of a batch of `most`."""
    out = max(c.w.output_len, 1)
    one_prefill = total_time(_prefill_ops(c, 1))
    most = max(most, 1)
    ttft_most, step_most, *_ = _static(c, most)
    q = min(one_prefill, ttft_most / most)
    rho = rate * q
    served = most / (one_prefill + (out - 1) * step_most + most * q)

    def latency(k: int) -> float:
        return (one_prefill + (out - 1) * _static(c, k)[1]) / (1.0 - rho)

    if rate > served:
        return most, None, one_prefill, q, served
    # then rho < 1 and rate x L(most) <= most: the least k with k >= rate x L(k), L growing with k,
    # so the first crossing (bisection)
    lo, hi = 1, most
    while lo < hi:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if rate * latency(mid) <= mid else (mid + 1, hi)
    return lo, latency(lo), one_prefill, q, served


def _concurrency_at_rate(c: Ctx, rate: float, most: int) -> tuple[int, float | None]:
    """(requests in flight, time to first token) at `rate` arrivals per second (per replica) in
    steady state (_steady_state). Where the engine keeps up, an arriving prompt is prefilled on its
    own as it comes (continuous batching schedules waiting prompts at the next step: vLLM's
    Scheduler.schedule, SGLang's get_next_batch_to_run), not with the k in flight: its time to first
    token is one prompt's prefill, stretched like the rest of its latency, prefill / (1 - rho), after
    the wait for the decode step under way to end (half a step on average: the caller adds it). Past
    what the engine serves the queue sets it, and None leaves the batch's own prefill."""
    k, lat, one_prefill, q, served = _steady_state(c, rate, most)
    if lat is not None:
        c.notes.append(
            f"request_rate {c.w.request_rate:g}/s: {rate * lat:.1f} requests in flight per replica (Little's "
            f"law), each {lat:.2f} s; the estimate runs batch {k}, each prompt prefilled on arrival"
        )
        return k, one_prefill / (1.0 - rate * q)
    c.notes.append(
        f"request_rate {c.w.request_rate:g}/s is more than it serves (about {served:.2f} requests/s per replica at "
        f"batch {k}): the queue grows without bound; the estimate runs batch {k}"
    )
    return k, None


@dataclass(frozen=True)
class _Burst:
    """A finite open-loop run (the workload's num_prompts), per replica: its prompts, their arrival
    rate, one prompt's share of a batched prefill (q) and, where the prompts arrive faster than the
    engine prefills them, the median prompt's time to first token in that queue."""

    prompts: int
    rate: float
    q: float
    queue_ttft: float | None
    one_prefill: float


def _burst_at_rate(c: Ctx, rate: float, prompts: int, most: int) -> tuple[int, float, _Burst]:
    """(requests in flight, time to first token before the step wait, the run) of `prompts` sent at
    `rate` per second (per replica; vLLM benchmark_serving / SGLang bench_serving --num-prompts with
    --request-rate). In flight: the steady state's Little's-law k, at most the prompts sent (where their
    arrival window is short against a request's latency all of them overlap) and `most` (the KV cache's,
    the engine's or --max-concurrency's cap).

    Each prompt is prefilled as it arrives. Where the prefill work arrives faster than the engine
    prefills (rho = rate x q > 1) the prompts queue. A deterministic transient-queue bound: prompt i
    (i = 0..N-1) arrives at i / rate, at the mean spacing, and costs the engine q of prefill; with
    rho > 1 the engine never catches up inside the window, so from the first arrival it prefills back
    to back and prompt i's prefill ends at (i + 1) x q: its time to first token is (i + 1) x q - i / rate,
    rising with i, so the median prompt's (i = k = N / 2) is (k + 1) x q - k / rate, at least one
    prompt's own prefill (Poisson gaps only add waiting: a lower bound). Where the engine keeps up it is
    the steady state's prefill / (1 - rho), at most one prompt's prefill after the k prompts ahead of the
    median one (a finite run queues no more)."""
    k_ss, lat, one_prefill, q, _ = _steady_state(c, rate, most)
    batch = min(prompts, k_ss)  # k_ss is `most` where the arrivals outrun what `most` serve
    rho = rate * q
    k = prompts // 2
    queue: float | None = None
    if rho >= 1.0:
        ttft = one_prefill
        queue = max((k + 1) * q - k / rate, one_prefill)
        how = f"they arrive faster than it prefills them (rho {rho:.2f}): the median one waits for the {k} ahead"
    else:
        ttft = min(one_prefill / (1.0 - rho), one_prefill + k * q)
        how = "each prefilled on arrival"
    window = (prompts - 1) / rate
    ends = f"a request takes {lat:.1f} s" if lat is not None else f"the engine serves fewer than {rate:g}/s at {batch}"
    c.notes.append(
        f"num_prompts {c.w.num_prompts} at request_rate {c.w.request_rate:g}/s: arrivals over {window:.1f} s per "
        f"replica, {ends}; {batch} in flight per replica, {how}"
    )
    if batch < prompts and batch == most and lat is None:
        c.notes.append(
            f"{prompts} prompts per replica, at most {most} in flight: the rest wait for a slot, a wait the time "
            "to first token leaves out"
        )
    return batch, ttft, _Burst(prompts, rate, q, queue, one_prefill)


def _burst_gap(c: Ctx, run: _Burst, tpot: float) -> float:
    """The median gap between a request's tokens in a finite run whose prompts queue for prefill
    (rho > 1). vLLM V1 schedules the running requests' decode tokens first and fills the step's
    token budget (max_num_batched_tokens, runtime.VLLM_PROFILE_TOKENS) with a waiting prompt's chunk
    (vllm/v1/core/sched/scheduler.py schedule), so while prompts wait every decode step carries a
    chunk: the median prompt (k = N / 2) decodes beside the queue for the (N - k - 1) x q it has left,
    and where those steps are more than half of its output's the median gap carries one. SGLang runs
    prefill and decode batches apart (its mixed chunk is off by default): a decode step
    (planner/serving._chunk_in_step, the same reading for a batch its KV cache queues)."""
    w = c.w
    if w.engine != "vllm" or run.queue_ttft is None:
        return tpot
    budget = runtime.VLLM_PROFILE_TOKENS
    chunk = run.one_prefill * min(budget, w.input_len) / max(w.input_len, 1)  # one chunk's share of the prefill
    k = run.prompts // 2
    beside = (run.prompts - k - 1) * run.q / (tpot + chunk)
    return tpot + chunk if beside > (max(w.output_len, 1) - 1) / 2 else tpot


def _burst_delivered(c: Ctx, run: _Burst, batch: int, ttft: float, tpot: float, tput: float) -> float:
    """Output tokens/s of a finite run per replica, as the benchmark reports it: all output tokens over
    the run's duration, from the first arrival to the last completion. The last prompt arrives after
    N - 1 gaps of 1 / rate (the first is sent at once), is prefilled no sooner than the N prefills queued
    from the first arrival end (N x q), then decodes its output. Where fewer than N run at once the run
    lasts at least N requests at the throughput `batch` in flight serve (`tput`), which a long window's
    run reduces to: N x out / duration -> min(rate x out, tput), the steady state's."""
    n, out = run.prompts, max(c.w.output_len, 1)
    last_first = max((n - 1) / run.rate + ttft, n * run.q)
    duration = last_first + (out - 1) * tpot
    if batch < n:
        duration = max(duration, n * out / tput)
    return n * out / duration


def _static(c: Ctx, batch: int) -> tuple[float, float, list[Op], list[Op]]:
    """(prefill time, mean decode step) for a static batch of `batch` sequences."""
    w = c.w
    pre = _prefill_ops(c, batch)
    mid = w.input_len + (w.output_len + 1) / 2.0
    dec = _inference_step(c, batch, 1.0, mid, "decode")
    return total_time(pre), total_time(dec), pre, dec


def _throughput(c: Ctx, batch: int) -> tuple[float, float, float, list[Op], list[Op]]:
    """(output tokens/s, prefill, decode step, ops) of `batch` requests kept in flight. With two or
    more, the engine is busy when a finished request's successor reaches it, and the successor waits
    out the step(s) its host loop has taken up (engines.closed_loop_gap_steps): each slot holds a
    request for its latency plus that many decode steps. A batch job (`tokens`) is fed from the
    engine's own waiting queue, which refills a slot at the next step: no gap."""
    ttft, tpot, pre, dec = _static(c, batch)
    out = max(c.w.output_len, 1)
    gap = engines.closed_loop_gap_steps(c.w.engine) if batch > 1 and c.w.tokens is None else 0
    latency = ttft + (out - 1 + gap) * tpot
    return batch * out / latency, ttft, tpot, pre, dec


def _prepared(
    model: ModelSpec, w: Workload, gpu: GPU, max_batch: int | None
) -> InferenceTime | tuple[Ctx, int, int, int, float | None, _Burst | None]:
    """The whole answer of a model that does not generate (CNN, encoder), else (context, batch that
    runs per replica, replicas, the engine's cap on a step's sequences, time to first token under a
    request rate or None, the finite run of num_prompts or None)."""
    if not w.nvlink:
        gpu = comm.without_nvlink(gpu)
    c = make_ctx(model, w, gpu)
    if model.kind == "cnn":
        return cnn_inference(c)
    b = w.batch_size
    if model.kind in ("encoder", "vision-transformer"):
        return _encoder_inference(c)
    check_layout(model, w)
    # data-parallel replicas (num_gpus / (tp x pp)) serve `batch_size` sequences each, in step
    _, _, replicas = _serving_layout(model, w)
    # the engine's default cap on the sequences one step schedules: vLLM's max_num_seqs by card
    cap = ENGINE_MAX_BATCH.get(w.engine) or (runtime.vllm_max_num_seqs(gpu) if w.engine == "vllm" else 1024)
    if engines.offload_of(model, w, c.gpu) is not None:
        cap = b  # host layers run on the CPU, whose arithmetic is not modelled: no larger batch is tried
    if w.engine == "autoawq":
        cap = b  # its fused cache is sized for one batch at load: no other batch runs (engines.py)
    rate_ttft: float | None = None
    run: _Burst | None = None
    if w.request_rate is not None:
        # an open-loop benchmark: batch_size, when given, is its --max-concurrency
        most = min(max_batch if max_batch is not None else cap, cap)
        most = most if "batch_size" not in w.model_fields_set else b
        if w.num_prompts is None:
            b, rate_ttft = _concurrency_at_rate(c, w.request_rate / replicas, most)
        else:  # a finite run: its prompts spread over the replicas like its arrivals
            b, rate_ttft, run = _burst_at_rate(c, w.request_rate / replicas, -(-w.num_prompts // replicas), most)
    return c, b, replicas, cap, rate_ttft, run


def _delivered(w: Workload, tput: float, replicas: int) -> tuple[float, float | None]:
    """(output tokens/s delivered, offered): in steady state an open loop delivers what arrives,
    rate x output_len, at most what its batch serves (the batch's figure, Little's-law k rounded
    up, is only the latency basis: QA F14); a closed batch delivers what it serves."""
    offered = w.request_rate * max(w.output_len, 1) if w.request_rate is not None else None
    return (tput * replicas if offered is None else min(offered, tput * replicas)), offered


def inference_rate(model: ModelSpec, w: Workload, gpu: GPU) -> float:
    """Output tokens/s of `w`'s own batch on `gpu`, all replicas: what
    `estimate_inference_time(model, w, gpu, max_batch=w.batch_size).output_tokens_per_s` gives,
    without the parts of the answer a rate does not read (one request's prefill, the operators);
    a plan compares its replica layouts by it."""
    prep = _prepared(model, w, gpu, w.batch_size)
    if isinstance(prep, InferenceTime):
        return prep.output_tokens_per_s
    c, b, replicas, _, rate_ttft, run = prep
    if run is not None and rate_ttft is not None:
        tput, _, tpot, *_ = _throughput(c, b)
        ttft = _arrival_ttft(w, run, rate_ttft, tpot)
        return _burst_delivered(c, run, b, ttft, tpot, tput) * replicas
    return _delivered(w, _throughput(c, b)[0], replicas)[0]


def _arrival_ttft(w: Workload, run: _Burst | None, rate_ttft: float, tpot: float) -> float:
    """Time to first token of a prompt prefilled on arrival: after half the step under way, on
    average, and the steps the engine's loop has already taken up when the prompt arrives (SGLang's
    overlap scheduler: one, engines.py); in a finite run at least its queue's (_burst_at_rate), and a
    run of one prompt finds the engine idle: no step to wait for."""
    if run is not None and run.prompts == 1:
        return rate_ttft
    ttft = rate_ttft + tpot * (0.5 + engines.ARRIVAL_EXTRA_STEPS.get(w.engine, 0))
    return ttft if run is None or run.queue_ttft is None else max(ttft, run.queue_ttft)


def estimate_inference_time(model: ModelSpec, w: Workload, gpu: GPU, max_batch: int | None = None) -> InferenceTime:
    """Prefill, decode and throughput of `w.batch_size` sequences; the best batch up to `max_batch`
    (the KV-cache capacity from the memory estimate) for continuous batching."""
    prep = _prepared(model, w, gpu, max_batch)
    if isinstance(prep, InferenceTime):
        return prep
    c, b, replicas, cap, rate_ttft, run = prep
    out = max(w.output_len, 1)
    tput, ttft, tpot, pre, dec = _throughput(c, b)
    if rate_ttft is not None:  # prompts prefilled on arrival, not as one batch (_concurrency_at_rate)
        ttft = _arrival_ttft(w, run, rate_ttft, tpot)
    limit = max(1, min(max_batch if max_batch is not None else b, cap))
    best_b, best_t = b, tput
    if limit > b:
        # a larger batch amortises the weight reads. Throughput over the batch is unimodal (weights
        # read once a step, KV and prefill growing with the batch), so walk down from the limit
        # through the powers of two and stop at the first that is no better: the same maximum as
        # trying every one (checked on 1,767 model x GPU x engine x length x format cases, where
        # it was the limit itself every time), in two steps instead of up to eleven
        cands = sorted({limit, *(2**i for i in range(int(math.log2(limit)) + 1) if 2**i > b)}, reverse=True)
        top_b, top_t = b, 0.0
        for cand in cands:
            t, *_ = _throughput(c, cand)
            if t <= top_t:
                break
            top_b, top_t = cand, t
        if top_t > best_t * 1.0001:
            best_b, best_t = top_b, top_t
    # a finite run's first token is its median prompt's (prefilled on arrival, _burst_at_rate)
    single = ttft if b == 1 or run is not None else total_time(_prefill_ops(c, 1))
    latency = ttft + (out - 1) * tpot
    if w.closed_loop and b > 1 and rate_ttft is None:
        # a closed loop (batch_size kept in flight, each finished request replaced): a request's first
        # token is the steady state's, not the batch's prefill (ttft_s stays that). The successor is sent
        # after the engine has taken up its next step(s) and waits them out (closed_loop_gap_steps, the
        # empty slot the throughput counts: vLLM one, SGLang two), then is prefilled in the next step
        # beside the others' decodes, a step as long as the longer of a decode step and its own prefill
        single = engines.closed_loop_gap_steps(w.engine) * tpot + max(tpot, single)
        latency = single + (out - 1) * tpot
    host = engines.REQUEST_HOST_S.get(w.engine, 0.0)  # outside the engine's steps: latency only
    if host:
        c.notes.append(f"{w.engine}'s host time per request, {host * 1e3:.0f} ms, is added to the first token")
    delivered, offered = _delivered(w, tput, replicas)
    if run is not None:  # a finite run (its rate_ttft always set): its output over its duration
        delivered = _burst_delivered(c, run, b, ttft, tpot, tput) * replicas
        tpot = _burst_gap(c, run, tpot)  # the median gap, after the duration counted the plain steps
    elif offered is not None and delivered < tput * replicas:
        c.notes.append(
            f"delivers the arrivals' {offered:,.0f} output tokens/s (request_rate {w.request_rate:g}/s x "
            f"{out:,} tokens); batch {b} would serve {tput * replicas:,.0f}"
        )
    return InferenceTime(
        ttft_s=ttft + host,
        ttft_single_s=single + host,
        tpot_s=tpot,
        output_tokens_per_s=delivered,
        request_latency_s=latency + host,
        batch=b,
        max_batch=limit,
        best_batch=best_b,
        best_output_tokens_per_s=best_t * replicas,
        prefill_tokens_per_s=replicas * b * max(w.input_len, 1) / ttft if ttft > 0 else 0.0,
        bottleneck=bound_of(dec),
        prefill_ops=tuple(pre),
        decode_ops=tuple(dec),
        notes=tuple(c.notes),
        replicas=replicas,
        offered_tokens_per_s=offered,
    )
