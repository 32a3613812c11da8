"""Convolutional networks (ResNet-style): training and inference from their convolutions."""

from __future__ import annotations

from typing import Final

from gpuplan.estimators import comm
from gpuplan.estimators import efficiency as eff
from gpuplan.estimators.perf.ops import (
    OPTIMIZER_BYTES,
    Ctx,
    InferenceTime,
    Op,
    TrainingTime,
    bound_of,
    is_eager,
    nchw_transposes,
    roof,
    total_time,
)
from gpuplan.specs.model import ModelSpec

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


# --- CNNs -----------------------------------------------------------------------------------


def cnn_training(c: Ctx) -> TrainingTime:
    w, model, gpu = c.w, c.model, c.gpu
    fwd = _cnn_forward(c, w.batch_size, "forward")
    bwd = [Op(o.name, "backward", 2 * o.flops, 2 * o.bytes, 2 * o.time_s, o.bound) for o in fwd]
    per_param = OPTIMIZER_BYTES.get(w.optimizer, 28.0)
    shard = w.dp if w.zero >= 1 else 1
    opt = roof(
        "optimizer step", "optimizer", 0.0, model.total_params / shard * per_param, 1.0, c.bw * eff.KERNEL_BW_EFF
    )  # a memory-bound elementwise step
    # the CPU issues ~3x the forward's kernels per micro-batch (forward, then dgrad and wgrad); at a
    # small batch the GPU finishes each sooner than eager PyTorch issues the next
    eager = is_eager(w, model)
    launches = 3.0 * cnn_kernels(model) * launch_s(eager)
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


def _cnn_forward(c: Ctx, batch: float, phase: str) -> list[Op]:
    model = c.model
    flops = model.conv_flops_per_sample * batch
    elems = model.conv_flops_per_sample / 2 * CNN_FEATURE_ELEMENTS_PER_FLOP * batch
    peak_eff = c.peak * c.gemm_eff * CNN_CONV_EFF_SHARE
    if c.runs_as == "fp32" and model.conv_flops_per_sample > 0:
        wino = model.winograd_flops_per_sample / model.conv_flops_per_sample
        peak_eff /= 1.0 - wino + wino / WINOGRAD_REDUCTION  # the same convolutions, in fewer multiplies
    bw = c.bw * eff.COPY_BW_EFF
    ops = [
        roof("convolutions", phase, flops, 0.0, peak_eff, bw),
        roof("batchnorm, relu, adds", phase, 0.0, elems * CNN_PASSES_FWD * c.act_b, peak_eff, bw),
    ]
    if nchw_transposes(model, c.w, c.runs_as):
        moved = elems * CNN_NCHW_TRANSPOSE_PASSES * c.act_b
        ops.append(roof("NCHW<->NHWC transposes (cuDNN)", phase, 0.0, moved, peak_eff, bw))
    return ops


def one_pass(c: Ctx, ops: list[Op], items: float, note: str) -> InferenceTime:
    """Inference that is one forward pass over `items` (images, or input tokens of an encoder)."""
    t = total_time(ops)
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
        bottleneck=bound_of(ops),
        prefill_ops=tuple(ops),
        decode_ops=(),
        notes=(*c.notes, note),
    )


def cnn_inference(c: Ctx) -> InferenceTime:
    """A CNN classifies a batch of images in one forward pass."""
    b = c.w.batch_size
    ops = _cnn_forward(c, b, "prefill")
    eager = is_eager(c.w, c.model)
    launches = cnn_kernels(c.model) * launch_s(eager)
    if not eager:  # a graph replays its kernels back to back on the GPU
        ops.append(Op("kernel launches (graph)", "launch", 0.0, 0.0, launches, "launch"))
    elif launches > total_time(ops):  # eager: the GPU waits for the host to issue the next kernel
        ops.append(Op("kernel launches (CPU-bound eager)", "launch", 0.0, 0.0, launches - total_time(ops), "launch"))
    return one_pass(c, ops, b, "CNN: throughput counts images per second")


def cnn_kernels(model: ModelSpec) -> float:
    """Kernels a ResNet forward launches: every convolution and BatchNorm, a ReLU after each BatchNorm
    but the shortcut's, a residual add per block, the stem's max pool, the average pool and the classifier."""
    convs = sum(g.count for g in model.groups if g.role == "conv")
    norms = sum(g.count for g in model.groups if g.role == "norm")
    shortcut_norms = sum(g.count for g in model.groups if g.role == "norm" and g.name.startswith("shortcut"))
    return convs + norms + (norms - shortcut_norms) + model.num_layers + 3


def launch_s(eager: bool) -> float:
    """Time one kernel costs: issued by eager PyTorch (~3 ops of ~10 us), or replayed from a graph."""
    return eff.LAUNCH_EAGER_S * eff.EAGER_OPS_PER_KERNEL if eager else eff.LAUNCH_GRAPH_S


# ---------------------------------------------------------------------------------------------
