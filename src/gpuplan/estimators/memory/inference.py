"""Inference memory: weights by format, the KV cache, the prefill's working set, and a serving
engine's KV budget."""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable
from typing import Any, TypeVar

from gpuplan.estimators import engines, runtime
from gpuplan.estimators.activations import (
    prefill_working_bytes_per_token,
    stack_shapes,
)
from gpuplan.estimators.memory.base import (
    GGUF,
    MemoryEstimate,
    MemoryLine,
    ServingCapacity,
    act_bytes,
    check_parallel,
    finish,
    has_lm_head,
    inference_weights,
    kv_shards,
    tokens_per_sample,
    weight_bytes,
)
from gpuplan.specs.gpu import GPU
from gpuplan.specs.model import ModelSpec, family_of
from gpuplan.specs.precision import storage_format
from gpuplan.specs.request_lengths import tail_sequence_len
from gpuplan.specs.workload import Workload

_T = TypeVar("_T")

# --- inference --------------------------------------------------------------------------------

# Per-model terms the memory estimates ask for again and again (a plan makes ~730 of them, each
# reading the KV bytes three times), kept by model object as activations.stack_shapes keeps its
# shapes: ModelSpec is frozen, and the model is held and compared so that its id cannot be another's.
_PER_MODEL: dict[int, tuple[ModelSpec, dict[Hashable, Any]]] = {}
_UNSET: Any = object()


def _per_model(model: ModelSpec, key: Hashable, make: Callable[[], _T]) -> _T:
    """`make()`, computed the first time `key` is asked for on this model object and kept."""
    hit = _PER_MODEL.get(id(model))
    if hit is None or hit[0] is not model:
        if len(_PER_MODEL) > 64:
            _PER_MODEL.clear()
        hit = _PER_MODEL[id(model)] = (model, {})
    memo = hit[1]
    value: _T = memo.get(key, _UNSET)  # one read: another thread may clear the memo between two
    if value is _UNSET:
        value = make()
        if len(memo) > 4096:
            memo.clear()
        memo[key] = value
    return value


def _kv_cache_bytes(model: ModelSpec, context_len: int, kv_b: float, input_len: int) -> float:
    """model.kv_cache_bytes, once per model and arguments (their types in the key too: 2 and 2.0
    are one key, and need not be one result)."""
    key = ("kv", context_len, type(context_len), kv_b, type(kv_b), input_len, type(input_len))
    return _per_model(model, key, lambda: model.kv_cache_bytes(context_len, kv_b, input_len=input_len))


def _weights(model: ModelSpec, w: Workload, gpu: GPU | None) -> tuple[float, float, MemoryLine, engines.Offload | None]:
    """(weights on each GPU, weights in host memory, their memory line, the partial offload); once per
    model and layout and format where no layer is offloaded (not llama.cpp, Ollama: the GPU plays no
    part then, and the line is a frozen dataclass)."""
    if w.engine in engines.LAYER_SPLIT_ENGINES:
        return _weights_of(model, w, gpu)
    key = ("weights line", w.tp, w.pp, w.ep, w.dp, w.weight_dtype, w.effective_weight_dtype, w.task)
    return _per_model(model, key, lambda: _weights_of(model, w, gpu))


def _weights_of(
    model: ModelSpec, w: Workload, gpu: GPU | None
) -> tuple[float, float, MemoryLine, engines.Offload | None]:
    mp = w.tp * w.pp
    iw = inference_weights(model, w)
    fmt = iw.fmt
    other = 4.0 if fmt == "fp32" else 2.0
    weights = _per_model(
        model, ("weights", fmt, other, iw.kept), lambda: weight_bytes(list(model.groups), fmt, other, iw.kept)
    )
    weights /= mp
    ep_note = ""
    if w.ep > 1 and model.is_moe:
        # attention data parallelism + expert parallelism: the experts are spread over all
        # tp x dp GPUs of a stage, attention and the dense layers are whole in each replica
        spread = w.tp * w.dp
        experts = weight_bytes([g for g in model.groups if g.role == "expert"], fmt, other, iw.kept)
        weights -= experts / mp * (1.0 - w.tp / spread)
        ep_note = f"; experts over {spread} GPUs (ep={w.ep}), the rest over tp={w.tp}"
    off = engines.offload_of(model, w, gpu)
    host = 0.0
    if off is not None:  # llama.cpp -ngl: the output layer and gpu_layers - 1 layers on the GPU(s)
        block, output, untied = engines.split_weight_bytes(model, w)
        # the GPU layers spread over the pp cards (llama.cpp's -sm layer), the output layer on the
        # last, the card this counts; host memory holds the rest of the whole model once
        host = weights * mp - block * off.gpu_share - (untied if off.head_on_gpu else 0.0)
        weights = block * off.gpu_share / w.pp + (output if off.head_on_gpu else 0.0)
        ep_note = f"; {engines.host_link_note(off, w.gpu_layers is None)} ({host / 2**30:.2f} GiB)"
    bits = storage_format(fmt).bits_per_value
    kept_params = _per_model(
        model,
        ("kept", iw.kept),
        lambda: sum(g.total for g in model.groups if g.name in iw.kept and g.linear is not None),
    )
    line = MemoryLine(
        f"weights ({fmt})",
        weights,
        f"{_per_model(model, 'params', lambda: model.total_params) / 1e9:.3g}B params; "
        + ("all tensors" if fmt in GGUF else "block linears")
        + f" at {bits:.3g} bits"
        + ("" if fmt in GGUF or bits >= 16 else f", embeddings/head at {8 * other:g}")
        + (f", {kept_params / 1e9:.3g}B the checkpoint leaves unquantised at 16" if kept_params else "")
        + (" (the checkpoint's quantization_config)" if iw.from_checkpoint else "")
        + ep_note,
        "model",
    )
    return weights, host, line, off


def inference_memory(model: ModelSpec, w: Workload, gpu: GPU | None) -> MemoryEstimate:
    check_parallel(model, w)
    weights, host, line, off = _weights(model, w, gpu)
    lines_w = [line]
    kv_b = storage_format(w.effective_kv_dtype).bytes_per_value
    kv_split = kv_shards(model, w.tp) * w.pp
    n_in, n_out = w.input_len, w.output_len
    notes: list[str] = []
    if model.attention_type == "mla" and w.tp > 1:
        notes.append(
            f"MLA keeps its latent KV cache whole on each of the tp={w.tp} ranks (vLLM, SGLang); attention data "
            f"parallelism (tp: 1, ep: {w.tp * w.dp}) holds one copy per replica instead"
        )
    c = act_bytes(w.precision)
    b = w.batch_size
    if model.kind in ("decoder", "encoder-decoder"):
        # what the engine allocates per sequence (Ollama: its num_ctx; a static cache: all of it)
        t_prefill, t_full = engines.kv_tokens_per_sequence(w, model, gpu)
        kv_prefill = b * _kv_cache_bytes(model, t_prefill, kv_b, n_in) / kv_split
        kv_full = b * _kv_cache_bytes(model, t_full, kv_b, n_in) / kv_split
        shared = engines.prefix_shared_tokens(w) if model.kind == "decoder" and b > 1 else 0
        if shared:  # the reused prefix's KV held once, not per sequence (engines.PREFIX_SHARING_ENGINES)
            once = (b - 1) * _kv_cache_bytes(model, shared, kv_b, shared) / kv_split
            kv_prefill, kv_full = kv_prefill - once, kv_full - once
            notes.append(f"the {shared:,}-token cached prefix's KV is held once for the {b} sequences")
        if (t_prefill, t_full) != (n_in, n_in + n_out):
            notes.append(f"the {w.engine} engine allocates the KV cache of {t_full:,} tokens per sequence up front")
        if t_full < n_in + n_out and w.engine == "autoawq":
            notes.append(f"AutoAWQ's fused cache ({t_full:,} tokens, num_ctx) rolls: the oldest tokens drop out")
        elif t_full < n_in + n_out:
            notes.append(
                f"Ollama's context (num_ctx {t_full:,}) is shorter than {n_in:,} + {n_out:,} tokens: it drops the "
                "start of the prompt; set num_ctx to keep it all"
            )
    else:
        kv_prefill = kv_full = 0.0
        t_full = n_in + n_out
    if off is not None:  # a layer's KV cache lives with the layer (llama.cpp, unless --no-kv-offload)
        host += kv_full * kv_split * (1.0 - off.gpu_share)  # the host's layers' whole cache, once
        kv_prefill, kv_full = kv_prefill * off.gpu_share, kv_full * off.gpu_share
    seq = n_in if model.kind in ("decoder", "encoder-decoder") else tokens_per_sample(model, w)
    shapes = stack_shapes(model) if model.kind != "cnn" else []
    work_per_token = max((prefill_working_bytes_per_token(s, c, w.tp) for s in shapes), default=0.0)
    prefill_tokens = b * seq
    if w.engine == "tgi" and gpu is not None:  # TGI prefills at most --max-batch-prefill-tokens at once
        prefill_tokens = min(prefill_tokens, engines.tgi_max_batch_prefill_tokens(model, gpu, w.tp))
    work = work_per_token * prefill_tokens
    if model.kind == "cnn":
        # a CNN's largest feature map: ResNet stem output 64 x 112 x 112 per image
        work = b * 64 * 112 * 112 * c * 2
    if (w.attention_impl == "eager" or w.engine == "autoawq") and shapes:
        # transformers' eager attention materialises heads x s x s scores (softmax in fp32);
        # AutoAWQ's fused prompt attention keeps fp16 scores, an fp32 copy and the fp32 softmax
        ctx = seq if shapes[-1].window is None else min(seq, int(shapes[-1].window))
        per = engines.AUTOAWQ_SCORE_BYTES if w.engine == "autoawq" else 4.0 + c
        work += b * model.num_heads / w.tp * seq * ctx * per
    logits = (
        b * model.vocab_size * (c + 4.0) / w.tp if _per_model(model, "lm_head", lambda: has_lm_head(model)) else 0.0
    )
    kv_note, pre_note = _kv_notes(model, w, b, t_full, kv_b, kv_split)
    prefill = [
        *lines_w,
        MemoryLine("KV cache", kv_prefill, pre_note, "activation"),
        MemoryLine(
            "prefill activations",
            work,
            f"one layer's working set for {b} x {seq} tokens"
            if prefill_tokens == b * seq
            else f"one layer's working set for {prefill_tokens:,} tokens (TGI's --max-batch-prefill-tokens)",
            "activation",
        ),
        MemoryLine("logits", logits, "last position only, fp32 (generate / vLLM sampler)", "activation"),
    ]
    decode = [
        *lines_w,
        MemoryLine("KV cache", kv_full, kv_note, "activation"),
        MemoryLine("logits", logits, "last position only, fp32", "activation"),
    ]
    serving = None
    # Ollama's cache is num_ctx x its parallel slots, AutoAWQ's one batch x its window: no serving view
    if (
        gpu is not None
        and model.kind in ("decoder", "encoder-decoder")
        and off is None
        and w.engine not in ("ollama", "autoawq")
    ):
        serving = _serving(model, w, gpu, weights, work_per_token, kv_b, kv_split)
    if serving is not None and serving.engine is not None:
        # a paged-KV engine that preallocates (vLLM, SGLang): its memory is fixed at start-up, whatever the
        # batch; more sequences than the pool holds queue (QA F17)
        pool = _pool_lines(model, w, gpu, line, serving, work_per_token)
        return finish(model, w, gpu, {"start-up": pool[:-1]}, host, 0, notes, serving, runtime_rows=pool[-1:])
    return finish(model, w, gpu, {"prefill": prefill, "decode": decode}, host, 0, notes, serving)


def _kv_notes(model: ModelSpec, w: Workload, b: int, t_full: int, kv_b: float, kv_split: int) -> tuple[str, str]:
    """(decode, prefill) notes of the KV cache line: the tokens per sequence and bytes per token."""
    n_in, n_out = w.input_len, w.output_len
    fam = family_of(model.model_type)
    per_token = _per_model(model, ("kv/token", kv_b), lambda: model.kv_bytes_per_token(kv_b))
    windowed = _per_model(model, "windowed", lambda: any(a.window for a in model.attention_layers))
    shown = (
        f"{n_in}+{n_out}"
        if model.kind not in ("decoder", "encoder-decoder") or t_full == n_in + n_out
        else f"{t_full:,}"
    )
    kv_note = (
        f"{b} x {shown} tokens x {per_token / 1024:.1f} KiB/token ({w.effective_kv_dtype}"
        + (
            ", chunked local layers capped"
            if fam is not None and fam.kv == "chunked"
            else (", sliding windows capped" if windowed else "")
        )
        + ")"
    )
    pre_note = f"after the prefill: {kv_note}"
    if model.kind == "encoder-decoder":
        kv_note, pre_note = _cross_kv_notes(model, w, b, t_full, kv_b, kv_split)
    return kv_note, pre_note


def _profile_bytes(model: ModelSpec, w: Workload, gpu: GPU, work_per_token: float) -> float:
    """vLLM's start-up profile run: one layer's working set for max_num_batched_tokens tokens, plus
    the sampler's logits for max_num_seqs sequences (runtime.VLLM_PROFILE_TOKENS, VLLM_SAMPLER_BYTES_PER_LOGIT)."""
    seqs = runtime.vllm_max_num_seqs(gpu)
    sampler = seqs * model.vocab_size * runtime.VLLM_SAMPLER_BYTES_PER_LOGIT / w.tp
    return work_per_token * runtime.VLLM_PROFILE_TOKENS + sampler


def _non_torch_bytes(w: Workload) -> float:
    return runtime.CUDA_CONTEXT_BYTES + (runtime.NCCL_BYTES if w.num_gpus > 1 else 0.0)


def _pool_lines(
    model: ModelSpec, w: Workload, gpu: GPU | None, weights: MemoryLine, s: ServingCapacity, work_per_token: float
) -> list[MemoryLine]:
    """A preallocating engine's memory as it sizes it at start-up (vllm/v1/worker/gpu_worker.py
    determine_available_memory: requested = total x gpu_memory_utilization; KV = requested - weights
    - the profile run's peak - non-torch memory): the weights, the KV pool, the profile run and the
    non-torch memory, which sum to gpu_memory_utilization x the card when the pool holds a sequence.
    The last line is the runtime's (finish's `runtime_rows`)."""
    assert gpu is not None
    seq = w.input_len + w.output_len
    held = (
        f"{s.max_tokens:,} tokens: {s.max_sequences:,} concurrent sequences of {w.input_len:,}+{w.output_len:,}"
        if s.kv_short_bytes <= 0
        else f"{s.kv_short_bytes / 2**30:.2f} GiB short of one {seq:,}-token sequence: the engine does not start"
    )
    return [
        weights,
        MemoryLine(
            "KV cache (pool)",
            s.kv_budget_bytes,
            f"{s.engine} preallocates what gpu_memory_utilization {s.gpu_memory_utilization:g} leaves after the rest: "
            f"{held} ({s.kv_bytes_per_token / 1024:.1f} KiB/token, {w.effective_kv_dtype}); more queue",
            "activation",
        ),
        MemoryLine(
            "profile-run activations" if w.engine != "sglang" else "activations (outside mem_fraction_static)",
            _profile_bytes(model, w, gpu, work_per_token),
            (
                f"start-up profile run: one layer's working set for {runtime.VLLM_PROFILE_TOKENS:,} tokens "
                f"(max_num_batched_tokens; prefill is chunked to it) + the sampler's logits for "
                f"{runtime.vllm_max_num_seqs(gpu)} sequences (max_num_seqs)"
                if w.engine != "sglang"
                else f"SGLang leaves 1 - {s.gpu_memory_utilization:g} of the card to them, not the KV pool: one "
                f"layer's working set for a {runtime.VLLM_PROFILE_TOKENS:,}-token chunk (--chunked-prefill-size "
                "default 8192) + the sampler's logits"
            ),
            "activation",
        ),
        MemoryLine(
            "CUDA context and NCCL" if w.num_gpus > 1 else "CUDA context",
            _non_torch_bytes(w),
            "non-torch memory the engine subtracts at start-up: ~400 MB with lazy loading (pytorch/pytorch#109888)",
            "runtime",
        ),
    ]


def _cross_kv_notes(model: ModelSpec, w: Workload, b: int, t_full: int, kv_b: float, kv_split: int) -> tuple[str, str]:
    """(decode, prefill) KV notes of an encoder-decoder: the formula `kv_cache_bytes` uses, decoder
    self-attention over the output tokens + cross-attention over the encoder's input tokens."""
    self_kib = model.kv_bytes_per_token(kv_b) / 1024
    cross_kib = model.cross_kv_bytes_per_input_token(kv_b) / 1024
    n_in, n_dec = w.input_len, max(t_full - w.input_len, 0)
    split = f" / {kv_split} GPUs" if kv_split > 1 else ""
    cross = f"{n_in} encoder tokens x {cross_kib:.1f} KiB cross-attention"
    decode = (
        f"{b} x ({n_dec} decoder tokens x {self_kib:.1f} KiB self-attention + {cross}){split} "
        f"({w.effective_kv_dtype}; the prompt is the encoder's, not in the decoder's self-attention cache)"
    )
    return decode, f"after the prefill: {b} x {cross}{split} ({w.effective_kv_dtype}; no decoder token yet)"


def _serving(
    model: ModelSpec, w: Workload, gpu: GPU, weights: float, work_per_token: float, kv_b: float, kv_split: int
) -> ServingCapacity:
    """vLLM's sizing (vllm/worker/worker.py determine_num_available_blocks): KV budget =
    total x gpu_memory_utilization - weights - peak activations of a profile run - non-torch memory.
    SGLang's (model_runner.profile_max_num_token: rest = free memory after loading - total x
    (1 - mem_fraction_static)) is the same less the profile run: its activations and CUDA graphs live
    in the 1 - mem_fraction_static it leaves, the fraction its default by TP size
    (engines.serving_memory_fraction)."""
    if w.engine == "tgi":
        return _tgi_serving(model, w, gpu, weights, work_per_token, kv_b, kv_split)
    util = engines.serving_memory_fraction(w)
    profile = _profile_bytes(model, w, gpu, work_per_token) if w.engine != "sglang" else 0.0
    non_torch = _non_torch_bytes(w)
    total = runtime.usable_memory_bytes(gpu, w.ecc)
    budget = total * util - weights - profile - non_torch
    per_seq_len = max(w.input_len + w.output_len, 1)
    # bytes per token averaged over a full sequence, sliding windows included
    per_token = _kv_cache_bytes(model, per_seq_len, kv_b, w.input_len) / per_seq_len / kv_split
    blocks_per_seq = math.ceil(per_seq_len / runtime.VLLM_BLOCK_TOKENS)
    # one sequence in whole blocks (vllm/v1/core/kv_cache_utils.py _check_enough_kv_cache_memory:
    # needed_memory = max_memory_usage_bytes at max_model_len, cdiv(len, block_size) pages a layer),
    # max_model_len covering the tail request (tail_sequence_len)
    seq_bytes = math.ceil(tail_sequence_len(w) / runtime.VLLM_BLOCK_TOKENS) * runtime.VLLM_BLOCK_TOKENS * per_token
    short = max(seq_bytes - budget, 0.0) if per_token > 0 else 0.0
    engine = runtime.PREALLOCATING_ENGINES.get(w.engine)
    if budget <= 0 or per_token <= 0:
        return ServingCapacity(util, max(budget, 0.0), per_token, 0, 0, seq_bytes, short, engine)
    blocks = math.floor(budget / (per_token * runtime.VLLM_BLOCK_TOKENS))
    tokens = blocks * runtime.VLLM_BLOCK_TOKENS
    seqs = blocks // blocks_per_seq
    shared = engines.prefix_shared_tokens(w) if model.kind == "decoder" else 0
    if shared:
        # the cached prefix's blocks are held once for every sequence that reuses them (vLLM's BlockPool
        # hands each matching request the same ref-counted block; SGLang's radix tree shares its nodes):
        # each sequence owns only the blocks after it
        shared_blocks = math.ceil(shared / runtime.VLLM_BLOCK_TOKENS)
        own_blocks = math.ceil((per_seq_len - shared) / runtime.VLLM_BLOCK_TOKENS)
        seqs = max(blocks - shared_blocks, 0) // own_blocks
    return ServingCapacity(util, budget, per_token, tokens, seqs, seq_bytes, short, engine)


def _tgi_serving(
    model: ModelSpec, w: Workload, gpu: GPU, weights: float, work_per_token: float, kv_b: float, kv_split: int
) -> ServingCapacity:
    """TGI's sizing (estimators/engines.py): after a warm-up prefill of --max-batch-prefill-tokens,
    the KV cache gets the free memory less (1 - cuda_memory_fraction x TGI_WIGGLE_ROOM 0.90) of the
    card: total x fraction x 0.90 - weights - the warm-up's activations - the CUDA context.
    --cuda-memory-fraction is 1.0 unless gpu_memory_utilization is set (it reads as it)."""
    fraction = (
        w.gpu_memory_utilization if "gpu_memory_utilization" in w.model_fields_set else engines.TGI_CUDA_MEMORY_FRACTION
    )
    profile = work_per_token * engines.tgi_max_batch_prefill_tokens(model, gpu, w.tp)
    non_torch = runtime.CUDA_CONTEXT_BYTES + (runtime.NCCL_BYTES if w.num_gpus > 1 else 0.0)
    usable = runtime.usable_memory_bytes(gpu, w.ecc) * fraction * engines.TGI_WIGGLE_ROOM
    budget = usable - weights - profile - non_torch
    per_seq_len = max(w.input_len + w.output_len, 1)
    per_token = _kv_cache_bytes(model, per_seq_len, kv_b, w.input_len) / per_seq_len / kv_split
    # engine None: TGI's view is reported, but only vLLM/SGLang's startup check decides the fit here
    seq_bytes = tail_sequence_len(w) * per_token
    short = max(seq_bytes - budget, 0.0) if per_token > 0 else 0.0
    if budget <= 0 or per_token <= 0:
        return ServingCapacity(fraction, max(budget, 0.0), per_token, 0, 0, seq_bytes, short, None)
    tokens = math.floor(budget / per_token)
    # TGI v3's radix allocator shares the cached prefix's slots between the requests that match it
    shared = engines.prefix_shared_tokens(w) if model.kind == "decoder" else 0
    seqs = max(tokens - shared, 0) // (per_seq_len - shared)
    return ServingCapacity(fraction, budget, per_token, tokens, seqs, seq_bytes, short, None)
