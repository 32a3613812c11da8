"""The memory breakdown's pieces: lines, the estimate, weights by format, activations, the
runtime's overheads, and the peak over the phases of a step."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Final

from gpuplan.errors import InvalidSettingError
from gpuplan.estimators import engines, runtime
from gpuplan.estimators.activations import (
    ActivationSettings,
    checkpoint_bytes_per_token,
    layer_bytes_per_token,
    op_selective_bytes_per_token,
    stack_shapes,
)
from gpuplan.estimators.lora import lora_targets
from gpuplan.specs.gpu import GPU
from gpuplan.specs.model import ModelSpec, ParamGroup, family_of
from gpuplan.specs.precision import checkpoint_format, kept_unquantised, storage_format
from gpuplan.specs.workload import Workload

# Linear layers inside the blocks: what weight-only quantisation (GPTQ, AWQ, bitsandbytes int8 /
# NF4, fp8 checkpoints) converts. Embeddings, norms and the output head stay 16-bit (bitsandbytes
# skips lm_head by default: transformers' BitsAndBytesConfig llm_int8_skip_modules; GPTQ/AWQ
# quantise only the decoder layers).
QUANTISED_ROLES: Final = ("attention", "mlp", "expert")
# ggml/GGUF bits per weight are whole-file averages (embeddings and output included)
GGUF: Final = ("q8_0", "q4_0", "q6_k", "q5_k_m", "q5_k_s", "q4_k_m", "q4_k_s", "q3_k_m", "q3_k_l", "q3_k_s", "q2_k")

# Bytes per logit element while the loss runs, by loss implementation (all per vocab entry x token):
# upcast (transformers ForCausalLMLoss: logits.float() then cross_entropy): the 16-bit logits
#   the model returns, the fp32 log-softmax cross_entropy saves, and one fp32 transient (the
#   upcast copy in forward, the fp32 gradient in backward);
# chunked (torchtune CEWithChunkedOutputLoss, 8 chunks): 16-bit logits + fp32 log-softmax of all
#   chunks, the fp32 transient only one chunk at a time;
# fused (Liger fused linear cross entropy): logits exist one chunk at a time.
LOSS_CHUNKS: Final = 8


def fuses_upcast(loss_impl: str, act_bytes: float, compiled: bool) -> bool:
    """torch.compile over transformers-style upcast loss in 16-bit training: no fp32 copy (below)."""
    return compiled and loss_impl == "upcast" and act_bytes < 4


def logit_bytes(loss_impl: str, act_bytes: float, compiled: bool = False) -> float:
    if compiled and loss_impl == "chunked":
        # torch.compile fuses each chunk's upcast + cross-entropy: the 16-bit logits and one fp32
        # chunk remain (torchtune README "Optimization flags": chunked CE under compile saves 8.1
        # of 51.0 GiB on Llama 3.2 3B, 2 x 4096 tokens, i.e. ~8 bytes per logit)
        return act_bytes + 4.0 / LOSS_CHUNKS
    if fuses_upcast(loss_impl, act_bytes, compiled):
        # torch.compile fuses the upcast into the log-softmax and the gradient's cast into its
        # backward (torchtitan compiles its loss with the model: components/loss.py@e7c0cae9): the
        # 16-bit logits, the fp32 log-softmax saved for backward and the 16-bit gradient remain,
        # no fp32 copy. torchtitan's A/B of compile alone, Llama 3.1 8B, 2 x 8192 tokens a GPU
        # (benchmarks/llama3_h100_202412_torchtitan.md@820504e2 tables 1 and 3: 82.4 -> 77.0 GiB on
        # 8 GPUs, 67.0 -> 62.0 GiB on 128) saves 2.6-2.8 B a logit; this form saves 2.
        return act_bytes + 4.0 + act_bytes
    if act_bytes >= 4:  # fp32 training: no upcast copy
        return {"upcast": 8.0, "chunked": 4.0 + 4.0 / LOSS_CHUNKS, "fused": 8.0 / LOSS_CHUNKS}[loss_impl]
    return {
        "upcast": act_bytes + 4.0 + 4.0,
        "chunked": act_bytes + 4.0 + 4.0 / LOSS_CHUNKS,
        "fused": (act_bytes + 4.0) / LOSS_CHUNKS,
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
    kv_budget_bytes: float  # what is left for the KV cache (0 when nothing is)
    kv_bytes_per_token: float
    max_tokens: int
    max_sequences: int  # of input_len + output_len tokens each
    # one sequence of input_len + output_len tokens in whole blocks: what vLLM's startup check needs
    # (max_memory_usage_bytes at max_model_len, which `gpuplan launch` sets to that length)
    sequence_kv_bytes: float = 0.0
    # sequence_kv_bytes less the budget before it is floored at 0, when positive: the bytes the KV
    # budget lacks to hold one sequence (0 when it holds one)
    kv_short_bytes: float = 0.0
    # the engine's display name where it preallocates its KV cache (runtime.PREALLOCATING_ENGINES),
    # None where it does not: then this view is vLLM's, for reference, and does not decide the fit
    engine: str | None = "vLLM"

    @property
    def limit(self) -> str:
        """What binds when the budget cannot hold one sequence (results ServingMemory.limit: the same words)."""
        return f"{self.engine or 'vLLM'}'s KV cache at gpu_memory_utilization {self.gpu_memory_utilization:g}"


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
        """What the driver lets a process allocate (runtime.USABLE_MEMORY_FRACTION of what the card
        shows with the workload's ECC setting)."""
        return None if self.gpu is None else runtime.usable_memory_bytes(self.gpu, self.workload.ecc)

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
        return 0.0 if cap is None else self._spill_within(cap)

    def _spill_within(self, cap: float) -> float:
        paged = self.paged_bytes
        return 0.0 if paged <= 0 else min(paged, max(self.per_gpu_bytes - cap, 0.0))

    @property
    def on_card_bytes(self) -> float:
        """What stays on the card: per_gpu_bytes less the paged states spilled to host RAM."""
        return self.per_gpu_bytes - self.paged_spill_bytes

    @property
    def kv_short_bytes(self) -> float:
        """Bytes a preallocating engine's KV budget lacks to hold one sequence of input_len +
        output_len tokens (0 when it holds one, or where the engine does not preallocate). vLLM
        refuses to start on such a budget (runtime.PREALLOCATING_ENGINES), whatever the bytes."""
        s = self.serving
        return s.kv_short_bytes if s is not None and s.engine is not None else 0.0

    @property
    def fits(self) -> bool | None:
        """Whether the job runs: everything but the paged states within the usable memory (paged
        states that do not fit spill to host RAM, at a time cost the step estimate counts), and a
        preallocating engine's KV budget holds one sequence (kv_short_bytes)."""
        cap = self.capacity_bytes
        return None if cap is None else self.fits_within(cap)

    def fits_within(self, cap: float) -> bool:
        """`fits` against `cap` usable bytes: everything but the spilled paged states within it and,
        for a preallocating engine, its KV budget holding one sequence (a paged-KV engine's start-up
        check decides: the weights, the profile run and one sequence's KV within
        gpu_memory_utilization of the card; a larger batch queues, QA F17). A fix search asks it of
        one shared training estimate for every GPU type's capacity (planner/screening.first_fit)."""
        return self.kv_short_bytes <= 0 and self.per_gpu_bytes - self._spill_within(cap) <= cap

    @property
    def headroom_bytes(self) -> float | None:
        cap = self.capacity_bytes
        return None if cap is None else cap - self.on_card_bytes

    def breakdown(self) -> dict[str, float]:
        return {line.name: line.bytes for line in self.lines}


# ---------------------------------------------------------------------------------------------


def act_bytes(precision: str) -> float:
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
    return fmt in GGUF or (g.linear is not None and g.role in QUANTISED_ROLES)


def weight_bytes(groups: list[ParamGroup], fmt: str, other_bytes: float, kept: frozenset[str] = frozenset()) -> float:
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


def tokens_per_sample(model: ModelSpec, w: Workload) -> int:
    if model.kind == "vision-transformer":
        return model.max_position_embeddings or w.seq_len  # patches + [CLS]
    return w.seq_len


def has_lm_head(model: ModelSpec) -> bool:
    return any(g.role == "head" and g.linear is not None and g.linear[1] == model.vocab_size for g in model.groups)


def autocast(w: Workload) -> bool:
    """PyTorch AMP: fp32 parameters with 16-bit autocast (mixed precision without ZeRO)."""
    return w.precision in ("fp16", "bf16", "fp8") and w.master_weights == "fp32" and w.zero == 0


def norm_bytes(model: ModelSpec, w: Workload, b: float) -> float:
    if w.compile or b >= 4:
        return b
    fam = family_of(model.model_type)
    if fam is not None and fam.norm_upcasts:  # its RMSNorm upcasts to fp32 in eager PyTorch (LlamaRMSNorm and kin)
        return 4.0 + b
    return 4.0 if autocast(w) else b


# leaf names of output projections (attention) and down projections (MLP) across the families
ATTN_OUT_LEAVES: Final = ("o_proj", "out_proj", "dense", "c_proj", "o", "output")
MLP_DOWN_LEAVES: Final = ("down_proj", "w2", "c_proj", "dense_4h_to_h", "wo", "dense", "fc2", "fc_out")


def bnb_keeps_inputs(w: Workload) -> bool:
    """Whether QLoRA's frozen 4-bit linears keep their inputs for backward: bitsandbytes' MatMul4Bit
    saves its input A whenever A needs a gradient, frozen weight or not
    (bitsandbytes-foundation/bitsandbytes:bitsandbytes/autograd/_functions.py@60a0d8a5084f4f592ace550aa683bcf5a449c82c
    MatMul4Bit.forward: ctx.tensors = (A, B)); torchao's LinearNF4 (torchtune) saves only the weight
    (pytorch/ao:torchao/dtypes/nf4tensor.py@38cb64cc5d17f17da1319625310fe5d406dd5370)."""
    return w.task == "qlora" and w.qlora_kernel == "bitsandbytes"


def kept_inputs(model: ModelSpec, w: Workload) -> dict[str, Any]:
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
    if bnb_keeps_inputs(w):
        attn_in = mlp_in = down_in = True
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
    b = act_bytes(w.precision)
    cfg = ActivationSettings(
        bytes_per_value=b,
        checkpointing=w.activation_checkpointing,
        flash=w.attention_impl != "eager",
        tp=w.tp,
        sequence_parallel=w.sequence_parallel,
        norm_bytes=norm_bytes(model, w, b),
        **kept_inputs(model, w),
    )
    seq = tokens_per_sample(model, w)
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
        if w.activation_checkpointing == "selective-op":
            kept += op_selective_bytes_per_token(s, cfg) * tokens * s.layers * in_flight
        elif w.activation_checkpointing == "full":
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
        "selective-op": "block input, every other matmul output and attention output kept (torchtitan op-level SAC)",
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
    if has_lm_head(model):
        per = logit_bytes(w.loss_impl, b, w.compile)
        logits = tokens * model.vocab_size * per / w.tp
        note = {
            "upcast": f"batch x seq x vocab ({model.vocab_size}) at {per:g} B: 16-bit logits, fp32 log-softmax, "
            + (
                "16-bit gradient (torch.compile fuses the upcast)"
                if fuses_upcast(w.loss_impl, b, w.compile)
                else "fp32 copy (transformers upcasts logits)"
            ),
            "chunked": f"batch x seq x vocab at {per:g} B: logits + fp32 log-softmax, upcast in 8 chunks (torchtune)",
            "fused": f"batch x seq x vocab at {per:g} B: fused linear cross-entropy keeps one chunk",
        }[w.loss_impl]
        lines.append(MemoryLine("logits and loss", logits, note, "activation"))
    return lines, host


def check_parallel(model: ModelSpec, w: Workload) -> None:
    if w.tp > 1 and not model.tp_splits_heads(w.tp):
        raise InvalidSettingError(model.tp_heads_rule(w.tp))
    if w.pp > 1 and model.num_layers < w.pp:
        raise InvalidSettingError(f"The 'pp' parameter must be at most num_layers={model.num_layers}. Got {w.pp}.")
    if w.ep > 1 and not model.is_moe:
        raise InvalidSettingError(f"ep={w.ep} needs a mixture-of-experts model; {model.name} is dense.")
    if w.ep > 1 and model.num_experts % w.ep:
        raise InvalidSettingError(f"ep={w.ep} must divide the {model.num_experts} experts.")


def runtime_lines(allocated: float, n: int, gpu: GPU | None, lazy: bool = True, ggml: bool = False) -> list[MemoryLine]:
    """The runtime's rows; `ggml`: a llama.cpp / Ollama process, for which the PyTorch-measured
    figures are kept (no ggml measurement at hand) and the rows say so."""
    context = runtime.CUDA_CONTEXT_BYTES if lazy else runtime.CUDA_CONTEXT_EAGER_BYTES
    slack = f"{runtime.ALLOCATOR_SLACK_FRACTION:.0%} of allocated: {runtime.ALLOCATOR_SLACK_SOURCE}"
    ctx = runtime.CUDA_CONTEXT_SOURCE if lazy else "all kernels loaded eagerly (CUDA < 11.7): 1343 MiB measured"
    if ggml:
        slack = (
            f"{runtime.ALLOCATOR_SLACK_FRACTION:.0%} of allocated: PyTorch's allocator slack, kept for ggml's CUDA pool"
        )
        ctx = "CUDA context as measured under PyTorch (~400 MB with lazy loading), kept for ggml's"
    lines = [
        MemoryLine("allocator slack", allocated * runtime.ALLOCATOR_SLACK_FRACTION, slack, "runtime"),
        MemoryLine(
            "CUDA context and kernels",
            context + runtime.cublas_workspace_bytes(gpu.cc if gpu else None),
            ctx + "; + the cuBLAS workspace",
            "runtime",
        ),
    ]
    # llama.cpp / Ollama open no NCCL communicator: its layer split forwards activations with plain
    # device copies (no collective), and its CUDA builds link no NCCL (noonghunna/club-3090#928,
    # 2026-08: no NCCL symbol or linkage in llama-server b10236)
    if n > 1 and not ggml:
        lines.append(MemoryLine("NCCL buffers", runtime.NCCL_BYTES, runtime.NCCL_SOURCE, "runtime"))
    return lines


def finish(
    model: ModelSpec,
    w: Workload,
    gpu: GPU | None,
    phases: dict[str, list[MemoryLine]],
    host: float,
    trainable: int,
    notes: list[str],
    serving: ServingCapacity | None = None,
    runtime_rows: list[MemoryLine] | None = None,
) -> MemoryEstimate:
    """The estimate from each phase's lines: the largest phase plus the runtime's lines (allocator
    slack, CUDA context, NCCL; `runtime_rows`: an engine's own, which sizes its pool to the rest)."""
    totals = {name: sum(x.bytes for x in lines) for name, lines in phases.items()}
    peak_phase = max(totals, key=lambda k: totals[k])
    at_peak = [x for x in phases[peak_phase] if x.bytes > 0 or x.kind == "model"]
    allocated = sum(x.bytes for x in at_peak if x.kind != "paged")
    rt = (
        runtime_rows
        if runtime_rows is not None
        else runtime_lines(
            allocated,
            w.num_gpus,
            gpu,
            w.cuda_lazy_loading,
            not w.is_training and w.engine in engines.LAYER_SPLIT_ENGINES,
        )
    )
    lines = at_peak + rt
    reserved = allocated + (rt[0].bytes if runtime_rows is None else 0.0)
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
