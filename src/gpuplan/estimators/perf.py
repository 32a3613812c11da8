"""Step time, throughput and latency from the model's operators: a roofline per operator.

Each operator (a linear layer's GEMM, attention, the elementwise work of a layer, the loss, the
optimizer step, a collective) gets a roofline time from FLOPs / (peak x eta) and bytes /
(bandwidth x eta) (Williams et al., "Roofline", CACM 2009; the corner smoothed, see ROOF_P), with
the etas of `efficiency.py`. A training step adds
forward, backward (dgrad + wgrad: 2x forward; no wgrad for frozen weights, so LoRA's backward is
about 1x), recompute under checkpointing, the optimizer step and the communication that compute
does not hide. Inference is a prefill (all prompt tokens at once: compute-bound) and a decode
step per output token (weights and KV cache read once per step: bandwidth-bound at small batch).

Sources of the operator accounting: Narayanan et al. 2021 (Megatron-LM, sec. 5: 2x backward,
recompute); Korthikanti et al. 2022 (selective recompute, TP/SP communication); Dao 2023
(FlashAttention-2 FLOPs); Pope et al. 2022 ("Efficiently Scaling Transformer Inference": decode
is weight- and KV-bandwidth bound, prefill compute-bound); PaLM appendix B (MFU).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Final

from gpuplan.errors import InvalidSettingError
from gpuplan.estimators import comm, runtime
from gpuplan.estimators import efficiency as eff
from gpuplan.estimators.activations import StackShape, attention_dropout, stack_shapes
from gpuplan.estimators.lora import lora_targets
from gpuplan.estimators.memory import (
    ATTN_OUT_LEAVES,
    MLP_DOWN_LEAVES,
    InferenceWeights,
    estimate_memory,
    inference_weights,
    is_quantised,
    kv_shards,
)
from gpuplan.estimators.optimizer import OPTIMIZER_INFO
from gpuplan.estimators.parallel import MicroProfile, compose, stage_share
from gpuplan.specs.cluster import Cluster, implied_cluster
from gpuplan.specs.gpu import GPU
from gpuplan.specs.model import ModelSpec, ParamGroup
from gpuplan.specs.precision import FP4_TENSOR_FORMATS, compute_peak, fp4_peak, storage_format
from gpuplan.specs.workload import Workload

# Engines whose decode runs under CUDA graphs with fused kernels (vLLM, TensorRT-LLM, SGLang,
# MLC and llama.cpp capture graphs for decode); transformers' generate runs eager PyTorch.
GRAPH_ENGINES: Final = frozenset({"vllm", "tensorrt-llm", "sglang", "mlc", "llama.cpp"})
# Prefill logits: serving engines compute the lm_head for the last position only, and so does
# transformers' generate (generation/utils.py: logits_to_keep=1 for every model whose forward takes
# it, the Llama, Mistral, Qwen, Gemma... families); a plain forward() computes every position.
LAST_TOKEN_LOGITS_ENGINES: Final = GRAPH_ENGINES | {"transformers"}
# Most sequences one engine step batches by default: vLLM max_num_seqs (runtime.py), TensorRT-LLM
# trtllm-bench max batch size 2048 (TensorRT-LLM docs, perf-benchmarking "max_batch_size").
ENGINE_MAX_BATCH: Final = {"tensorrt-llm": 2048}
# Serving engines keep one batch per pipeline stage in flight, so no stage idles: vLLM's executors
# run pipeline_parallel_size batches concurrently (vllm/v1/executor/ray_executor.py,
# max_concurrent_batches), TensorRT-LLM and SGLang split the running batch into micro-batches.
# llama.cpp's layer split passes one batch through the stages in turn.
PP_INFLIGHT_ENGINES: Final = frozenset({"vllm", "tensorrt-llm", "sglang"})

# Bytes per logit through the loss, forward and backward, per vocabulary entry and token
# (transformers: logits.float() then cross_entropy: write bf16, upcast write fp32, softmax read and
# write fp32, gradient write fp32 and bf16 -> 2+4+4+4+4+2 = 20; torch.compile / Liger fuse the
# chain into one read and one write of 16-bit logits plus an fp32 pass -> 8).
LOSS_BYTES_PER_LOGIT: Final = {"upcast": 20.0, "chunked": 20.0, "fused": 8.0}
LOSS_BYTES_PER_LOGIT_COMPILED: Final = 8.0

# Optimizer step traffic, bytes per trainable parameter (read + write of each state, read of the
# gradient): AdamW with fp32 master: p 4+4, m 4+4, v 4+4, g 4 = 28 (+2 to write a 16-bit copy when
# the model keeps one); 8-bit states 1+1 each (bitsandbytes blockwise); SGD p 4+4, g 4 (+8 momentum).
OPTIMIZER_BYTES: Final = {
    "adamw": 28.0,
    "adamw-foreach": 28.0,
    "adam": 28.0,
    "adamw-8bit": 16.0,
    "paged-adamw": 28.0,
    "paged-adamw-8bit": 16.0,
    "sgd": 12.0,
    "sgd-momentum": 20.0,
    "adafactor": 13.0,
    "lion": 20.0,
    "lion-8bit": 14.0,
    "paged-lion-8bit": 14.0,
}
# Pure 16-bit training (no fp32 master; torchtune, LitGPT bf16-true): every state is 16-bit.
OPTIMIZER_BYTES_PURE16: Final = 14.0

# CPU optimizer (ZeRO-Offload): DeepSpeed's CPU-Adam updates about 1e9 parameters/s on a
# two-socket host (Ren et al. 2021, ZeRO-Offload, sec. 5.2: 1.5B-parameter step in ~1.3-1.5 s with
# CPU-Adam; we use 1e9/s), plus moving fp32 gradients out and 16-bit parameters back over PCIe.
CPU_ADAM_PARAMS_PER_S: Final = 1.0e9

# NF4 dequantisation (bitsandbytes): read 0.5 B + write a 2 B bf16 copy of each base weight per
# use (QLoRA runs the GEMM on the dequantised copy; Dettmers et al. 2023, sec. 3).
NF4_DEQUANT_BYTES: Final = 2.5

# Weight-only quantised GEMMs (int4/int8 weights, 16-bit activations: Marlin, AWQ, GPTQ, GGUF
# kernels) dequantise in the inner loop; near the full fp16 rate up to batch ~16-32, then below
# it (Frantar et al. 2024, Marlin, fig. 1). Share of the fp16 GEMM efficiency at large batch.
WEIGHT_ONLY_COMPUTE_SHARE: Final = 0.85

# Linear layers Megatron splits along their input under tensor parallelism (row-parallel).
ROW_PARALLEL_LEAVES: Final = frozenset(ATTN_OUT_LEAVES) | frozenset(MLP_DOWN_LEAVES)


# The roofline's corner: time = (t_compute^p + t_memory^p)^(1/p). Near the ridge a kernel reaches
# neither peak (loads and math overlap imperfectly), so the plain max is optimistic there; far from
# it the larger term dominates. p = 2, calibrated on the serving-throughput and prefill rows (their
# median error falls from 14.9% to 13.3%; compute-bound training moves < 1%).
ROOF_P: Final = 2.0
# Weight-only quantised matrix-vector products (decode below GEMV_ROWS: int8/int4/GGUF weights
# unpacked and scaled in the kernel) stream their weights at a smaller share of the bandwidth than
# a 16-bit GEMV: the dequantising ALU work and the scale loads sit in the streaming loop. 0.85 is
# calibrated on the single-GPU gpt-fast int8/int4 and llama.cpp q4_0 decode rows (+13..+38% at
# the 16-bit share). MLC's TVM-generated kernels keep the full share: in MLC's own table
# (mlc-ai/llm-perf-bench README) its q4f16_1 7B decodes 1.36x faster than llama.cpp's q4_0 on the
# same RTX 4090, at the same 4.5 bits a weight.
WEIGHT_ONLY_GEMV_BW_SHARE: Final = 0.85
WEIGHT_ONLY_GEMV_BW_SHARE_BY_ENGINE: Final = {"mlc": 1.0}
# Fewer rows than this: a matrix-vector product (decode at small batch) runs on CUDA-core FMAs
# over the streamed weights (cuBLAS/Marlin GEMV paths), not in tensor-core tiles.
GEMV_ROWS: Final = 8.0


@dataclass(frozen=True)
class Op:
    """One operator (or a family of them) of a step, with its roofline verdict."""

    name: str
    phase: str  # forward | backward | recompute | optimizer | communication | prefill | decode | launch
    flops: float
    bytes: float
    time_s: float
    bound: str  # compute | memory | communication | launch


@dataclass(frozen=True)
class TrainingTime:
    step_time_s: float  # one optimizer step (all micro-batches), per GPU
    tokens_per_step: float  # all GPUs
    tokens_per_s: float  # all GPUs together
    tokens_per_s_per_gpu: float
    mfu: float
    hfu: float
    model_flops_per_token: float  # 6N + attention (PaLM appendix B), forward + backward
    time_to_train_s: float | None
    train_tokens: float | None
    bottleneck: str
    compute_s: float
    exposed_comm_s: float
    bubble_s: float
    ops: tuple[Op, ...]
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class InferenceTime:
    ttft_s: float  # prefill of the whole batch (static batching: every sequence's first token)
    ttft_single_s: float  # prefill of one request (continuous batching admits requests one by one)
    tpot_s: float  # mean decode step over the output
    output_tokens_per_s: float  # static batch of `batch_size` per replica, all GPUs together
    request_latency_s: float
    batch: int  # sequences per data-parallel replica (all of them when num_gpus = tp x pp)
    max_batch: int  # most sequences the KV budget (or the engine) allows, per replica
    best_batch: int
    best_output_tokens_per_s: float  # continuous batching within the KV capacity, all replicas
    prefill_tokens_per_s: float
    bottleneck: str  # of a decode step at the workload's batch
    prefill_ops: tuple[Op, ...]
    decode_ops: tuple[Op, ...]
    notes: tuple[str, ...] = ()
    replicas: int = 1  # data-parallel replicas (num_gpus / (tp x pp)), each serving `batch` sequences

    @property
    def running_ops(self) -> tuple[Op, ...]:
        """What a busy GPU runs most of the time: decode steps, or the single forward pass of a
        model that does not generate (CNN, encoder)."""
        return self.decode_ops or self.prefill_ops


@dataclass
class _Ctx:
    """What every operator of one workload on one GPU needs."""

    gpu: GPU
    model: ModelSpec
    w: Workload
    runs_as: str  # precision the GEMMs run at
    peak: float
    gemm_eff: float
    act_b: float  # activation bytes per value
    bw: float  # device bandwidth, bytes/s
    fused: bool
    fp32_peak: float  # CUDA-core rate (GEMV)
    peak16: float  # 16-bit tensor rate: attention runs at it whatever the GEMMs' precision
    bw_eff: float = eff.KERNEL_BW_EFF  # share of bw a streaming kernel reaches (measured, if calibrated)
    notes: list[str] = field(default_factory=list)
    pp: int = 1  # pipeline stages the operators are split over (training builds at 1, then composes)
    weights: InferenceWeights = field(default_factory=lambda: InferenceWeights("bf16"))  # inference weights


def _context(model: ModelSpec, w: Workload, gpu: GPU) -> _Ctx:
    prec: str = w.precision
    if w.is_training and prec == "fp8" and not gpu.supports("fp8"):
        raise InvalidSettingError(
            f"fp8 training needs FP8 tensor cores; {gpu.name} has none (FP8 needs compute capability 8.9+). "
            "Use precision: bf16 (or fp16 where there is no bf16)."
        )
    notes: list[str] = []
    if prec == "bf16" and not gpu.supports("bf16") and gpu.supports("fp16"):
        # no BF16 tensor cores (pre-Ampere): people run fp16 (with loss scaling when training)
        prec = "fp16"
        notes.append(
            f"{gpu.name} has no BF16 tensor cores: timed as fp16" + (" with loss scaling" if w.is_training else "")
        )
    weights = InferenceWeights(w.effective_weight_dtype)
    if not w.is_training:
        weights = inference_weights(model, w)
        fmt = weights.fmt
        if fmt in FP4_TENSOR_FORMATS and fp4_peak(gpu) is not None and prec in ("bf16", "fp16", "fp8"):
            prec = "fp4"  # W4A4: NVFP4 weights and activations on FP4 tensor cores (Blackwell)
        elif fmt == "fp8" and gpu.supports("fp8") and prec in ("bf16", "fp16", "fp8"):
            prec = "fp8"  # W8A8: fp8 weights with fp8 activations run on FP8 tensor cores
        elif prec == "fp8" and not gpu.supports("fp8"):
            prec = "bf16" if gpu.supports("bf16") else "fp16"
    if model.kind == "cnn" and prec == "fp32" and gpu.supports("tf32"):
        # cuDNN convolutions run in TF32 unless told otherwise: PyTorch's
        # torch.backends.cudnn.allow_tf32 and TensorFlow's tf32 execution both default to on (Ampere+)
        prec = "tf32"
        notes.append(f"fp32 convolutions run in TF32 on {gpu.name} (the frameworks' default)")
    peak = (fp4_peak(gpu) if prec == "fp4" else None) or compute_peak(gpu, prec)
    if peak.reason:
        notes.append(peak.reason)
    if _nchw_transposes(model, w, peak.runs_as):
        notes.append(
            "NCHW activations: cuDNN transposes each 16-bit convolution's input and output "
            "(channels_last: true, i.e. model.to(memory_format=torch.channels_last), removes them)"
        )
    g = eff.gemm_efficiency(gpu, peak.runs_as, w.engine)
    act_b = 4.0 if w.precision in ("fp32", "tf32") else 2.0
    engine_fused = (not w.is_training) and w.engine in GRAPH_ENGINES
    return _Ctx(
        gpu=gpu,
        model=model,
        w=w,
        runs_as=peak.runs_as,
        peak=peak.flop_per_s,
        gemm_eff=g.value,
        act_b=act_b,
        bw=gpu.memory_bandwidth_bytes_per_s,
        fused=w.compile or engine_fused,
        fp32_peak=gpu.peak_flop_per_s.get("fp32") or peak.flop_per_s,
        peak16=compute_peak(gpu, "bf16" if gpu.supports("bf16") else "fp16").flop_per_s,
        bw_eff=eff.bandwidth_efficiency(gpu),
        notes=notes,
        pp=w.pp,
        weights=weights,
    )


def _roof(name: str, phase: str, flops: float, nbytes: float, peak_eff: float, bw_eff: float) -> Op:
    """One operator's time on the (smoothed) roofline, labelled by the larger of its two terms."""
    t_c = flops / peak_eff if flops > 0 else 0.0
    t_m = nbytes / bw_eff if nbytes > 0 else 0.0
    t = (t_c**ROOF_P + t_m**ROOF_P) ** (1.0 / ROOF_P)
    return Op(name, phase, flops, nbytes, t, "compute" if t_c >= t_m else "memory")


def _gemm(
    c: _Ctx,
    name: str,
    phase: str,
    m: float,
    n: float,
    k: float,
    count: float,
    w_bytes: float,
    weight_only: bool = False,
) -> Op:
    """`count` GEMMs of (m x k) @ (k x n) reading a (k x n) weight at `w_bytes` per element."""
    flops = 2.0 * m * n * k * count
    nbytes = count * (n * k * w_bytes + (m * k + m * n) * c.act_b)
    bw = c.bw * c.bw_eff
    if m < GEMV_ROWS:
        # a matrix-vector product: CUDA-core FMAs over the streamed weights, no tensor-core tiles
        rate = c.fp32_peak * eff.FP32_CORE_EFF
        if weight_only:
            bw *= WEIGHT_ONLY_GEMV_BW_SHARE_BY_ENGINE.get(c.w.engine or "", WEIGHT_ONLY_GEMV_BW_SHARE)
    else:
        e = c.gemm_eff * eff.gemm_size_factor(m, n, k) * (WEIGHT_ONLY_COMPUTE_SHARE if weight_only else 1.0)
        rate = c.peak * max(e, 1e-6)
    return _roof(name, phase, flops, nbytes, rate, bw)


def compute_roof(model: ModelSpec, w: Workload, gpu: GPU) -> tuple[str, float]:
    """(precision the GEMMs run at, its dense peak FLOP/s) for this workload on this GPU: the
    estimate's own choice (bf16 as fp16 without BF16 tensor cores, fp8 weights as W8A8 where FP8
    tensor cores exist), the compute roof of a roofline plot. Attention runs at the 16-bit rate."""
    c = _context(model, w, gpu)
    return c.runs_as, max(c.peak, c.peak16)


def _avg_context(seq: float, window: float | None, causal: bool) -> float:
    """Mean keys a query attends to: (s+1)/2 under a causal mask, s without; a window caps it."""
    if not causal:
        return seq if window is None else min(seq, window)
    if window is None or window >= seq:
        return (seq + 1) / 2
    return window - window * window / (2 * seq)  # ramp up to the window, then flat


def _shard_dims(g: ParamGroup, tp: int) -> tuple[float, float]:
    """(in, out) of one TP shard of a linear group: row-parallel layers (attention output, MLP
    down: the leaves memory.py keeps too) split their input, column-parallel ones their output;
    the MoE router is replicated."""
    assert g.linear is not None
    if g.role == "router":
        return float(g.linear[0]), float(g.linear[1])
    if g.name.rsplit(".", 1)[-1] in ROW_PARALLEL_LEAVES:
        return g.linear[0] / tp, float(g.linear[1])
    return float(g.linear[0]), g.linear[1] / tp


def _stage_share(c: _Ctx, role: str) -> float:
    """Share of a group's layers on the busiest pipeline stage (the one holding the lm_head)."""
    if role in ("head", "embedding", "position"):
        return 1.0
    return 1.0 / c.pp


def _elementwise_bytes(s: StackShape, c: _Ctx) -> float:
    """Bytes per token per layer of norms, residual adds, rotary and the MLP activation, forward,
    each tensor read and written once (fused): 2 norms (2d each), 2 residual adds (3d each),
    rotary on q and k, and the activation (gated: read gate+up, write one; else read + write)."""
    d = s.d
    act = 1.5 * s.mlp_up if s.gated else 2.0 * s.mlp_up
    values = 4 * d + 6 * d + 2 * (s.q + s.k) + act
    return values * c.act_b * (1.0 if c.fused else eff.EAGER_ELEMENTWISE_FACTOR)


# fp32 softmax: autocast runs softmax in fp32 (torch.amp autocast op reference, "CUDA ops that can
# autocast to float32") and transformers' eager attention calls softmax(dtype=torch.float32)
_SOFTMAX_B: Final = 4.0


def eager_score_bytes(act_b: float, dropout: bool) -> tuple[float, float]:
    """Bytes moved per attention-score element by eager (unfused) attention, (forward, backward).

    The op sequence is transformers' eager_attention_forward (models/llama/modeling_llama.py) and
    BERT's self-attention (NVIDIA DeepLearningExamples PyTorch/LanguageModeling/BERT/modeling.py),
    each op a kernel that reads and writes the whole s x s tensor. Forward: QK^T writes the scores
    (a), the scale reads and writes them (2a), the mask add too (2a), softmax reads a and writes
    fp32, the cast back reads fp32 and writes a, dropout (training, p > 0) reads and writes a plus a
    1-byte mask, and A.V reads the probabilities (a). Backward, in autograd's order: dP written (a),
    dropout's backward (2a + 1), the cast's (a + 4), softmax's reads the fp32 grad and output and
    writes a, the scale's (2a), dQ and dK each read dS (2a), dV reads the probabilities (a)."""
    a = act_b
    cast = a < _SOFTMAX_B
    drop = 2 * a + 1 if dropout else 0.0
    fwd = a + 2 * a + 2 * a + (a + _SOFTMAX_B) + ((_SOFTMAX_B + a) if cast else 0.0) + drop + a
    bwd = a + drop + ((a + _SOFTMAX_B) if cast else 0.0) + (2 * _SOFTMAX_B + a) + 2 * a + 2 * a + a
    return fwd, bwd


# Serving engines that run a Hopper-native attention kernel on SM90: vLLM picks FA3 there
# (vllm/v1/attention/backends/fa_utils.py get_flash_attn_version: 3 when the capability is 9.x),
# TensorRT-LLM its own Hopper FMHA kernels, SGLang FA3 (its default backend on Hopper).
FA3_ENGINES: Final = ("vllm", "tensorrt-llm", "sglang")


def _eager_scores_op(c: _Ctx, phase: str, elements: float, dropout: bool, backward: bool = False) -> Op:
    """The kernels between eager attention's two matmuls, over `elements` materialised scores."""
    per = eager_score_bytes(c.act_b, dropout)[1 if backward else 0]
    return _roof("attention scores (eager softmax)", phase, 0.0, elements * per, 1.0, c.bw * eff.COPY_BW_EFF)


def _attn_kernel(c: _Ctx) -> str:
    """The attention kernel a workload runs: "eager", "fa3" (Hopper-native) or "fa2"."""
    w = c.w
    if w.attention_impl in ("eager", "fa3"):
        return w.attention_impl
    return "fa3" if not w.is_training and w.engine in FA3_ENGINES else "fa2"


def _attention_op(c: _Ctx, s: StackShape, tokens: float, seq: float, phase: str, backward: bool = False) -> list[Op]:
    """Attention for `tokens` queries over sequences of `seq` (per layer x layers on this stage):
    FlashAttention's one kernel, or eager attention's two batched matmuls plus the kernels that
    write, scale, mask, softmax (and drop) the materialised s x s scores in between."""
    causal = s.stack == "decoder"
    ctx = _avg_context(seq, s.window, causal)
    tp = c.w.tp
    layers = s.layers / c.pp
    kernel = _attn_kernel(c)
    eager = kernel == "eager"
    flops = 2.0 * tokens * ctx * (s.q + s.attn_out) / tp * layers
    nbytes = tokens * (2 * s.q + s.k + s.v) * c.act_b / tp * layers
    if backward:
        # FlashAttention's backward recomputes the scores; eager attention's reads the saved ones
        flops *= eff.ATTN_BWD_FLOP_RATIO if not eager else 2.0
        nbytes *= 2.0
    e = eff.attention_efficiency(c.gpu, backward, kernel) * eff.size_factor(seq)
    if c.runs_as == "fp32":
        e = eff.FP32_CORE_EFF * 0.5
    peak = c.peak if c.runs_as not in eff.EIGHT_BIT else c.peak16
    ops = [_roof("attention", phase, flops, nbytes, peak * e, c.bw * c.bw_eff)]
    if eager:
        # the whole s x s square is materialised (the causal mask only hides half of it)
        full = seq if s.window is None else min(seq, s.window)
        elements = tokens * full * max(s.heads, 1) / tp * layers
        ops.append(_eager_scores_op(c, phase, elements, attention_dropout(c.model) > 0, backward))
    return ops


# ---------------------------------------------------------------------------------------------
# Training
# ---------------------------------------------------------------------------------------------


def _trainable_params(model: ModelSpec, w: Workload) -> tuple[float, set[str], list[tuple[str, int, int, float]]]:
    """(trainable params, names of frozen linear groups, LoRA adapters (name, in, out, count))."""
    if w.task not in ("lora", "qlora"):
        return float(model.total_params), set(), []
    targets = lora_targets(model, w.lora_targets)
    adapters = [(g.name, g.linear[0], g.linear[1], g.count * g.active_fraction) for g in targets if g.linear]
    trainable = sum(w.lora_rank * (i + o) * n for _, i, o, n in adapters)
    frozen = {g.name for g in model.groups if g.linear is not None}
    return float(trainable), frozen, adapters


@dataclass(frozen=True)
class MicroOps:
    """One micro-batch's operators on one GPU with every layer on it (pp = 1), and its profile."""

    fwd: tuple[Op, ...]
    bwd: tuple[Op, ...]
    recompute: tuple[Op, ...]
    profile: MicroProfile
    peak: float  # the matmuls' dense peak, FLOP/s (MFU's denominator)
    notes: tuple[str, ...]


def _once(o: Op) -> bool:
    """Operators that run once per model, on the last pipeline stage: the head and the loss."""
    return o.name.startswith(("linear lm_head", "linear embed", "linear wte", "loss"))


def training_ops(model: ModelSpec, w: Workload, gpu: GPU) -> MicroOps:
    """The operators of one micro-batch (w.batch_size sequences) at w's tp, cp, ep, checkpointing
    and sequence parallelism, all layers on this GPU; `parallel.compose` splits them over stages."""
    c = _context(model, w, gpu)
    c.pp = 1
    tp, cp, ep = w.tp, w.cp, w.ep
    etp = w.expert_tp  # as set, Megatron-Core's default (tp), or 1 where ep folds over the TP ranks
    seq = float(w.seq_len)
    tokens = w.batch_size * seq / cp  # this rank's share of the micro-batch (TP ranks share it)
    trainable, frozen, adapters = _trainable_params(model, w)
    qlora = w.task == "qlora"
    w_bytes = c.act_b
    shapes = stack_shapes(model)

    fwd: list[Op] = []
    bwd: list[Op] = []
    for g in model.groups:
        if g.linear is None:
            continue
        # experts split over ep ranks: each holds count/ep of them, each GEMM split over etp ranks,
        # and receives the tokens of ep x etp ranks that hold 1/tp of the micro-batch each (sequence
        # parallel; Megatron-Core's MoE layer requires it with tp > 1): ep x etp / tp x the tokens
        is_expert = g.role == "expert"
        k_in, n_out = _shard_dims(g, etp if is_expert else tp)
        e = ep if is_expert else 1
        m = tokens * g.active_fraction * e * (etp / tp if is_expert else 1.0)
        count = g.count / e
        fwd.append(_gemm(c, f"linear {g.name}", "forward", m, n_out, k_in, count, w_bytes))
        # dgrad (grad of the input): m x k from m x n and the weight
        bwd.append(_gemm(c, f"linear {g.name} dgrad", "backward", m, k_in, n_out, count, w_bytes))
        if g.name not in frozen:
            # wgrad: k x n from the inputs (k x m) and output grads (m x n)
            bwd.append(_gemm(c, f"linear {g.name} wgrad", "backward", k_in, n_out, m, count, 0.0))
    for name, i, o, n in adapters:
        # x A (i -> r) then (x A) B (r -> o); backward: dgrad and wgrad of each (Hu et al. 2021)
        r = float(w.lora_rank)
        fwd.append(_gemm(c, f"lora {name} A", "forward", tokens, r, i, n, w_bytes))
        fwd.append(_gemm(c, f"lora {name} B", "forward", tokens, o, r, n, w_bytes))
        bwd.append(_gemm(c, f"lora {name} A grads", "backward", tokens, r, i, 2 * n, w_bytes))
        bwd.append(_gemm(c, f"lora {name} B grads", "backward", tokens, o, r, 2 * n, w_bytes))
    if qlora:
        base = sum(g.total for g in model.groups if g.linear is not None and g.role != "head") / tp
        fwd.append(_roof("nf4 dequantise", "forward", 0.0, base * NF4_DEQUANT_BYTES, 1.0, c.bw * eff.COPY_BW_EFF))
        bwd.append(_roof("nf4 dequantise", "backward", 0.0, base * NF4_DEQUANT_BYTES, 1.0, c.bw * eff.COPY_BW_EFF))

    attn_fwd: list[Op] = []
    attn_bwd: list[Op] = []
    for s in shapes:
        # under CP each rank's queries attend over the whole sequence (load-balanced causal chunks)
        attn_fwd += _attention_op(c, s, tokens, seq, "forward")
        attn_bwd += _attention_op(c, s, tokens, seq, "backward", backward=True)
        ew = _elementwise_bytes(s, c) * tokens * s.layers / (tp if w.sequence_parallel else 1)
        fwd.append(_roof("norms, activations, residuals", "forward", 0.0, ew, 1.0, c.bw * eff.COPY_BW_EFF))
        bwd.append(_roof("norms, activations, residuals", "backward", 0.0, 2 * ew, 1.0, c.bw * eff.COPY_BW_EFF))
    fwd += attn_fwd
    bwd += attn_bwd
    if any(g.role == "head" and g.linear is not None for g in model.groups):
        per_logit = LOSS_BYTES_PER_LOGIT_COMPILED if w.compile else LOSS_BYTES_PER_LOGIT[w.loss_impl]
        loss_bytes = tokens * model.vocab_size / tp * per_logit
        fwd.append(_roof("loss (softmax cross-entropy)", "forward", 0.0, loss_bytes, 1.0, c.bw * eff.COPY_BW_EFF))

    recompute: list[Op] = []
    if w.activation_checkpointing == "full":
        recompute = [Op(o.name, "recompute", o.flops, o.bytes, o.time_s, o.bound) for o in fwd if not _once(o)]
    elif w.activation_checkpointing == "selective":
        recompute = [Op(o.name, "recompute", o.flops, o.bytes, o.time_s, o.bound) for o in attn_fwd]

    per_param = OPTIMIZER_BYTES.get(w.optimizer, 28.0) if w.master_weights == "fp32" else OPTIMIZER_BYTES_PURE16
    offload_s = 0.0
    if w.offload != "none":
        # CPU-Adam per parameter, plus fp32 gradients out and 16-bit parameters back over PCIe
        offload_s = 1.0 / CPU_ADAM_PARAMS_PER_S + 6.0 / comm.host_link_bandwidth(gpu)

    def total(ops: list[Op], once: bool) -> float:
        return sum(o.time_s for o in ops if _once(o) == once)

    expert = float(sum(g.total for g in model.groups if g.role == "expert"))
    expert_trainable = expert if w.task in ("pretrain", "finetune") else 0.0
    layers = sum(s.layers for s in shapes)
    kernels = _kernels_per_layer(model) * layers * (3 + (1 if recompute else 0))
    launch = _launch_s(not w.compile)
    d = model.hidden_size
    kv = sum((s.k + s.v) * s.layers for s in shapes)
    moe_layers = model.moe_layers
    k_routed = max(model.experts_per_token, 1)
    profile = MicroProfile(
        layer_fwd_s=total(fwd, False),
        layer_bwd_s=total(bwd, False),
        layer_rec_s=total(recompute, False),
        once_fwd_s=total(fwd, True),
        once_bwd_s=total(bwd, True),
        attn_s=sum(o.time_s for o in (*attn_fwd, *attn_bwd)) + (sum(o.time_s for o in attn_fwd) if recompute else 0.0),
        launch_floor_s=kernels * launch,
        tp_bytes=tokens * d * c.act_b if tp > 1 else 0.0,
        tp_collectives=(4 + (2 if w.activation_checkpointing == "full" else 0)) * layers,
        cp_bytes=tokens * kv / tp * c.act_b if cp > 1 else 0.0,
        cp_passes=3.0 + (1.0 if w.activation_checkpointing == "full" else 0.0),
        ep_bytes=tokens * etp / tp * k_routed * d * c.act_b if ep > 1 else 0.0,
        ep_collectives=(4 + (2 if w.activation_checkpointing == "full" else 0)) * float(moe_layers),
        ep_stride=float(etp),
        p2p_bytes=tokens * d * c.act_b / (tp if w.sequence_parallel else 1),
        layers=layers,
        dense_params=float(model.total_params) - expert,
        expert_params=expert,
        dense_trainable=trainable - expert_trainable,
        expert_trainable=expert_trainable,
        grad_b=4.0 if w.master_weights == "fp32" else 2.0,
        param_b=c.act_b if w.task != "qlora" else 0.53,  # FSDP gathers QLoRA's stored NF4 base
        opt_bytes_per_param=per_param,
        offload_s_per_param=offload_s,
        opt_bw=c.bw * 0.8,
        full_recompute=w.activation_checkpointing == "full",
        tp_overlap=w.tp_comm_overlap,
    )
    return MicroOps(tuple(fwd), tuple(bwd), tuple(recompute), profile, c.peak, tuple(c.notes))


def with_checkpointing(mo: MicroOps, checkpointing: str) -> MicroProfile:
    """The profile of the same micro-batch under another checkpointing mode (the operators are the
    same; recompute repeats the attention forward (selective) or every layer's forward (full))."""
    p = mo.profile
    attn_fwd = sum(o.time_s for o in mo.fwd if o.name.startswith("attention"))
    layers = float(p.layers)
    kernels = p.launch_floor_s / (4.0 if mo.recompute else 3.0)
    was_full = bool(p.full_recompute)
    tp_c = float(p.tp_collectives) - (2 * layers if was_full else 0.0)
    cp_p = float(p.cp_passes) - (1.0 if was_full else 0.0)
    moe = float(p.ep_collectives) / (6.0 if was_full else 4.0)
    attn = float(p.attn_s) - (attn_fwd if mo.recompute else 0.0)
    rec = {"none": 0.0, "selective": attn_fwd, "full": float(p.layer_fwd_s)}[checkpointing]
    full = checkpointing == "full"
    return replace(
        p,
        layer_rec_s=rec,
        attn_s=attn + (attn_fwd if checkpointing != "none" else 0.0),
        launch_floor_s=kernels * (4.0 if checkpointing != "none" else 3.0),
        tp_collectives=tp_c + (2 * layers if full else 0.0),
        cp_passes=cp_p + (1.0 if full else 0.0),
        ep_collectives=moe * (6.0 if full else 4.0),
        full_recompute=full,
    )


def _scaled(ops: tuple[Op, ...], share: float, phase: str | None = None) -> list[Op]:
    """The last stage's share of all-layer operators (its layers / all layers), the head and loss whole."""
    out = []
    for o in ops:
        k = 1.0 if _once(o) else share
        out.append(Op(o.name, phase or o.phase, o.flops * k, o.bytes * k, o.time_s * k, o.bound))
    return out


def estimate_training_time(model: ModelSpec, w: Workload, gpu: GPU, cluster: Cluster | None = None) -> TrainingTime:
    """One training step of workload `w` on `gpu` (or on `cluster`'s nodes; default: 8-GPU nodes)."""
    if model.kind == "cnn":
        return _cnn_training(_context(model, w, gpu))
    cl = cluster or implied_cluster(gpu, w.num_gpus)
    check_layout(model, w)
    mo = training_ops(model, w, gpu)
    pp, m = w.pp, w.micro_batches
    parts = compose(mo.profile, cl, w.tp, w.cp, w.ep, pp, w.vp, w.dp, w.zero, m, w.sharding)
    spill_bytes, page_s = _paged_spill(model, w, gpu)
    step = float(parts.step[()]) + page_s
    micro_launch = float(parts.launch[()]) / m
    seq = float(w.seq_len)
    tokens_per_step = w.batch_size * seq * m * w.dp
    tokens_per_s = tokens_per_step / step
    per_gpu = tokens_per_s / w.num_gpus
    lora = w.task in ("lora", "qlora")
    fwd_flops = model.flops_per_token(int(seq))
    # model FLOPs: forward + backward = 3x forward (PaLM appendix B: 6N + 12 L H Q T); with frozen
    # weights (LoRA) there is no weight gradient, so 2x forward of the matmuls (the 4N convention
    # NeMo's LoRA figures use) plus the full attention backward
    model_flops = 3.0 * fwd_flops - (model.matmul_flops_per_token() if lora else 0.0)
    c_peak = mo.peak  # the matmuls' precision (fp8 against the fp8 peak, as llm-foundry)
    mfu = per_gpu * model_flops / c_peak
    hw_flops = model_flops + (fwd_flops if w.activation_checkpointing == "full" else 0.0)
    hfu = per_gpu * hw_flops / c_peak
    share = float(stage_share(mo.profile.layers, pp, w.vp))
    fwd, bwd, rec = _scaled(mo.fwd, share), _scaled(mo.bwd, share), _scaled(mo.recompute, share)
    opt_t = float(parts.optimizer[()])
    opt_name = "optimizer step on CPU (offload)" if w.offload != "none" else f"optimizer step ({w.optimizer})"
    opt_ops = [Op(opt_name, "optimizer", 0.0, 0.0, opt_t, "memory")]
    if page_s > 0:
        opt_ops.append(Op("paged optimizer states in and out of host RAM", "optimizer", 0.0, spill_bytes, page_s,
                          "communication"))  # fmt: skip
    comm_ops = [
        Op(name, "communication", 0.0, 0.0, float(t[()]), "communication")
        for name, t in (
            ("tensor-parallel all-reduces", parts.tp),
            ("context-parallel ring (K, V) exposed", parts.cp),
            ("expert-parallel all-to-all", parts.ep),
            ("pipeline send/recv", parts.pp),
            ("pipeline bubble", parts.bubble),
            ("data-parallel gradients/parameters exposed", parts.dp),
        )
        if float(t[()]) > 0
    ]
    ops = (*fwd, *bwd, *rec, *opt_ops, *comm_ops)
    if micro_launch > 0:
        ops = (*ops, Op("kernel launches (CPU-bound)", "launch", 0.0, 0.0, micro_launch * m, "launch"))
    exposed_comm = sum(float(t[()]) for t in (parts.tp, parts.cp, parts.ep, parts.pp, parts.dp))
    bubble = float(parts.bubble[()])
    split = {
        "compute": sum(o.time_s for o in (*fwd, *bwd, *rec) if o.bound == "compute") * m,
        "memory bandwidth": sum(o.time_s for o in (*fwd, *bwd, *rec) if o.bound == "memory") * m + opt_t,
        "communication": exposed_comm + bubble + page_s,
        "kernel launch": micro_launch * m,
    }
    bottleneck = max(split, key=lambda k: split[k])
    train_tokens = w.train_tokens
    notes = list(mo.notes)
    if pp > 1:
        notes.append(f"pipeline bubble: (pp-1)/(vp x micro-batches) = {pp - 1}/({w.vp} x {m}) of a step")
        layers = max(model.num_layers, 1)
        if layers % (pp * w.vp):
            most = math.ceil(layers / (pp * w.vp))
            notes.append(
                f"uneven pipeline: {layers} layers over {pp} x {w.vp} virtual stages, up to {most} a stage; "
                "timed on the fullest rank (Megatron-Core --pipeline-model-parallel-layout)"
            )
    layers_s = float(mo.profile.layer_fwd_s + mo.profile.layer_bwd_s + mo.profile.layer_rec_s)
    attn_share = float(mo.profile.attn_s) / max(layers_s, 1e-12)
    native = eff.attention_efficiency(gpu, kernel="fa3") / eff.attention_efficiency(gpu)
    if w.attention_impl == "flash" and native > 1.0 and attn_share > 0.15:
        notes.append(
            f"attention is {attn_share:.0%} of the layers' time at FlashAttention-2's rate; a stack with FA3 "
            f"or Transformer Engine's cuDNN attention runs it {native:.1f}x faster (attention_impl: fa3)"
        )
    if page_s > 0:
        notes.append(
            f"{spill_bytes / 2**30:.1f} GiB of {w.optimizer}'s paged states do not fit the card: they cross "
            f"PCIe every optimizer step ({page_s:.2f} s at {comm.host_link_bandwidth(gpu) / 1e9:.0f} GB/s each way)"
        )
    notes += cl.warnings()
    return TrainingTime(
        step_time_s=step,
        tokens_per_step=tokens_per_step,
        tokens_per_s=tokens_per_s,
        tokens_per_s_per_gpu=per_gpu,
        mfu=mfu,
        hfu=hfu,
        model_flops_per_token=model_flops,
        time_to_train_s=train_tokens / tokens_per_s if train_tokens else None,
        train_tokens=train_tokens,
        bottleneck=bottleneck,
        compute_s=float(parts.compute[()]),
        exposed_comm_s=exposed_comm,
        bubble_s=bubble,
        ops=ops,
        notes=tuple(notes),
    )


def _paged_spill(model: ModelSpec, w: Workload, gpu: GPU) -> tuple[float, float]:
    """(bytes, seconds per optimizer step) of paged optimizer states that do not fit the card.
    bitsandbytes' paged optimizers keep their states in CUDA managed memory and prefetch them to
    the GPU for the step (bitsandbytes functional.get_paged / prefetch_tensor); when the card is
    full the driver pages the spilled part in and the rest out again, both directions of the host
    link at once, so a step moves spill / link bandwidth seconds more."""
    if not OPTIMIZER_INFO[w.optimizer].paged:
        return 0.0, 0.0
    spill = estimate_memory(model, w, gpu).paged_spill_bytes
    return spill, spill / comm.host_link_bandwidth(gpu)


def check_layout(model: ModelSpec, w: Workload) -> None:
    """The layout's divisibility rules (Megatron-Core's), each with a clear reason."""
    layers = max(model.num_layers, 1)
    if w.tp > 1 and not model.tp_splits_heads(w.tp):
        raise InvalidSettingError(model.tp_heads_rule(w.tp))
    if w.pp > layers:
        raise InvalidSettingError(f"pp={w.pp} is more pipeline stages than the model's {layers} layers.")
    # stages that do not divide the layers take an uneven split (Megatron-Core's
    # --pipeline-model-parallel-layout, e.g. DeepSeek-V3's 61 layers on pp 8 x vp 4: "Et|(tt|)*30mL");
    # each virtual stage still holds whole layers, the embedding and the loss a stage slot at most
    if w.pp * w.vp > layers + 2:
        raise InvalidSettingError(
            f"pp x vp = {w.pp} x {w.vp} = {w.pp * w.vp} virtual stages is more than the {layers} layers plus the "
            "embedding and the loss: each virtual stage holds at least one of them."
        )
    if w.vp > 1 and w.micro_batches % w.pp:
        raise InvalidSettingError(
            f"the interleaved schedule needs micro-batches per step ({w.micro_batches}) to be a multiple of pp={w.pp}."
        )
    if w.cp > 1 and w.seq_len % (2 * w.cp):
        raise InvalidSettingError(
            f"cp={w.cp} needs seq_len divisible by 2 x cp = {2 * w.cp} (load-balanced causal chunks)."
        )
    if w.ep > 1:
        if not model.is_moe:
            raise InvalidSettingError(f"ep={w.ep} needs a mixture-of-experts model; {model.name} is dense.")
        if model.num_experts % w.ep:
            raise InvalidSettingError(f"ep={w.ep} must divide the {model.num_experts} experts.")


def _kernels_per_layer(model: ModelSpec) -> float:
    """Kernels one layer launches in a forward pass: one per linear, attention, and about six
    elementwise ones (2 norms, 2 residual adds, rotary, activation)."""
    linears = sum(1 for g in model.groups if g.linear is not None and g.role not in ("head",))
    return linears + 7.0


# --- CNNs -----------------------------------------------------------------------------------

# ResNet-style training: convolutions at the GEMM efficiency (cuDNN implicit GEMM), and every
# activation written and read by BatchNorm/ReLU/add: about 3 passes over the feature maps forward
# (conv out write, BN read+write, ReLU in place) and twice that backward. Feature-map elements per
# 224x224 image for ResNet-50: about 11.8M (sum of layer outputs, He et al. 2016 table 1 shapes).
CNN_FEATURE_ELEMENTS_PER_FLOP: Final = 11.8e6 / 4.1e9  # per forward FLOP (multiply-add = 1) of ResNet-50
CNN_PASSES_FWD: Final = 6.0  # reads + writes of each feature map element forward
CNN_CONV_EFF_SHARE: Final = 0.65  # convolutions reach about 2/3 of a large GEMM's efficiency (cuDNN)
# fp32 on CUDA cores: cuDNN runs stride-1 3x3 convolutions with Winograd's minimal filtering,
# F(2x2, 3x3) doing 2.25x fewer multiplies than direct convolution (Lavin & Gray 2016, sec. 4.1;
# cuDNN's WINOGRAD algorithms, picked by cudnnFind/benchmark mode for these layers). Tensor-core
# convolutions (fp16, bf16, tf32) run as implicit GEMMs.
WINOGRAD_REDUCTION: Final = 2.25
# NCHW activations (PyTorch's default layout) under fp16/bf16: cuDNN's tensor-core convolutions
# work in NHWC, so it transposes each convolution's input to NHWC and its output back (MosaicML
# Composer's channels-last method card, after NVIDIA's diagram; DeepLearningExamples PR #1017 saw
# the transpose kernels in an SSD profile and +50% on an A100 without them). One read and one write
# of the input and of the output: 4 passes over the feature maps forward, twice that backward.
CNN_NCHW_TRANSPOSE_PASSES: Final = 4.0
NCHW_TRANSPOSED: Final = frozenset({"fp16", "bf16"})


def _cnn_training(c: _Ctx) -> TrainingTime:
    w, model, gpu = c.w, c.model, c.gpu
    fwd = _cnn_forward(c, w.batch_size, "forward")
    bwd = [Op(o.name, "backward", 2 * o.flops, 2 * o.bytes, 2 * o.time_s, o.bound) for o in fwd]
    per_param = OPTIMIZER_BYTES.get(w.optimizer, 28.0)
    shard = w.dp if w.zero >= 1 else 1
    opt = _roof("optimizer step", "optimizer", 0.0, model.total_params / shard * per_param, 1.0, c.bw * 0.8)
    # the CPU issues ~3x the forward's kernels per micro-batch (forward, then dgrad and wgrad); at a
    # small batch the GPU finishes each sooner than eager PyTorch issues the next
    eager = _is_eager(w, model)
    launches = 3.0 * _cnn_kernels(model) * _launch_s(eager)
    gpu_micro = sum(o.time_s for o in (*fwd, *bwd))
    if not eager:
        bwd.append(Op("kernel launches (graph)", "launch", 0.0, 0.0, launches, "launch"))
    elif launches > gpu_micro:
        bwd.append(Op("kernel launches (CPU-bound)", "launch", 0.0, 0.0, launches - gpu_micro, "launch"))
    micro = sum(o.time_s for o in (*fwd, *bwd))
    n = float(model.total_params)
    overlappable, dp_fixed, comm_list = comm.data_parallel_comm(gpu, w, n * 4.0, n * c.act_b)
    # DDP all-reduces during the last micro-batch's backward
    dp_exposed = float(comm.exposed(overlappable, sum(o.time_s for o in bwd))) + dp_fixed
    step = micro * w.micro_batches + dp_exposed + opt.time_s
    samples = w.batch_size * w.micro_batches * w.dp
    per_s = samples / step
    model_flops = 3.0 * model.conv_flops_per_sample
    peak = c.peak
    mfu = per_s / w.num_gpus * model_flops / peak
    parts = {
        "compute": sum(o.time_s for o in (*fwd, *bwd) if o.bound == "compute"),
        "memory bandwidth": sum(o.time_s for o in (*fwd, *bwd) if o.bound == "memory"),
        "communication": dp_exposed,
        "kernel launch": sum(o.time_s for o in bwd if o.bound == "launch"),
    }
    ops = (*fwd, *bwd, opt, *(Op(k, "communication", 0.0, b, t, "communication") for k, b, t in comm_list if t > 0))
    train = w.train_tokens
    return TrainingTime(
        step_time_s=step,
        tokens_per_step=samples,
        tokens_per_s=per_s,
        tokens_per_s_per_gpu=per_s / w.num_gpus,
        mfu=mfu,
        hfu=mfu,
        model_flops_per_token=model_flops,
        time_to_train_s=train / per_s if train else None,
        train_tokens=train,
        bottleneck=max(parts, key=lambda k: parts[k]),
        compute_s=micro * w.micro_batches,
        exposed_comm_s=dp_exposed,
        bubble_s=0.0,
        ops=ops,
        notes=(*c.notes, "CNN: throughput counts images (samples), not tokens"),
    )


def _cnn_forward(c: _Ctx, batch: float, phase: str) -> list[Op]:
    model = c.model
    flops = model.conv_flops_per_sample * batch
    elems = model.conv_flops_per_sample / 2 * CNN_FEATURE_ELEMENTS_PER_FLOP * batch
    peak_eff = c.peak * c.gemm_eff * CNN_CONV_EFF_SHARE
    if c.runs_as == "fp32" and model.conv_flops_per_sample > 0:
        wino = model.winograd_flops_per_sample / model.conv_flops_per_sample
        peak_eff /= 1.0 - wino + wino / WINOGRAD_REDUCTION  # the same convolutions, in fewer multiplies
    bw = c.bw * eff.COPY_BW_EFF
    ops = [
        _roof("convolutions", phase, flops, 0.0, peak_eff, bw),
        _roof("batchnorm, relu, adds", phase, 0.0, elems * CNN_PASSES_FWD * c.act_b, peak_eff, bw),
    ]
    if _nchw_transposes(model, c.w, c.runs_as):
        moved = elems * CNN_NCHW_TRANSPOSE_PASSES * c.act_b
        ops.append(_roof("NCHW<->NHWC transposes (cuDNN)", phase, 0.0, moved, peak_eff, bw))
    return ops


def _nchw_transposes(model: ModelSpec, w: Workload, runs_as: str) -> bool:
    """cuDNN transposes around each tensor-core convolution: 16-bit activations kept in NCHW."""
    return model.kind == "cnn" and not w.channels_last and runs_as in NCHW_TRANSPOSED


def _one_pass(c: _Ctx, ops: list[Op], items: float, note: str) -> InferenceTime:
    """Inference that is one forward pass over `items` (images, or input tokens of an encoder)."""
    t = _time(ops)
    b = c.w.batch_size
    return InferenceTime(
        ttft_s=t,
        ttft_single_s=t,
        tpot_s=0.0,
        output_tokens_per_s=items / t,
        request_latency_s=t,
        batch=b,
        max_batch=b,
        best_batch=b,
        best_output_tokens_per_s=items / t,
        prefill_tokens_per_s=items / t,
        bottleneck=_bound_of(ops),
        prefill_ops=tuple(ops),
        decode_ops=(),
        notes=(*c.notes, note),
    )


def _cnn_inference(c: _Ctx) -> InferenceTime:
    """A CNN classifies a batch of images in one forward pass."""
    b = c.w.batch_size
    ops = _cnn_forward(c, b, "prefill")
    eager = _is_eager(c.w, c.model)
    launches = _cnn_kernels(c.model) * _launch_s(eager)
    if not eager:  # a graph replays its kernels back to back on the GPU
        ops.append(Op("kernel launches (graph)", "launch", 0.0, 0.0, launches, "launch"))
    elif launches > _time(ops):  # eager: the GPU waits for the host to issue the next kernel
        ops.append(Op("kernel launches (CPU-bound eager)", "launch", 0.0, 0.0, launches - _time(ops), "launch"))
    return _one_pass(c, ops, b, "CNN: throughput counts images per second")


def _cnn_kernels(model: ModelSpec) -> float:
    """Kernels a ResNet forward launches: every convolution and BatchNorm, a ReLU after each BatchNorm
    but the shortcut's, a residual add per block, the stem's max pool, the average pool and the classifier."""
    convs = sum(g.count for g in model.groups if g.role == "conv")
    norms = sum(g.count for g in model.groups if g.role == "norm")
    shortcut_norms = sum(g.count for g in model.groups if g.role == "norm" and g.name.startswith("shortcut"))
    return convs + norms + (norms - shortcut_norms) + model.num_layers + 3


def _launch_s(eager: bool) -> float:
    """Time one kernel costs: issued by eager PyTorch (~3 ops of ~10 us), or replayed from a graph."""
    return eff.LAUNCH_EAGER_S * eff.EAGER_OPS_PER_KERNEL if eager else eff.LAUNCH_GRAPH_S


# ---------------------------------------------------------------------------------------------
# Inference
# ---------------------------------------------------------------------------------------------


def _encoder_inference(c: _Ctx) -> InferenceTime:
    """An encoder (BERT, ViT) reads its input in one forward pass; throughput counts input tokens."""
    w = c.w
    seq = max(w.input_len, 1) if c.model.kind == "encoder" else (c.model.max_position_embeddings or w.seq_len)
    ops = _inference_step(c, w.batch_size, seq, 0.0, "prefill")
    return _one_pass(c, ops, w.batch_size * seq, "encoder: one forward pass; throughput counts input tokens per second")


def _weight_bytes_per_element(c: _Ctx) -> tuple[float, bool, float]:
    """(bytes per block-linear weight, weight-only dequant?, bytes per embedding/head weight)."""
    fmt = c.weights.fmt
    b = storage_format(fmt).bytes_per_value
    other = 4.0 if fmt == "fp32" else 2.0
    if fmt.startswith(("q", "iq")) and fmt not in ("qlora",):
        other = b  # GGUF files quantise the embeddings and output too
    weight_only = b < 2.0 and not (c.runs_as == "fp8" and fmt == "fp8") and c.runs_as != "fp4"
    return b, weight_only and c.runs_as != "fp32", other


def _bnb_kernel(c: _Ctx) -> str | None:
    """The bitsandbytes path transformers runs a quantised checkpoint through, if any: "int8"
    (load_in_8bit: LLM.int8), "4bit" (load_in_4bit) or "4bit-dq" (with double quantisation)."""
    if c.w.engine != "transformers":
        return None
    fmt = storage_format(c.weights.fmt).name
    return {"int8": "int8", "nf4": "4bit-dq", "fp4": "4bit-dq", "nf4-no-dq": "4bit"}.get(fmt)


def _is_eager(w: Workload, model: ModelSpec) -> bool:
    """transformers' generate runs eager PyTorch unless compiled (static cache + torch.compile's
    reduce-overhead mode captures CUDA graphs: transformers docs, "Optimizing inference"). Encoders
    (BERT, ViT) and CNNs are not what the LLM serving engines run: eager PyTorch (or TensorFlow's
    executor) unless compiled or built with TensorRT (`engine: tensorrt-llm` stands for it here)."""
    if model.kind in ("encoder", "vision-transformer", "cnn"):
        return not (w.compile or w.engine == "tensorrt-llm")
    if w.enforce_eager:
        return True
    return w.engine not in GRAPH_ENGINES and not (w.compile and w.engine == "transformers")


def _inference_step(c: _Ctx, batch: float, new_tokens: float, ctx_len: float, phase: str) -> list[Op]:
    """One engine step: `batch` sequences each adding `new_tokens` tokens at context `ctx_len`
    (prefill: new_tokens = prompt, ctx from 0; decode: new_tokens = 1 at ctx_len)."""
    model, w = c.model, c.w
    tp, pp = w.tp, w.pp
    wb, weight_only, other_b = _weight_bytes_per_element(c)
    bnb = _bnb_kernel(c)
    if pp > 1 and w.engine in PP_INFLIGHT_ENGINES:
        # one micro-batch per stage in flight: each stage works on batch / pp sequences at a time
        # (a sequence is not split: fewer sequences than stages leave stages idle)
        batch = max(batch / pp, min(batch, 1.0))
    tokens = batch * new_tokens
    ep, etp, dp = _serving_layout(model, w)
    ops: list[Op] = []
    calls = qcalls = 0.0  # linear-layer calls this step (per pipeline stage), quantised ones
    for g in model.groups:
        if g.linear is None:
            continue
        is_ep = g.role == "expert" and ep > 1
        k_in, n_out = _shard_dims(g, etp if is_ep else tp)
        count = g.count / pp if g.role not in ("head",) else 1.0
        m = tokens * g.active_fraction
        if is_ep:
            # expert parallelism: this GPU holds 1/ep of the experts (each split over etp GPUs)
            # and computes them for the tokens of every data-parallel replica
            count /= ep
            m *= dp
        if g.role == "head" and (phase == "decode" or w.engine in LAST_TOKEN_LOGITS_ENGINES):
            m = batch  # logits for the last position only
        elif g.role == "head":
            m = tokens
        # stored in the weight format as the memory estimate counts it (block linears, less what the
        # checkpoint leaves at 16 bits: gpt-oss's attention and router); the head apart
        stored = is_quantised(g, c.weights.fmt, c.weights.kept) and g.role != "head"
        per_elt = wb if stored else other_b
        quantised = weight_only and stored
        touched = 1.0
        if g.role == "expert" and g.active_fraction < 1.0:
            # experts one step touches: 1 - (1 - top_k/E)^tokens of them (uniform routing)
            routed = tokens * (dp if is_ep else 1)
            touched = max(1.0 - (1.0 - g.active_fraction) ** max(routed, 1.0), 1e-9)
        rows = m / touched
        calls += count * touched
        qcalls += count * touched if quantised else 0.0
        if bnb and bnb.startswith("4bit") and quantised and rows > 1.0:
            # more than one token: bitsandbytes dequantises the 4-bit weight to a 16-bit copy and
            # runs a plain GEMM on it (its gemv_4bit kernel takes a single token only)
            dequant = n_out * k_in * count * touched * NF4_DEQUANT_BYTES
            ops.append(_roof(f"{g.name} 4-bit dequantise", phase, 0.0, dequant, 1.0, c.bw * eff.COPY_BW_EFF))
            per_elt, quantised = 2.0, False
        op = _gemm(c, f"linear {g.name}", phase, rows, n_out, k_in, count * touched, per_elt, quantised)
        if c.runs_as == "fp4":
            # one (grouped) block-scaled GEMM launch per layer and projection: its fixed latency
            launches = count / model.num_experts if g.role == "expert" and model.num_experts else count
            op = Op(op.name, op.phase, op.flops, op.bytes, op.time_s + launches * eff.FP4_GEMM_LATENCY_S, op.bound)
        ops.append(op)
    kv_b = storage_format(w.effective_kv_dtype).bytes_per_value
    kernel = _attn_kernel(c)
    for a_stack in stack_shapes(model):
        layers = a_stack.layers / pp
        kv_per_tok = (a_stack.k + a_stack.v) if model.attention_type != "mla" else a_stack.latent
        if phase == "prefill":
            attn_ctx = _avg_context(new_tokens, a_stack.window, a_stack.stack == "decoder")
            qtok = tokens
        else:
            full = ctx_len if a_stack.window is None else min(ctx_len, a_stack.window)
            attn_ctx = full
            qtok = batch
        if a_stack.stack == "encoder" and phase == "decode":
            continue  # the encoder runs once, in the prefill
        flops = 2.0 * qtok * attn_ctx * (a_stack.q + a_stack.attn_out) / tp * layers
        if phase == "prefill":
            nbytes = qtok * (2 * a_stack.q + kv_per_tok) * c.act_b / tp * layers
            nbytes += qtok * kv_per_tok * kv_b / kv_shards(model, tp) * layers  # KV write
            e = eff.attention_efficiency(c.gpu, kernel=kernel) * eff.size_factor(new_tokens)
        else:
            nbytes = batch * attn_ctx * kv_per_tok * kv_b / kv_shards(model, tp) * layers
            # queries sharing one cached head (MLA's latent: all of them, decode runs as MQA)
            gqa = model.num_heads / (1 if model.attention_type == "mla" else max(model.num_kv_heads, 1))
            e = eff.attention_efficiency(c.gpu, kernel=kernel) * eff.size_factor(gqa * 16)
        ops.append(_roof("attention", phase, flops, nbytes, c.peak16 * e, c.bw * c.bw_eff))
        if kernel == "eager":
            # eager attention materialises every query's scores over the whole context (the causal
            # mask hides half of a prefill's square without saving its traffic); no dropout
            square = new_tokens if a_stack.window is None else min(new_tokens, a_stack.window)
            keys = square if phase == "prefill" else attn_ctx
            ops.append(_eager_scores_op(c, phase, qtok * keys * max(a_stack.heads, 1) / tp * layers, False))
        ew = _elementwise_bytes(a_stack, c) * tokens * layers / tp
        ops.append(_roof("norms, activations, residuals", phase, 0.0, ew, 1.0, c.bw * eff.COPY_BW_EFF))
    # collectives: 2 all-reduces per layer under TP (Megatron), of tokens x d activations. Expert
    # parallelism inside one replica (dp = 1) keeps that: every GPU already holds all the tokens,
    # runs its own experts on them and the MoE output is all-reduced like a TP MLP's. Across
    # attention data-parallel replicas (dp > 1) a MoE layer dispatches tokens to the GPUs holding
    # their experts and combines the results back instead of its all-reduce.
    layers_total = sum(s.layers for s in stack_shapes(model)) / pp
    moe_layers = model.moe_layers / pp
    a2a = ep > 1 and dp > 1
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
    if pp > 1:
        # every stage runs its layers pp times a step: for the serving engines once per micro-batch
        # of batch / pp (all stages busy), for the llama.cpp layer split on the whole batch while
        # the other stages wait; plus the hops between stages
        ops = [Op(o.name, o.phase, o.flops * pp, o.bytes * pp, o.time_s * pp, o.bound) for o in ops]
        t_p2p = comm.p2p_time(c.gpu, tokens * model.hidden_size * c.act_b)
        ops.append(Op("pipeline send/recv", "communication", 0.0, 0.0, t_p2p * (pp - 1), "communication"))
    # kernel launches: a per-kernel cost on the GPU under graphs; eager PyTorch is CPU-bound
    kernels = _kernels_per_layer(model) * layers_total * pp + 4
    if not _is_eager(w, model):
        ops.append(Op("kernel launches (graph)", "launch", 0.0, 0.0, kernels * eff.LAUNCH_GRAPH_S, "launch"))
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
    return ops


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


def _time(ops: list[Op]) -> float:
    return sum(o.time_s for o in ops)


def _bound_of(ops: list[Op]) -> str:
    parts: dict[str, float] = {}
    for o in ops:
        key = {"compute": "compute", "memory": "memory bandwidth", "communication": "communication"}.get(
            o.bound, "kernel launch"
        )
        parts[key] = parts.get(key, 0.0) + o.time_s
    return max(parts, key=lambda k: parts[k]) if parts else "compute"


def _static(c: _Ctx, batch: int) -> tuple[float, float, list[Op], list[Op]]:
    """(prefill time, mean decode step) for a static batch of `batch` sequences."""
    w = c.w
    pre = _inference_step(c, batch, max(w.input_len, 1), 0.0, "prefill")
    mid = w.input_len + (w.output_len + 1) / 2.0
    dec = _inference_step(c, batch, 1.0, mid, "decode")
    return _time(pre), _time(dec), pre, dec


def _throughput(c: _Ctx, batch: int) -> tuple[float, float, float, list[Op], list[Op]]:
    ttft, tpot, pre, dec = _static(c, batch)
    out = max(c.w.output_len, 1)
    latency = ttft + (out - 1) * tpot
    return batch * out / latency, ttft, tpot, pre, dec


def estimate_inference_time(model: ModelSpec, w: Workload, gpu: GPU, max_batch: int | None = None) -> InferenceTime:
    """Prefill, decode and throughput of `w.batch_size` sequences; the best batch up to `max_batch`
    (the KV-cache capacity from the memory estimate) for continuous batching."""
    c = _context(model, w, gpu)
    if model.kind == "cnn":
        return _cnn_inference(c)
    b = w.batch_size
    if model.kind in ("encoder", "vision-transformer"):
        return _encoder_inference(c)
    check_layout(model, w)
    # data-parallel replicas (num_gpus / (tp x pp)) serve `batch_size` sequences each, in step
    _, _, replicas = _serving_layout(model, w)
    tput, ttft, tpot, pre, dec = _throughput(c, b)
    # the engine's default cap on the sequences one step schedules: vLLM's max_num_seqs by card
    cap = ENGINE_MAX_BATCH.get(w.engine) or (runtime.vllm_max_num_seqs(gpu) if w.engine == "vllm" else 1024)
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
    out = max(w.output_len, 1)
    single = ttft if b == 1 else _time(_inference_step(c, 1, max(w.input_len, 1), 0.0, "prefill"))
    return InferenceTime(
        ttft_s=ttft,
        ttft_single_s=single,
        tpot_s=tpot,
        output_tokens_per_s=tput * replicas,
        request_latency_s=ttft + (out - 1) * tpot,
        batch=b,
        max_batch=limit,
        best_batch=best_b,
        best_output_tokens_per_s=best_t * replicas,
        prefill_tokens_per_s=replicas * b * max(w.input_len, 1) / ttft if ttft > 0 else 0.0,
        bottleneck=_bound_of(dec),
        prefill_ops=tuple(pre),
        decode_ops=tuple(dec),
        notes=tuple(c.notes),
        replicas=replicas,
    )
