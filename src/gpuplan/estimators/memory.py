"""Peak GPU memory of one workload on one GPU of a type (of N), as a breakdown in bytes.

Model states follow the ZeRO paper (Rajbhandari et al. 2020, sec. 3.1 and 5): with mixed-precision
Adam, 2 bytes of 16-bit weights, 2 of 16-bit gradients and 12 of fp32 master weights and moments
per parameter (16 in all), sharded across the data-parallel group by stage (1: optimizer states,
2: + gradients, 3: + weights; FSDP FULL_SHARD = 3). Without ZeRO, PyTorch AMP and Megatron keep
fp32 gradients (main_grad), so plain data parallelism holds 2 + 4 + 4 + 8 = 18 bytes per
parameter. Activations come from `activations.py`, the framework's own overheads from
`runtime.py`. Peak memory is the largest of three moments of a training step: the end of the
forward pass (all activations and the loss live), and the optimizer step (all gradients live,
activations freed); for inference, the prefill and the end of decoding.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Final

from gpuplan.errors import InvalidSettingError
from gpuplan.estimators import runtime
from gpuplan.estimators.activations import (
    ActivationSettings,
    checkpoint_bytes_per_token,
    layer_bytes_per_token,
    prefill_working_bytes_per_token,
    stack_shapes,
)
from gpuplan.estimators.lora import adapter_params, lora_targets
from gpuplan.estimators.optimizer import OPTIMIZER_INFO, optimizer_state_bytes
from gpuplan.specs.gpu import GPU
from gpuplan.specs.model import ModelSpec, ParamGroup, family_of
from gpuplan.specs.precision import checkpoint_format, kept_unquantised, storage_format
from gpuplan.specs.workload import Workload

# Linear layers inside the blocks: what weight-only quantisation (GPTQ, AWQ, bitsandbytes int8 /
# NF4, fp8 checkpoints) converts. Embeddings, norms and the output head stay 16-bit (bitsandbytes
# skips lm_head by default: transformers' BitsAndBytesConfig llm_int8_skip_modules; GPTQ/AWQ
# quantise only the decoder layers).
_QUANTISED_ROLES: Final = ("attention", "mlp", "expert")
# ggml/GGUF bits per weight are whole-file averages (embeddings and output included)
_GGUF: Final = ("q8_0", "q4_0", "q6_k", "q5_k_m", "q5_k_s", "q4_k_m", "q4_k_s", "q3_k_m", "q3_k_l", "q3_k_s", "q2_k")

# Bytes per logit element while the loss runs, by loss implementation (all per vocab entry x token):
# upcast (transformers ForCausalLMLoss: logits.float() then cross_entropy): the 16-bit logits
#   the model returns, the fp32 log-softmax cross_entropy saves, and one fp32 transient (the
#   upcast copy in forward, the fp32 gradient in backward);
# chunked (torchtune CEWithChunkedOutputLoss, 8 chunks): 16-bit logits + fp32 log-softmax of all
#   chunks, the fp32 transient only one chunk at a time;
# fused (Liger fused linear cross entropy): logits exist one chunk at a time.
_LOSS_CHUNKS: Final = 8


def _logit_bytes(loss_impl: str, act_bytes: float, compiled: bool = False) -> float:
    if compiled and loss_impl == "chunked":
        # torch.compile fuses each chunk's upcast + cross-entropy: the 16-bit logits and one fp32
        # chunk remain (torchtune README "Optimization flags": chunked CE under compile saves 8.1
        # of 51.0 GiB on Llama 3.2 3B, 2 x 4096 tokens, i.e. ~8 bytes per logit)
        return act_bytes + 4.0 / _LOSS_CHUNKS
    if act_bytes >= 4:  # fp32 training: no upcast copy
        return {"upcast": 8.0, "chunked": 4.0 + 4.0 / _LOSS_CHUNKS, "fused": 8.0 / _LOSS_CHUNKS}[loss_impl]
    return {
        "upcast": act_bytes + 4.0 + 4.0,
        "chunked": act_bytes + 4.0 + 4.0 / _LOSS_CHUNKS,
        "fused": (act_bytes + 4.0) / _LOSS_CHUNKS,
    }[loss_impl]


@dataclass(frozen=True)
class MemoryLine:
    name: str
    bytes: float
    note: str
    # "model" (weights, gradients, optimizer), "activation", "runtime", or "paged": bitsandbytes
    # paged optimizer states live in CUDA managed memory, outside PyTorch's allocator, so
    # torch.cuda.max_memory_allocated does not count them (bitsandbytes functional.get_paged)
    kind: str


@dataclass(frozen=True)
class ServingCapacity:
    """vLLM-style serving view: what the KV cache can hold once weights are loaded."""

    gpu_memory_utilization: float
    kv_budget_bytes: float
    kv_bytes_per_token: float
    max_tokens: int
    max_sequences: int  # of input_len + output_len tokens each


@dataclass(frozen=True)
class MemoryEstimate:
    workload: Workload
    model_name: str
    gpu: GPU | None
    num_gpus: int
    lines: tuple[MemoryLine, ...]  # live at the peak
    peak_phase: str
    phases: dict[str, float]  # per-GPU bytes at each moment considered
    allocated_bytes: float  # tensors at the peak (torch.cuda.max_memory_allocated)
    reserved_bytes: float  # + allocator slack (torch.cuda.max_memory_reserved)
    per_gpu_bytes: float  # + CUDA context and NCCL (what nvidia-smi shows; what must fit)
    host_bytes: float  # host RAM for offloaded states (per GPU)
    trainable_params: int
    not_at_peak: tuple[MemoryLine, ...] = ()
    serving: ServingCapacity | None = None
    notes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def capacity_bytes(self) -> float | None:
        """What the driver lets a process allocate (runtime.USABLE_MEMORY_FRACTION of the card)."""
        return None if self.gpu is None else self.gpu.memory_bytes * runtime.USABLE_MEMORY_FRACTION

    @property
    def paged_bytes(self) -> float:
        """Optimizer states in CUDA managed memory (bitsandbytes paged optimizers), at the peak."""
        return sum(x.bytes for x in self.lines if x.kind == "paged")

    @property
    def paged_spill_bytes(self) -> float:
        """The part of the paged states the driver keeps in host RAM because the card is full: it
        pages them in for each optimizer step and out again (CUDA unified memory oversubscription;
        bitsandbytes' paged optimizers exist for this, Dettmers et al. 2023, QLoRA sec. 3)."""
        cap = self.capacity_bytes
        if cap is None or self.paged_bytes <= 0:
            return 0.0
        return min(self.paged_bytes, max(self.per_gpu_bytes - cap, 0.0))

    @property
    def on_card_bytes(self) -> float:
        """What stays on the card: per_gpu_bytes less the paged states spilled to host RAM."""
        return self.per_gpu_bytes - self.paged_spill_bytes

    @property
    def fits(self) -> bool | None:
        """Whether the job runs: everything but the paged states within the usable memory (paged
        states that do not fit spill to host RAM, at a time cost the step estimate counts)."""
        cap = self.capacity_bytes
        return None if cap is None else self.on_card_bytes <= cap

    @property
    def headroom_bytes(self) -> float | None:
        cap = self.capacity_bytes
        return None if cap is None else cap - self.on_card_bytes

    def breakdown(self) -> dict[str, float]:
        return {line.name: line.bytes for line in self.lines}


# ---------------------------------------------------------------------------------------------


def _act_bytes(precision: str) -> float:
    # fp8 training (Transformer Engine) keeps activations in bf16 and casts per GEMM
    return 4.0 if precision in ("fp32", "tf32") else 2.0


@dataclass(frozen=True)
class InferenceWeights:
    """The format an inference workload's weights are stored in."""

    fmt: str
    kept: frozenset[str] = frozenset()  # groups the checkpoint leaves at 16 bits under `fmt`
    from_checkpoint: bool = False  # read from config.json's quantization_config


def inference_weights(model: ModelSpec, w: Workload) -> InferenceWeights:
    """The workload's `weight_dtype`; without one, the format the checkpoint ships in (config.json's
    quantization_config: gpt-oss's MXFP4 experts, DeepSeek-V3's block FP8), which vLLM, SGLang and
    transformers load as it is, with the modules it leaves unquantised at 16 bits; else the
    compute precision."""
    ck = checkpoint_format(model.config)
    if ck is not None and (w.weight_dtype is None or w.weight_dtype == ck.fmt):
        kept = frozenset(g.name for g in model.groups if kept_unquantised(g.name, ck.keep))
        return InferenceWeights(ck.fmt, kept, True)
    return InferenceWeights(w.effective_weight_dtype)


def is_quantised(g: ParamGroup, fmt: str, kept: frozenset[str] = frozenset()) -> bool:
    """Whether a parameter group is stored in a weight-only format `fmt` (vs 16 bits)."""
    if g.name in kept:
        return False
    return fmt in _GGUF or (g.linear is not None and g.role in _QUANTISED_ROLES)


def _weight_bytes(groups: list[ParamGroup], fmt: str, other_bytes: float, kept: frozenset[str] = frozenset()) -> float:
    """Bytes of `groups` stored as `fmt`: block linears in the format (less the checkpoint's
    unquantised `kept` groups), the rest at `other_bytes`."""
    per = storage_format(fmt).bytes_per_value
    total = 0.0
    for g in groups:
        if is_quantised(g, fmt, kept):
            total += g.total * per
        else:
            total += g.total * other_bytes
    return total


def pipeline_ranks(model: ModelSpec, w: Workload) -> float:
    """The divisor that gives the fullest pipeline rank's share of the layers: pp where pp x vp
    divide the layers, else layers / (ceil(layers / (pp x vp)) x vp) (an uneven split, as the
    step time counts it: parallel.stage_share)."""
    layers = max(model.num_layers, 1)
    if w.pp <= 1 or layers % (w.pp * w.vp) == 0:
        return float(w.pp)
    return layers / (math.ceil(layers / (w.pp * w.vp)) * w.vp)


def kv_shards(model: ModelSpec, tp: int) -> int:
    """GPUs one layer's KV cache is split over under tensor parallelism: the KV heads are divided
    among the tp ranks (replicated where tp exceeds them); MLA's latent is one shared "head" that
    every rank keeps whole (vLLM ModelConfig.get_num_kv_heads: "When using MLA during decode it
    becomes MQA", return 1), the reason MLA models are served with attention data parallelism."""
    if model.attention_type == "mla":
        return 1
    return min(tp, max(model.num_kv_heads, 1))


def _tokens_per_sample(model: ModelSpec, w: Workload) -> int:
    if model.kind == "vision-transformer":
        return model.max_position_embeddings or w.seq_len  # patches + [CLS]
    return w.seq_len


def _has_lm_head(model: ModelSpec) -> bool:
    return any(g.role == "head" and g.linear is not None and g.linear[1] == model.vocab_size for g in model.groups)


def _autocast(w: Workload) -> bool:
    """PyTorch AMP: fp32 parameters with 16-bit autocast (mixed precision without ZeRO)."""
    return w.precision in ("fp16", "bf16", "fp8") and w.master_weights == "fp32" and w.zero == 0


def _norm_bytes(model: ModelSpec, w: Workload, b: float) -> float:
    if w.compile or b >= 4:
        return b
    fam = family_of(model.model_type)
    if fam is not None and fam.norm_upcasts:  # its RMSNorm upcasts to fp32 in eager PyTorch (LlamaRMSNorm and kin)
        return 4.0 + b
    return 4.0 if _autocast(w) else b


# leaf names of output projections (attention) and down projections (MLP) across the families
ATTN_OUT_LEAVES: Final = ("o_proj", "out_proj", "dense", "c_proj", "o", "output")
MLP_DOWN_LEAVES: Final = ("down_proj", "w2", "c_proj", "dense_4h_to_h", "wo", "dense", "fc2", "fc_out")


def _kept_inputs(model: ModelSpec, w: Workload) -> dict[str, Any]:
    """Which linear inputs autograd keeps: all for full training, adapted ones for LoRA."""
    if w.task not in ("lora", "qlora"):
        return {}
    targets = lora_targets(model, w.lora_targets)
    attn_in = mlp_in = down_in = False
    drop_elements = 0.0
    for g in targets:
        assert g.linear is not None
        leaf = g.name.rsplit(".", 1)[-1]
        if g.role == "attention" and leaf not in ATTN_OUT_LEAVES:
            attn_in = True
        elif g.role in ("mlp", "expert"):
            if leaf in MLP_DOWN_LEAVES:
                down_in = True
            else:
                mlp_in = True
        if w.lora_dropout > 0:
            drop_elements += g.linear[0] * g.count * g.active_fraction / max(model.num_layers, 1)
    return {
        "attn_input_kept": attn_in,
        "mlp_input_kept": mlp_in,
        "down_input_kept": down_in,
        "lora_dropout_elements": drop_elements,
    }


def activation_lines(model: ModelSpec, w: Workload) -> tuple[list[MemoryLine], float]:
    """Training activations per GPU and the host bytes activation offloading moves out."""
    if model.kind == "cnn":
        raise InvalidSettingError(
            f"Training-memory estimates cover transformers; {model.name} is a CNN ({model.model_type}), whose "
            "activation sizes gpuplan does not model. Use task: inference, or a transformer model."
        )
    b = _act_bytes(w.precision)
    cfg = ActivationSettings(
        bytes_per_value=b,
        checkpointing=w.activation_checkpointing,
        flash=w.attention_impl != "eager",
        tp=w.tp,
        sequence_parallel=w.sequence_parallel,
        norm_bytes=_norm_bytes(model, w, b),
        **_kept_inputs(model, w),
    )
    seq = _tokens_per_sample(model, w)
    tokens = w.batch_size * seq / w.cp  # context parallelism splits each sequence over cp GPUs
    # 1F1B pipeline schedule: the first stage holds min(pp, micro-batches) micro-batches of its
    # L/pp layers (Korthikanti et al. 2022, sec. 4.2.3: ~L layers' worth in all); the interleaved
    # schedule holds more, x (1 + (pp - 1) / (pp x vp)) (same section)
    in_flight = min(w.pp, w.micro_batches) / pipeline_ranks(model, w)
    if w.vp > 1:
        in_flight *= 1 + (w.pp - 1) / (w.pp * w.vp)
    lines: list[MemoryLine] = []
    host = 0.0
    kept = 0.0
    largest_layer = 0.0
    for s in stack_shapes(model):
        per_layer = layer_bytes_per_token(model, s, seq, cfg) * tokens
        largest_layer = max(largest_layer, per_layer)
        if w.activation_checkpointing == "full":
            ck = checkpoint_bytes_per_token(s, cfg) * tokens * s.layers * in_flight
            if w.activation_offloading:
                host += ck
                ck = min(ck, 2 * checkpoint_bytes_per_token(s, cfg) * tokens)  # two layers in transit
            kept += ck
        else:
            kept += per_layer * s.layers * in_flight
    what = {
        "none": "all layers' saved tensors (Korthikanti et al. 2022, sec. 4.1"
        + (", FlashAttention: no s^2 scores)" if cfg.flash else ", eager attention: softmax scores kept)"),
        "selective": "attention scores recomputed (Korthikanti et al. 2022, sec. 4.2)",
        "full": "each layer's input kept (Korthikanti et al. 2022, sec. 4.3)"
        + ("; offloaded to host" if w.activation_offloading else ""),
    }[w.activation_checkpointing]
    lines.append(MemoryLine("activations", kept, f"{w.batch_size} x {seq} tokens: {what}", "activation"))
    if w.activation_checkpointing == "full":
        lines.append(
            MemoryLine("recomputed layer", largest_layer, "one layer rebuilt at a time in backward", "activation")
        )
    # embedding output and the final norm's input/output ahead of the head
    lines.append(MemoryLine("embedding and final norm", 3 * model.hidden_size * b * tokens / w.tp, "", "activation"))
    if _has_lm_head(model):
        per = _logit_bytes(w.loss_impl, b, w.compile)
        logits = tokens * model.vocab_size * per / w.tp
        note = {
            "upcast": f"batch x seq x vocab ({model.vocab_size}) at {per:g} B: 16-bit logits, fp32 log-softmax, "
            "fp32 copy (transformers upcasts logits)",
            "chunked": f"batch x seq x vocab at {per:g} B: logits + fp32 log-softmax, upcast in 8 chunks (torchtune)",
            "fused": f"batch x seq x vocab at {per:g} B: fused linear cross-entropy keeps one chunk",
        }[w.loss_impl]
        lines.append(MemoryLine("logits and loss", logits, note, "activation"))
    return lines, host


def estimate_memory(model: ModelSpec, w: Workload, gpu: GPU | None = None) -> MemoryEstimate:
    """Per-GPU peak memory of workload `w` with model `model` on `gpu` (N = w.num_gpus)."""
    if w.is_graphics:
        raise InvalidSettingError(
            f"task {w.task!r} is a graphics workload; its memory is per stream or user (see `gpuplan plan`)."
        )
    if w.is_training:
        if model.kind == "cnn":
            return _cnn_training(model, w, gpu)
        return _training(model, w, gpu)
    return _inference(model, w, gpu)


# Feature-map elements autograd keeps per 224x224 image in ResNet-50 training: each bottleneck
# block saves its convolutions' outputs (BatchNorm's input) and the ReLU outputs (the next conv's
# input): stem 1.8M, stage 1 3 x 2.4M, stage 2 4 x 1.2M, stage 3 6 x 0.6M, stage 4 3 x 0.3M
# = 18.3M (layer shapes from He et al. 2016, table 1). Other CNNs scale by their FLOPs per image.
CNN_SAVED_ELEMENTS_PER_IMAGE: Final = 18.3e6
CNN_REFERENCE_FLOPS: Final = 8.2e9  # ResNet-50 forward at 224x224, 2 FLOPs per multiply-add
# cuDNN convolution workspace: PyTorch lets cuDNN pick algorithms with up to ~1 GiB of workspace
# on large GPUs (benchmark mode); 512 MiB is the typical working figure.
CNN_WORKSPACE_BYTES: Final = 512 * 2**20


def _cnn_training(model: ModelSpec, w: Workload, gpu: GPU | None) -> MemoryEstimate:
    """CNN training (data parallel): fp32 weights, gradients and optimizer states, the saved
    feature maps of every layer, and cuDNN's workspace."""
    if w.task in ("lora", "qlora") or w.tp > 1 or w.pp > 1:
        raise InvalidSettingError(
            f"{model.name} is a CNN: train it with task pretrain or finetune, data-parallel (tp = pp = 1)."
        )
    c = _act_bytes(w.precision)
    n = model.total_params
    info = OPTIMIZER_INFO[w.optimizer]
    shard = w.dp if w.zero >= 1 else 1
    per_state = 1.0 if info.eight_bit else 4.0
    states = n * info.moments * per_state / shard
    scale = model.conv_flops_per_sample / CNN_REFERENCE_FLOPS if model.conv_flops_per_sample else 1.0
    acts = CNN_SAVED_ELEMENTS_PER_IMAGE * scale * c * w.batch_size
    lines = [
        MemoryLine("weights (fp32)", n * 4.0 / (w.dp if w.zero >= 3 else 1), f"{n / 1e6:.1f}M params", "model"),
        MemoryLine("gradients (fp32)", n * 4.0 / (w.dp if w.zero >= 2 else 1), "one per weight", "grad"),
        MemoryLine(
            f"optimizer states ({w.optimizer})", states, f"{info.moments} x {per_state:g} B per param", "optimizer"
        ),
        MemoryLine(
            "saved feature maps",
            acts,
            f"{w.batch_size} images x {CNN_SAVED_ELEMENTS_PER_IMAGE * scale / 1e6:.1f}M values x {c:g} B "
            "(conv and ReLU outputs, ResNet-50 shapes)",
            "activation",
        ),
        MemoryLine("cuDNN workspace", CNN_WORKSPACE_BYTES, "convolution algorithm scratch space", "buffer"),
    ]
    return _finish(model, w, gpu, {"forward/backward": lines}, 0.0, n, [])


def _check_parallel(model: ModelSpec, w: Workload) -> None:
    if w.tp > 1 and not model.tp_splits_heads(w.tp):
        raise InvalidSettingError(model.tp_heads_rule(w.tp))
    if w.pp > 1 and model.num_layers < w.pp:
        raise InvalidSettingError(f"The 'pp' parameter must be at most num_layers={model.num_layers}. Got {w.pp}.")
    if w.ep > 1 and not model.is_moe:
        raise InvalidSettingError(f"ep={w.ep} needs a mixture-of-experts model; {model.name} is dense.")
    if w.ep > 1 and model.num_experts % w.ep:
        raise InvalidSettingError(f"ep={w.ep} must divide the {model.num_experts} experts.")


def _runtime_lines(allocated: float, n: int, gpu: GPU | None, lazy: bool = True) -> list[MemoryLine]:
    context = runtime.CUDA_CONTEXT_BYTES if lazy else runtime.CUDA_CONTEXT_EAGER_BYTES
    lines = [
        MemoryLine(
            "allocator slack",
            allocated * runtime.ALLOCATOR_SLACK_FRACTION,
            f"{runtime.ALLOCATOR_SLACK_FRACTION:.0%} of allocated: {runtime.ALLOCATOR_SLACK_SOURCE}",
            "runtime",
        ),
        MemoryLine(
            "CUDA context and kernels",
            context + runtime.cublas_workspace_bytes(gpu.cc if gpu else None),
            (runtime.CUDA_CONTEXT_SOURCE if lazy else "all kernels loaded eagerly (CUDA < 11.7): 1343 MiB measured")
            + "; + the cuBLAS workspace",
            "runtime",
        ),
    ]
    if n > 1:
        lines.append(MemoryLine("NCCL buffers", runtime.NCCL_BYTES, runtime.NCCL_SOURCE, "runtime"))
    return lines


def _finish(
    model: ModelSpec,
    w: Workload,
    gpu: GPU | None,
    phases: dict[str, list[MemoryLine]],
    host: float,
    trainable: int,
    notes: list[str],
    serving: ServingCapacity | None = None,
) -> MemoryEstimate:
    totals = {name: sum(x.bytes for x in lines) for name, lines in phases.items()}
    peak_phase = max(totals, key=lambda k: totals[k])
    at_peak = [x for x in phases[peak_phase] if x.bytes > 0 or x.kind == "model"]
    allocated = sum(x.bytes for x in at_peak if x.kind != "paged")
    rt = _runtime_lines(allocated, w.num_gpus, gpu, w.cuda_lazy_loading)
    lines = at_peak + rt
    reserved = allocated + rt[0].bytes
    per_gpu = sum(x.bytes for x in lines)
    overhead = per_gpu - totals[peak_phase]
    peak_names = {x.name for x in at_peak}
    elsewhere: dict[str, MemoryLine] = {}  # each term's largest value in a phase other than the peak
    for lines_ in phases.values():
        for x in lines_:
            prev = elsewhere.get(x.name)
            if x.name not in peak_names and x.bytes > 0 and (prev is None or x.bytes > prev.bytes):
                elsewhere[x.name] = x
    return MemoryEstimate(
        workload=w,
        model_name=model.name,
        gpu=gpu,
        num_gpus=w.num_gpus,
        lines=tuple(lines),
        peak_phase=peak_phase,
        phases={k: v + overhead for k, v in totals.items()},
        allocated_bytes=allocated,
        reserved_bytes=reserved,
        per_gpu_bytes=per_gpu,
        host_bytes=host,
        trainable_params=trainable,
        not_at_peak=tuple(elsewhere.values()),
        serving=serving,
        notes=tuple(notes),
    )


# --- training ---------------------------------------------------------------------------------


def _training(model: ModelSpec, w: Workload, gpu: GPU | None) -> MemoryEstimate:
    _check_parallel(model, w)
    # model-parallel divisor (the fullest pipeline rank's share); ranks holding the same weights
    mp, dp = w.tp * pipeline_ranks(model, w), w.dp * w.cp
    z = w.zero
    notes: list[str] = []
    c = _act_bytes(w.precision)  # 16-bit compute -> 2, fp32/tf32 -> 4
    pure = w.master_weights == "none" or c == 4.0
    info = OPTIMIZER_INFO[w.optimizer]
    groups = list(model.groups)
    total = model.total_params

    model_lines: list[MemoryLine] = []
    grads_lines: list[MemoryLine] = []
    step_temp = 0.0
    host = 0.0

    # expert parallelism splits the MoE experts over ep ranks; ZeRO then shards experts and the
    # rest alike over the data-parallel (x context-parallel) group (Megatron-Core distributed optimizer)
    expert_share = sum(g.total for g in groups if g.role == "expert") / max(total, 1)
    # (an expert's GEMMs split over etp ranks rather than tp: as set, or folded to 1 where ep
    # spans the tensor-parallel ranks, the same split the step time uses)
    ep_factor = 1.0 - expert_share + expert_share * w.tp / (w.ep * w.expert_tp)

    def shard(stage: int) -> float:
        """GPUs a state is split over: tp x pp (/ the expert split), and the data-parallel group
        from ZeRO `stage` on."""
        return mp * dp if z >= stage else mp / ep_factor

    w_shard = shard(3)

    if w.task in ("pretrain", "finetune"):
        trainable_groups = [g for g in groups if g.total > 0]
        n_train = total
        weights = total * c / w_shard
        model_lines.append(
            MemoryLine(
                f"weights ({w.precision if c == 2 else 'fp32'})",
                weights,
                f"{total / 1e9:.3g}B params x {c:g} B" + (f" / {w_shard:g} (ZeRO-3 / FSDP shards)" if z >= 3 else ""),
                "model",
            )
        )
        if not pure:
            model_lines.append(
                MemoryLine(
                    "master weights (fp32)",
                    total * 4.0 / shard(1),
                    "mixed precision keeps an fp32 copy (Micikevicius et al. 2018)",
                    "model",
                )
            )
        fp32_grads = not (z >= 1 or pure)
        grad_bytes = (4.0 if fp32_grads else c) * total / shard(2)
        grad_note = (
            "fp32 gradients (PyTorch AMP / Megatron main_grad)"
            if fp32_grads
            else f"{c:g}-byte gradients" + (" sharded by ZeRO-2/3" if z >= 2 else "")
        )
        grads_lines.append(MemoryLine("gradients", grad_bytes, grad_note, "model"))
        state_b = c if pure and c == 2.0 else 4.0
        spec = [(g.numel, g.count, _rows(model, g)) for g in trainable_groups]
        opt = optimizer_state_bytes(w.optimizer, spec, state_b) / shard(1)
        step_temp = info.step_temp_elements * n_train * state_b / shard(1)
    else:  # lora / qlora
        targets = lora_targets(model, w.lora_targets)
        r = w.lora_rank
        n_train = adapter_params(targets, r)
        base_fmt: str = "nf4" if w.task == "qlora" else ("fp32" if c == 4.0 else w.precision)
        if w.task == "qlora" and w.weight_dtype is not None:
            base_fmt = w.weight_dtype
        # PEFT's prepare_model_for_kbit_training casts every non-quantised parameter (embeddings,
        # norms, head) to fp32 (peft/utils/other.py); pure 16-bit recipes (torchtune) keep them 16-bit
        rest = 4.0 if (w.task == "qlora" and not pure) else c
        base = _weight_bytes(groups, base_fmt, rest) / w_shard
        model_lines.append(
            MemoryLine(
                f"frozen base weights ({base_fmt})",
                base,
                f"{total / 1e9:.3g}B params; block linears at {storage_format(base_fmt).bits_per_value:.3g} bits, "
                f"embeddings/norms/head at {8 * rest:g}",
                "model",
            )
        )
        # PEFT keeps adapters in fp32 under 16-bit compute (autocast_adapter_dtype=True);
        # pure 16-bit training (torchtune) keeps them like the model
        ab = c if pure else 4.0
        model_lines.append(
            MemoryLine(
                "LoRA adapters",
                n_train * ab / w_shard,
                f"rank {r} on {', '.join(sorted({g.name.rsplit('.', 1)[-1] for g in targets}))}: "
                f"{n_train / 1e6:.3g}M params x {ab:g} B (Hu et al. 2021)",
                "model",
            )
        )
        grads_lines.append(MemoryLine("gradients", n_train * ab / shard(2), "LoRA adapters only", "model"))
        spec = [(r * (g.linear[0] + g.linear[1]), g.count, None) for g in targets if g.linear]
        opt = optimizer_state_bytes(w.optimizer, spec, ab) / shard(1)
        step_temp = info.step_temp_elements * n_train * ab / shard(1)
        if w.task == "qlora" or storage_format(base_fmt).bits_per_value < 16:
            largest = max((g.numel for g in groups if g.linear and g.role in _QUANTISED_ROLES), default=0)
            model_lines.append(
                MemoryLine(
                    "dequantisation buffer",
                    largest * 2.0 / w.tp,
                    "the largest quantised matrix dequantised to 16 bits per matmul (bitsandbytes)",
                    "model",
                )
            )

    opt_note = f"{info.name}: {info.source}" + (" (bitsandbytes 8-bit blocks)" if info.eight_bit else "")
    opt_line = MemoryLine("optimizer states", opt, opt_note, "paged" if info.paged else "model")
    if w.offload != "none":
        # ZeRO-Offload (Ren et al. 2021): fp32 master weights, moments and the fp32 gradient
        # partition live in host memory; the GPU keeps 16-bit parameters and gradients
        host += (
            opt
            + sum(x.bytes for x in model_lines if x.name.startswith("master"))
            + sum(x.bytes for x in grads_lines) * (4.0 / c)
        )
        model_lines = [x for x in model_lines if not x.name.startswith("master")]
        # gradients stream to the host as they are reduced; one layer's worth is in flight
        g_gpu = min(grads_lines[0].bytes, _gathered_layers(model, c, mp, 1))
        grads_lines = [MemoryLine("gradients", g_gpu, "streamed to host (offload); one layer in flight", "model")]
        opt_line = MemoryLine("optimizer states", 0.0, "offloaded to host (ZeRO-Offload)", "model")
        step_temp = 0.0
        notes.append(f"host RAM for offloaded optimizer states: {host / 2**30:.1f} GiB per GPU")
        if w.offload == "optimizer+params":
            # ZeRO-Infinity: parameters live on the host; the GPU holds the layers being computed
            weights_line = model_lines[0]
            host += weights_line.bytes
            model_lines[0] = MemoryLine(weights_line.name, 0.0, "parameters offloaded to host RAM", "model")
    model_lines.append(opt_line)

    buffers: list[MemoryLine] = []
    if dp > 1 and z == 0:
        # torch DDP: bucket buffers the size of the gradients (gradient_as_bucket_view=False default)
        buffers.append(
            MemoryLine(
                "DDP gradient buckets",
                sum(x.bytes for x in grads_lines),
                "torch DDP copies gradients into buckets (gradient_as_bucket_view=False)",
                "model",
            )
        )
    if z >= 3 and (dp > 1 or w.offload == "optimizer+params"):
        # gathered at the stored precision: NF4 bases stay 4-bit until each matmul dequantises
        stored = model_lines[0].bytes * w_shard / max(total, 1) if w.task in ("lora", "qlora") else 0.0
        buffers.append(_gathered_line(model, w, stored or c, mp))
    elif dp > 1 and z >= 1:
        # DeepSpeed ZeRO-1/2 reduce bucket: reduce_bucket_size = 5e8 elements (deepspeed/runtime/zero/config.py)
        bucket = min(5e8, n_train / mp) * c
        buffers.append(MemoryLine("ZeRO reduce bucket", bucket, "DeepSpeed reduce_bucket_size 5e8 elements", "model"))

    if w.optimizer_in_backward:
        # each parameter is updated in backward as its gradient arrives; at most the largest
        # tensor's gradient is alive (torchtune optimizer_in_bwd, PyTorch register_post_accumulate_grad_hook)
        if w.micro_batches > 1:
            raise InvalidSettingError("optimizer_in_backward needs grad_accum: 1 (there is no gradient to accumulate).")
        largest = max((g.numel for g in groups), default=0) if w.task in ("pretrain", "finetune") else 0
        g0 = grads_lines[0]
        per_el = g0.bytes / max(n_train, 1)
        grads_lines = [
            MemoryLine("gradients", largest * per_el if largest else g0.bytes, "one tensor at a time", "model")
        ]
        step_temp = 0.0
    act_lines, act_host = activation_lines(model, w)
    host += act_host
    grads_present = w.micro_batches > 1 or z >= 1 or w.optimizer_in_backward or not w.grads_set_to_none
    head_grads = 0.0
    if not grads_present and w.task in ("pretrain", "finetune"):
        head = sum(g.total for g in groups if g.role == "head")
        head_grads = head * (grads_lines[0].bytes / max(total, 1))
    fwd = model_lines + buffers + act_lines
    if grads_present:
        fwd = fwd + grads_lines
    elif head_grads:
        fwd = [*fwd, MemoryLine("gradients", head_grads, "the output head's gradients arrive first", "model")]
    step = model_lines + buffers + grads_lines
    if step_temp:
        step = [*step, MemoryLine("optimizer step temporaries", step_temp, "torch foreach AdamW: sqrt(v)", "model")]
    phases = {"forward/backward": fwd, "optimizer step": step}
    if info.paged:
        notes.append("paged optimizer states can spill to host RAM under memory pressure (bitsandbytes paging)")
    if w.offload == "none" and w.zero == 0 and dp > 1:
        notes.append("plain data parallelism replicates all model states; zero: 1-3 shards them")
    return _finish(model, w, gpu, phases, host, n_train, notes)


# DeepSpeed ZeRO-3 defaults (deepspeed/runtime/zero/config.py): stage3_max_live_parameters = 1e9
# elements stay gathered (and stage3_max_reuse_distance = 1e9 keeps soon-reused ones); a tensor
# larger than that is still gathered whole.
DEEPSPEED_MAX_LIVE_PARAMETERS: Final = 1e9


def _rows(model: ModelSpec, g: ParamGroup) -> int | None:
    """First dimension of a matrix parameter (embeddings are vocab x d), None for vectors."""
    if g.linear is not None:
        return g.linear[0]
    d = model.hidden_size
    if g.role in ("embedding", "position") and d and g.numel % d == 0 and g.numel > d:
        return g.numel // d
    return None


def _gathered_line(model: ModelSpec, w: Workload, bytes_per: float, mp: float) -> MemoryLine:
    """Parameters all-gathered on the GPU under ZeRO-3 / FSDP, `bytes_per` bytes each."""
    if w.sharding == "deepspeed":
        largest = max((g.numel for g in model.groups), default=0)
        n = min(model.total_params / mp, DEEPSPEED_MAX_LIVE_PARAMETERS + largest)
        return MemoryLine(
            "gathered parameters",
            n * bytes_per,
            "DeepSpeed ZeRO-3: up to stage3_max_live_parameters (1e9) gathered, plus the largest tensor",
            "model",
        )
    return MemoryLine(
        "gathered parameters",
        _gathered_layers(model, bytes_per, mp, 2),
        "FSDP: the current and the prefetched layer all-gathered",
        "model",
    )


def _gathered_layers(model: ModelSpec, c: float, mp: float, layers: int) -> float:
    """16-bit bytes of `layers` transformer layers (all-gathered by ZeRO-3 / FSDP per unit)."""
    per_layer = sum(g.total for g in model.groups if g.role in ("attention", "mlp", "expert", "router", "norm"))
    n = max(model.num_layers, 1)
    return layers * per_layer / n * c / mp


# --- inference --------------------------------------------------------------------------------


def _inference(model: ModelSpec, w: Workload, gpu: GPU | None) -> MemoryEstimate:
    _check_parallel(model, w)
    mp = w.tp * w.pp
    iw = inference_weights(model, w)
    fmt = iw.fmt
    other = 4.0 if fmt == "fp32" else 2.0
    weights = _weight_bytes(list(model.groups), fmt, other, iw.kept) / mp
    ep_note = ""
    if w.ep > 1 and model.is_moe:
        # attention data parallelism + expert parallelism: the experts are spread over all
        # tp x dp GPUs of a stage, attention and the dense layers are whole in each replica
        spread = w.tp * w.dp
        experts = _weight_bytes([g for g in model.groups if g.role == "expert"], fmt, other, iw.kept)
        weights -= experts / mp * (1.0 - w.tp / spread)
        ep_note = f"; experts over {spread} GPUs (ep={w.ep}), the rest over tp={w.tp}"
    bits = storage_format(fmt).bits_per_value
    kept_params = sum(g.total for g in model.groups if g.name in iw.kept and g.linear is not None)
    lines_w = [
        MemoryLine(
            f"weights ({fmt})",
            weights,
            f"{model.total_params / 1e9:.3g}B params; "
            + ("all tensors" if fmt in _GGUF else "block linears")
            + f" at {bits:.3g} bits"
            + ("" if fmt in _GGUF or bits >= 16 else f", embeddings/head at {8 * other:g}")
            + (f", {kept_params / 1e9:.3g}B the checkpoint leaves unquantised at 16" if kept_params else "")
            + (" (the checkpoint's quantization_config)" if iw.from_checkpoint else "")
            + ep_note,
            "model",
        )
    ]
    kv_b = storage_format(w.effective_kv_dtype).bytes_per_value
    kv_split = kv_shards(model, w.tp) * w.pp
    n_in, n_out = w.input_len, w.output_len
    notes: list[str] = []
    if model.attention_type == "mla" and w.tp > 1:
        notes.append(
            f"MLA keeps its latent KV cache whole on each of the tp={w.tp} ranks (vLLM, SGLang); attention data "
            f"parallelism (tp: 1, ep: {w.tp * w.dp}) holds one copy per replica instead"
        )
    c = _act_bytes(w.precision)
    b = w.batch_size
    if model.kind in ("decoder", "encoder-decoder"):
        kv_prefill = b * model.kv_cache_bytes(n_in, kv_b, input_len=n_in) / kv_split
        kv_full = b * model.kv_cache_bytes(n_in + n_out, kv_b, input_len=n_in) / kv_split
    else:
        kv_prefill = kv_full = 0.0
    seq = n_in if model.kind in ("decoder", "encoder-decoder") else _tokens_per_sample(model, w)
    shapes = stack_shapes(model) if model.kind != "cnn" else []
    work_per_token = max((prefill_working_bytes_per_token(s, c, w.tp) for s in shapes), default=0.0)
    work = work_per_token * b * seq
    if model.kind == "cnn":
        # a CNN's largest feature map: ResNet stem output 64 x 112 x 112 per image
        work = b * 64 * 112 * 112 * c * 2
    if w.attention_impl == "eager" and shapes:
        # transformers' eager attention materialises heads x s x s scores (softmax in fp32)
        ctx = seq if shapes[-1].window is None else min(seq, int(shapes[-1].window))
        work += b * model.num_heads / w.tp * seq * ctx * (4.0 + c)
    logits = b * model.vocab_size * (c + 4.0) / w.tp if _has_lm_head(model) else 0.0
    fam = family_of(model.model_type)
    kv_note = (
        f"{b} x {n_in}+{n_out} tokens x {model.kv_bytes_per_token(kv_b) / 1024:.1f} KiB/token ({w.effective_kv_dtype}"
        + (
            ", chunked local layers capped"
            if fam is not None and fam.kv == "chunked"
            else (", sliding windows capped" if any(a.window for a in model.attention_layers) else "")
        )
        + ")"
    )
    prefill = [
        *lines_w,
        MemoryLine("KV cache", kv_prefill, f"after the prefill: {kv_note}", "activation"),
        MemoryLine("prefill activations", work, f"one layer's working set for {b} x {seq} tokens", "activation"),
        MemoryLine("logits", logits, "last position only, fp32 (generate / vLLM sampler)", "activation"),
    ]
    decode = [
        *lines_w,
        MemoryLine("KV cache", kv_full, kv_note, "activation"),
        MemoryLine("logits", logits, "last position only, fp32", "activation"),
    ]
    serving = None
    if gpu is not None and model.kind in ("decoder", "encoder-decoder"):
        serving = _serving(model, w, gpu, weights, work_per_token, kv_b, kv_split)
    return _finish(model, w, gpu, {"prefill": prefill, "decode": decode}, 0.0, 0, notes, serving)


def _serving(
    model: ModelSpec, w: Workload, gpu: GPU, weights: float, work_per_token: float, kv_b: float, kv_split: int
) -> ServingCapacity:
    """vLLM's sizing (vllm/worker/worker.py determine_num_available_blocks): KV budget =
    total x gpu_memory_utilization - weights - peak activations of a profile run - non-torch memory."""
    profile = work_per_token * runtime.VLLM_PROFILE_TOKENS
    seqs = runtime.vllm_max_num_seqs(gpu)
    profile += seqs * model.vocab_size * runtime.VLLM_SAMPLER_BYTES_PER_LOGIT / w.tp
    non_torch = runtime.CUDA_CONTEXT_BYTES + (runtime.NCCL_BYTES if w.num_gpus > 1 else 0.0)
    total = gpu.memory_bytes * runtime.USABLE_MEMORY_FRACTION
    budget = total * w.gpu_memory_utilization - weights - profile - non_torch
    per_seq_len = max(w.input_len + w.output_len, 1)
    # bytes per token averaged over a full sequence, sliding windows included
    per_token = model.kv_cache_bytes(per_seq_len, kv_b, input_len=w.input_len) / per_seq_len / kv_split
    if budget <= 0 or per_token <= 0:
        return ServingCapacity(w.gpu_memory_utilization, max(budget, 0.0), per_token, 0, 0)
    blocks = math.floor(budget / (per_token * runtime.VLLM_BLOCK_TOKENS))
    tokens = blocks * runtime.VLLM_BLOCK_TOKENS
    blocks_per_seq = math.ceil(per_seq_len / runtime.VLLM_BLOCK_TOKENS)
    return ServingCapacity(w.gpu_memory_utilization, budget, per_token, tokens, blocks // blocks_per_seq)
