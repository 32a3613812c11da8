"""The operators and their roofline: the shared pieces of training and inference times."""

from __future__ import annotations

from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from operator import attrgetter
from typing import Any, Final, NamedTuple, TypeVar

from gpuplan.errors import InvalidSettingError
from gpuplan.estimators import efficiency as eff
from gpuplan.estimators import engines
from gpuplan.estimators.activations import StackShape, attention_dropout
from gpuplan.estimators.memory import (
    ATTN_OUT_LEAVES,
    MLP_DOWN_LEAVES,
    InferenceWeights,
    inference_weights,
)
from gpuplan.specs.gpu import GPU
from gpuplan.specs.model import ModelSpec, ParamGroup
from gpuplan.specs.precision import FP4_TENSOR_FORMATS, compute_peak, fp4_peak, training_precision_gap
from gpuplan.specs.workload import Workload

# Engines whose decode runs under CUDA graphs with fused kernels (vLLM, TensorRT-LLM, SGLang,
# MLC and llama.cpp capture graphs for decode; Ollama runs llama.cpp; TGI captures graphs for decode
# batches up to 32, estimators/engines.py); transformers' generate runs eager PyTorch.
GRAPH_ENGINES: Final = frozenset({"vllm", "tensorrt-llm", "sglang", "mlc", "llama.cpp", "tgi", "ollama"})
# Prefill logits: serving engines compute the lm_head for the last position only, and so does
# transformers' generate (generation/utils.py: logits_to_keep=1 for every model whose forward takes
# it, the Llama, Mistral, Qwen, Gemma... families); a plain forward() computes every position.
LAST_TOKEN_LOGITS_ENGINES: Final = GRAPH_ENGINES | {"transformers"}
# Most sequences one engine step batches by default: vLLM max_num_seqs (runtime.py), TensorRT-LLM
# trtllm-bench max batch size 2048 (TensorRT-LLM docs, perf-benchmarking "max_batch_size").
# TGI --max-concurrent-requests 128, Ollama one request at a time (estimators/engines.py).
ENGINE_MAX_BATCH: Final = {
    "tensorrt-llm": 2048,
    "tgi": engines.TGI_MAX_CONCURRENT_REQUESTS,
    "ollama": engines.OLLAMA_NUM_PARALLEL,
}
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


# The roofline's corner (efficiency.ROOF_P, defined there with its calibration)
ROOF_P: Final = eff.ROOF_P
# Weight-only quantised matrix-vector products (decode below GEMV_ROWS: int8/int4/GGUF weights
# unpacked and scaled in the kernel) stream their weights at a smaller share of the bandwidth than
# a 16-bit GEMV: the dequantising ALU work and the scale loads sit in the streaming loop. 0.85 is
# calibrated on the single-GPU gpt-fast int8/int4 and llama.cpp q4_0 decode rows (+13..+38% at
# the 16-bit share). MLC's TVM-generated kernels keep the full share: in MLC's own table
# (mlc-ai/llm-perf-bench README) its q4f16_1 7B decodes 1.36x faster than llama.cpp's q4_0 on the
# same RTX 4090, at the same 4.5 bits a weight.
WEIGHT_ONLY_GEMV_BW_SHARE: Final = 0.85
WEIGHT_ONLY_GEMV_BW_SHARE_BY_ENGINE: Final = {"mlc": 1.0}
# torchao's grouped int4 weights (int4-gNN: gpt-fast and torchao int4_weight_only, PyTorch's tinygemm
# _weight_int4pack_mm) stream below its int8 weight-only path: gpt-fast's README gives the bandwidth
# each reached on one A100-80GB, int4 (G=32) 862.69 against int8 1069.20 GB/s for Llama-2-7B and
# 1097.66 against 1322.58 for Llama-2-70B (pytorch-labs/gpt-fast README.md, 'Benchmarks'): 0.81 and
# 0.83 of the int8 rate, taken as 0.82 of the weight-only share.
TINYGEMM_INT4_GEMV_SHARE: Final = 0.82
# Fewer rows than this: a matrix-vector product (decode at small batch) runs on CUDA-core FMAs
# over the streamed weights (cuBLAS/Marlin GEMV paths), not in tensor-core tiles.
GEMV_ROWS: Final = 8.0


class Op(NamedTuple):
    """One operator (or a family of them) of a step, with its roofline verdict. A named tuple, not
    a frozen dataclass: a plan builds ~30,000 of them (an inference plan's batch searches), and a
    tuple is built in a quarter of the time (CPython's frozen-dataclass __init__ sets each field
    through object.__setattr__)."""

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
    # static batch of `batch_size` per replica, all GPUs together; under request_rate, what is delivered:
    # min(rate x output_len, that batch's rate)
    output_tokens_per_s: float
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
    # under request_rate: the arrivals' output tokens/s (rate x output_len), which caps what is delivered
    offered_tokens_per_s: float | None = None

    @property
    def running_ops(self) -> tuple[Op, ...]:
        """What a busy GPU runs most of the time: decode steps, or the single forward pass of a
        model that does not generate (CNN, encoder)."""
        return self.decode_ops or self.prefill_ops


_T = TypeVar("_T")


@dataclass
class Ctx:
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
    # step-invariant terms derived from this context (`once`: perf/inference.py's linear layers, stage
    # layers and kernel count): not an init field, so that dataclasses.replace() starts a fresh one
    memo: dict[Any, Any] = field(default_factory=dict, init=False, repr=False, compare=False)

    def once(self, key: Hashable, make: Callable[[], _T]) -> _T:
        """`make()`, computed the first time `key` is asked for on this context and kept."""
        if key not in self.memo:
            self.memo[key] = make()
        value: _T = self.memo[key]
        return value


# make_ctx's fields for an inference workload, by the model and GPU objects (kept, and compared, so
# that their ids cannot be others') and the workload's fields it reads: a plan makes ~660 contexts,
# of ~73 such kinds. Each context still gets its own workload, notes and memo.
_INFERENCE_CTX: dict[tuple[Any, ...], tuple[ModelSpec, GPU, tuple[Any, ...]]] = {}


def make_ctx(model: ModelSpec, w: Workload, gpu: GPU) -> Ctx:
    if w.is_training:
        return _make_ctx(model, w, gpu)
    key = (
        id(model), id(gpu), w.precision, w.task, w.attention_impl, w.weight_dtype, w.effective_weight_dtype,
        w.compile, w.engine, w.channels_last, w.pp,
    )  # fmt: skip
    hit = _INFERENCE_CTX.get(key)
    if hit is None or hit[0] is not model or hit[1] is not gpu:
        c = _make_ctx(model, w, gpu)
        if len(_INFERENCE_CTX) > 1024:
            _INFERENCE_CTX.clear()
        fields = (c.runs_as, c.peak, c.gemm_eff, c.act_b, c.bw, c.fused, c.fp32_peak, c.peak16, c.bw_eff)
        _INFERENCE_CTX[key] = (model, gpu, (*fields, tuple(c.notes), c.pp, c.weights))
        return c
    runs_as, peak, gemm_eff, act_b, bw, fused, fp32_peak, peak16, bw_eff, notes, pp, weights = hit[2]
    return Ctx(
        gpu=gpu, model=model, w=w, runs_as=runs_as, peak=peak, gemm_eff=gemm_eff, act_b=act_b, bw=bw, fused=fused,
        fp32_peak=fp32_peak, peak16=peak16, bw_eff=bw_eff, notes=list(notes), pp=pp, weights=weights,
    )  # fmt: skip


def _make_ctx(model: ModelSpec, w: Workload, gpu: GPU) -> Ctx:
    prec: str = w.precision
    gap = training_precision_gap(prec, gpu) if w.is_training else None
    if gap:
        raise InvalidSettingError(gap)
    notes: list[str] = []
    if w.attention_impl == "fa3" and gpu.architecture not in eff.ATTN_FWD_EFF_FA3 and model.kind != "cnn":
        # FlashAttention-3 needs Hopper (Dao-AILab/flash-attention README, "FlashAttention-3 beta":
        # H100 / H800 GPU, sm90); elsewhere the stacks run FA2 (or cuDNN's non-Hopper kernels)
        notes.append(
            f"attention_impl fa3: FlashAttention-3 runs on Hopper (sm90) only; on {gpu.name} ({gpu.architecture}) "
            "the stack falls back to FlashAttention-2, and attention is timed at FA2's rate"
        )
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
    if nchw_transposes(model, w, peak.runs_as):
        notes.append(
            "NCHW activations: cuDNN transposes each 16-bit convolution's input and output "
            "(channels_last: true, i.e. model.to(memory_format=torch.channels_last), removes them)"
        )
    g = eff.gemm_efficiency(gpu, peak.runs_as, w.engine)
    act_b = 4.0 if w.precision in ("fp32", "tf32") else 2.0
    engine_fused = (not w.is_training) and w.engine in GRAPH_ENGINES
    return Ctx(
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


def roof(name: str, phase: str, flops: float, nbytes: float, peak_eff: float, bw_eff: float) -> Op:
    """One operator's time on the (smoothed) roofline, labelled by the larger of its two terms."""
    t_c = flops / peak_eff if flops > 0 else 0.0
    t_m = nbytes / bw_eff if nbytes > 0 else 0.0
    t = (t_c**ROOF_P + t_m**ROOF_P) ** (1.0 / ROOF_P)
    return Op(name, phase, flops, nbytes, t, "compute" if t_c >= t_m else "memory")


def gemm(
    c: Ctx,
    name: str,
    phase: str,
    m: float,
    n: float,
    k: float,
    count: float,
    w_bytes: float,
    weight_only: bool = False,
    bw_share: float = 1.0,
) -> Op:
    """`count` GEMMs of (m x k) @ (k x n) reading a (k x n) weight at `w_bytes` per element; the
    kernel streams at `bw_share` of a plain streaming kernel's bandwidth (engines.expert_bw_share)."""
    flops = 2.0 * m * n * k * count
    nbytes = count * (n * k * w_bytes + (m * k + m * n) * c.act_b)
    bw = c.bw * c.bw_eff
    if bw_share != 1.0:
        bw *= bw_share
    awq = engines.autoawq_kernel(c.w) if weight_only else None
    if awq is not None:
        # AutoAWQ's own kernels, by the checkpoint's version and the rows (estimators/engines.py)
        bw_share, compute_share, gemv_rows = awq
        rate = c.fp32_peak * eff.FP32_CORE_EFF if m <= gemv_rows else c.peak * c.gemm_eff * compute_share
        return roof(name, phase, flops, nbytes, rate, bw * bw_share)
    if m < GEMV_ROWS:
        # a matrix-vector product: CUDA-core FMAs over the streamed weights, no tensor-core tiles
        rate = c.fp32_peak * eff.FP32_CORE_EFF
        if weight_only:
            bw *= WEIGHT_ONLY_GEMV_BW_SHARE_BY_ENGINE.get(c.w.engine or "", WEIGHT_ONLY_GEMV_BW_SHARE)
            bw *= TINYGEMM_INT4_GEMV_SHARE if c.weights.fmt.startswith("int4-g") else 1.0
    else:
        e = c.gemm_eff * eff.gemm_size_factor(m, n, k) * (WEIGHT_ONLY_COMPUTE_SHARE if weight_only else 1.0)
        rate = c.peak * max(e, 1e-6)
    return roof(name, phase, flops, nbytes, rate, bw)


def compute_roof(model: ModelSpec, w: Workload, gpu: GPU) -> tuple[str, float]:
    """(precision the GEMMs run at, its dense peak FLOP/s) for this workload on this GPU: the
    estimate's own choice (bf16 as fp16 without BF16 tensor cores, fp8 weights as W8A8 where FP8
    tensor cores exist), the compute roof of a roofline plot. Attention runs at the 16-bit rate."""
    c = make_ctx(model, w, gpu)
    return c.runs_as, max(c.peak, c.peak16)


def avg_context(seq: float, window: float | None, causal: bool) -> float:
    """Mean keys a query attends to: (s+1)/2 under a causal mask, s without; a window caps it."""
    if not causal:
        return seq if window is None else min(seq, window)
    if window is None or window >= seq:
        return (seq + 1) / 2
    return window - window * window / (2 * seq)  # ramp up to the window, then flat


def shard_dims(g: ParamGroup, tp: int) -> tuple[float, float]:
    """(in, out) of one TP shard of a linear group: row-parallel layers (attention output, MLP
    down: the leaves memory.py keeps too) split their input, column-parallel ones their output;
    the MoE router is replicated."""
    assert g.linear is not None
    if g.role == "router":
        return float(g.linear[0]), float(g.linear[1])
    if g.name.rsplit(".", 1)[-1] in ROW_PARALLEL_LEAVES:
        return g.linear[0] / tp, float(g.linear[1])
    return float(g.linear[0]), g.linear[1] / tp


def elementwise_bytes(s: StackShape, c: Ctx) -> float:
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


def eager_scores_op(c: Ctx, phase: str, elements: float, dropout: bool, backward: bool = False) -> Op:
    """The kernels between eager attention's two matmuls, over `elements` materialised scores."""
    per = eager_score_bytes(c.act_b, dropout)[1 if backward else 0]
    return roof("attention scores (eager softmax)", phase, 0.0, elements * per, 1.0, c.bw * eff.COPY_BW_EFF)


def attn_kernel(c: Ctx) -> str:
    """The attention kernel a workload runs: "eager", "fa3" (Hopper-native) or "fa2"."""
    w = c.w
    if w.attention_impl in ("eager", "fa3"):
        return w.attention_impl
    if w.engine == "autoawq":
        return "eager"  # its fused prompt attention: torch.matmul + softmax (estimators/engines.py)
    return "fa3" if not w.is_training and w.engine in FA3_ENGINES else "fa2"


def attention_op(c: Ctx, s: StackShape, tokens: float, seq: float, phase: str, backward: bool = False) -> list[Op]:
    """Attention for `tokens` queries over sequences of `seq` (per layer x layers on this stage):
    FlashAttention's one kernel, or eager attention's two batched matmuls plus the kernels that
    write, scale, mask, softmax (and drop) the materialised s x s scores in between."""
    causal = s.stack == "decoder"
    ctx = avg_context(seq, s.window, causal)
    tp = c.w.tp
    layers = s.layers / c.pp
    kernel = attn_kernel(c)
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
    ops = [roof("attention", phase, flops, nbytes, peak * e, c.bw * c.bw_eff)]
    if eager:
        # the whole s x s square is materialised (the causal mask only hides half of it)
        full = seq if s.window is None else min(seq, s.window)
        elements = tokens * full * max(s.heads, 1) / tp * layers
        ops.append(eager_scores_op(c, phase, elements, attention_dropout(c.model) > 0, backward))
    return ops


# 16-bit NCHW activations: cuDNN transposes around each tensor-core convolution (cnn.py,
# CNN_NCHW_TRANSPOSE_PASSES, with its sources)
NCHW_TRANSPOSED: Final = frozenset({"fp16", "bf16"})


def nchw_transposes(model: ModelSpec, w: Workload, runs_as: str) -> bool:
    """cuDNN transposes around each tensor-core convolution: 16-bit activations kept in NCHW."""
    return model.kind == "cnn" and not w.channels_last and runs_as in NCHW_TRANSPOSED


def is_eager(w: Workload, model: ModelSpec) -> bool:
    """transformers' generate runs eager PyTorch unless compiled (static cache + torch.compile's
    reduce-overhead mode captures CUDA graphs: transformers docs, "Optimizing inference"). Encoders
    (BERT, ViT) and CNNs are not what the LLM serving engines run: eager PyTorch (or TensorFlow's
    executor) unless compiled or built with TensorRT (`engine: tensorrt-llm` stands for it here)."""
    if model.kind in ("encoder", "vision-transformer", "cnn"):
        return not (w.compile or w.engine == "tensorrt-llm")
    if w.enforce_eager:
        return True
    return w.engine not in GRAPH_ENGINES and not (w.compile and w.engine == "transformers")


def total_time(ops: list[Op]) -> float:
    t: float = sum(map(_TIME_S, ops))  # summed in order, as a generator over the ops would
    return t


_TIME_S: Final = attrgetter("time_s")


def bound_of(ops: list[Op]) -> str:
    parts: dict[str, float] = {}
    for o in ops:
        key = {"compute": "compute", "memory": "memory bandwidth", "communication": "communication"}.get(
            o.bound, "kernel launch"
        )
        parts[key] = parts.get(key, 0.0) + o.time_s
    return max(parts, key=lambda k: parts[k]) if parts else "compute"
