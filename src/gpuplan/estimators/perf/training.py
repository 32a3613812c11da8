"""A training step from its operators: forward, backward, recompute, optimizer, communication."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Final

from gpuplan.errors import InvalidSettingError
from gpuplan.estimators import comm
from gpuplan.estimators import efficiency as eff
from gpuplan.estimators.activations import stack_shapes
from gpuplan.estimators.fsdp_pp import fsdp_keeps_stage_gathered
from gpuplan.estimators.lora import lora_targets
from gpuplan.estimators.memory import (
    estimate_memory,
)
from gpuplan.estimators.optimizer import OPTIMIZER_INFO
from gpuplan.estimators.parallel import MicroProfile, compose, stage_share
from gpuplan.estimators.perf.cnn import cnn_training, launch_s
from gpuplan.estimators.perf.ops import (
    CPU_ADAM_PARAMS_PER_S,
    LOSS_BYTES_PER_LOGIT,
    LOSS_BYTES_PER_LOGIT_COMPILED,
    NF4_DEQUANT_BYTES,
    OPTIMIZER_BYTES,
    OPTIMIZER_BYTES_PURE16,
    Ctx,
    Op,
    TrainingTime,
    attention_op,
    elementwise_bytes,
    gemm,
    make_ctx,
    roof,
    shard_dims,
)
from gpuplan.specs.cluster import Cluster, implied_cluster
from gpuplan.specs.gpu import GPU
from gpuplan.specs.model import ModelSpec
from gpuplan.specs.workload import Workload

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


# Bytes per parameter FSDP / ZeRO-3 all-gathers of a QLoRA base: the stored NF4 weights
# (bytes_per_value("nf4") = 0.516, QLoRA sec. 3) rounded up to 0.53 for the quantisation state that
# travels with them. A modelling figure, not a measurement; kept as calibrated (golden files).
QLORA_GATHERED_BYTES_PER_PARAM: Final = 0.53


# torchao.float8's dynamic scaling casts each linear's input, weight and output gradient to fp8 in
# kernels of its own: an amax reduction, then a cast that writes the fp8 copies (row- and
# column-major). Bytes read and written per element, unfused, from torchao's roofline model
# (pytorch/ao:torchao/testing/float8/roofline_utils.py@042170ff590a18993e2b939a85d7eb3cd8db8d5c,
# get_tensor_memory_traffic_ovhd_s): (input fwd, input bwd, weight fwd, weight bwd, grad_output).
# tensorwise: input 2 + (2 + 2x1), weight 2 + (2 + 1) + (2 + 1), grad_output as input; rowwise: input
# (2 + 1 + 2) then (2 + 1), weight (2 + 1), 2x2, (2 + 1), grad_output as input; rowwise_with_gw_hp:
# one (2 + 1) cast each, and its weight gradient GEMM stays bf16. Transformer Engine's delayed
# scaling ("delayed") fuses its casts into the neighbouring kernels: none counted.
FP8_CAST_BYTES: Final[dict[str, tuple[float, float, float, float, float]]] = {
    "tensorwise": (6.0, 0.0, 5.0, 3.0, 6.0),
    "rowwise": (5.0, 3.0, 3.0, 7.0, 8.0),
    "rowwise_with_gw_hp": (3.0, 0.0, 3.0, 3.0, 3.0),
}
# Row-wise scaled fp8 GEMMs (PyTorch's CUTLASS kernel for _scaled_mm with per-row scales) run below
# the tensor-wise cuBLAS ones: "most shapes are within 90-100% of tensor-wise efficiency, but
# there's a long tail going down to 50%" (pytorch/pytorch issue #147971, H100). Taken at 0.9.
FP8_ROWWISE_GEMM_SHARE: Final = 0.9


# A LoRA adapter's own elementwise kernels, bytes per element moved, eager and unfused: PEFT's
# Linear.forward is `result + lora_B(lora_A(dropout(x))) * scaling`, and its bitsandbytes 4-bit
# Linear4bit.forward first clones the base output, `result = result.clone()` (huggingface/peft
# v0.10.0 = 8221246f2f48b665c853605e1d0ddaf1d0ce39c9, src/peft/tuners/lora/layer.py and bnb.py;
# dropout is nn.Identity when lora_dropout == 0). Per input element (in_features): dropout reads x
# and writes x' and a 1-byte mask (2b + 1); backward, dropout's grad (2b + 1), and autograd adding the
# adapter's input grad to the base layer's, dropout or not (read 2, write 1: 3b). Per output element (out_features):
# the scaling multiply (2b) and the residual add (read 2, write 1: 3b) forward, the multiply's
# grad (2b) backward; the clone (2b) forward. The GEMMs' own reads and writes are counted by gemm().
def lora_elementwise_bytes(i: float, o: float, b: float, dropout: bool, clone: bool) -> tuple[float, float]:
    """Bytes per token one adapter of `i` inputs and `o` outputs moves outside its GEMMs, (forward, backward)."""
    drop = (2 * b + 1) * i if dropout else 0.0
    fwd = drop + 5 * b * o + (2 * b * o if clone else 0.0)
    bwd = drop + 3 * b * i + 2 * b * o
    return fwd, bwd


def _fp8_casts(c: Ctx, w: Workload, model: ModelSpec, tokens: float, frozen: set[str]) -> tuple[Op, Op] | None:
    """The forward and backward fp8 cast kernels of torchao.float8's dynamic recipes (FP8_CAST_BYTES)
    over its nn.Linear layers (MoE experts run grouped GEMMs it does not convert). Under FSDP, tensorwise casts each weight shard before the
    float8 all-gather (torchtitan's enable_fsdp_float8_all_gather, which torchao's benchmark runs
    with: pytorch/ao:benchmarks/float8/training/llama3.sh@9519bebbc397d60274982a74c084f9dff18e61a6),
    so only 1/dp of the weight; the rowwise recipes gather bf16 and cast the whole weight."""
    if c.runs_as != "fp8" or w.fp8_recipe not in FP8_CAST_BYTES:
        return None
    in_f, in_b, w_f, w_b, go_b = FP8_CAST_BYTES[w.fp8_recipe]
    shards = w.dp if (w.fp8_recipe == "tensorwise" and w.zero == 3) else 1
    fwd = bwd = 0.0
    for g in model.groups:
        if g.linear is None or g.role == "expert":
            continue
        k_in, n_out = shard_dims(g, w.tp)
        m = tokens * g.active_fraction
        weight = k_in * n_out * g.count / shards
        fwd += g.count * m * k_in * in_f + weight * w_f
        bwd += g.count * m * (k_in * in_b + n_out * go_b) + (0.0 if g.name in frozen else weight * w_b)
    bw = c.bw * eff.COPY_BW_EFF
    return roof("fp8 casts", "forward", 0.0, fwd, 1.0, bw), roof("fp8 casts", "backward", 0.0, bwd, 1.0, bw)


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


def _linear_ops(c: Ctx, model: ModelSpec, w: Workload, tokens: float) -> tuple[list[Op], list[Op]]:
    """Forward and backward GEMMs of every linear layer (dgrad always, wgrad unless frozen), LoRA's
    adapters, and QLoRA's dequantisation of the NF4 base."""
    tp, ep = w.tp, w.ep
    etp = w.expert_tp  # as set, Megatron-Core's default (tp), or 1 where ep folds over the TP ranks
    _, frozen, adapters = _trainable_params(model, w)
    w_bytes = c.act_b
    fwd: list[Op] = []
    bwd: list[Op] = []
    if c.runs_as == "fp8" and w.fp8_recipe in ("rowwise", "rowwise_with_gw_hp"):
        c = replace(c, gemm_eff=c.gemm_eff * FP8_ROWWISE_GEMM_SHARE)
    c_wgrad = c  # rowwise_with_gw_hp keeps the weight gradient GEMM in bf16 (FP8_CAST_BYTES)
    if c.runs_as == "fp8" and w.fp8_recipe == "rowwise_with_gw_hp":
        c_wgrad = replace(c, runs_as="bf16", peak=c.peak16, gemm_eff=eff.gemm_efficiency(c.gpu, "bf16").value)
    for g in model.groups:
        if g.linear is None:
            continue
        # experts split over ep ranks: each holds count/ep of them, each GEMM split over etp ranks,
        # and receives the tokens of ep x etp ranks that hold 1/tp of the micro-batch each (sequence
        # parallel; Megatron-Core's MoE layer requires it with tp > 1): ep x etp / tp x the tokens
        is_expert = g.role == "expert"
        k_in, n_out = shard_dims(g, etp if is_expert else tp)
        e = ep if is_expert else 1
        m = tokens * g.active_fraction * e * (etp / tp if is_expert else 1.0)
        count = g.count / e
        fwd.append(gemm(c, f"linear {g.name}", "forward", m, n_out, k_in, count, w_bytes))
        # dgrad (grad of the input): m x k from m x n and the weight
        bwd.append(gemm(c, f"linear {g.name} dgrad", "backward", m, k_in, n_out, count, w_bytes))
        if g.name not in frozen:
            # wgrad: k x n from the inputs (k x m) and output grads (m x n)
            bwd.append(gemm(c_wgrad, f"linear {g.name} wgrad", "backward", k_in, n_out, m, count, 0.0))
    for name, i, o, n in adapters:
        # x A (i -> r) then (x A) B (r -> o); backward: dgrad and wgrad of each (Hu et al. 2021)
        r = float(w.lora_rank)
        fwd.append(gemm(c, f"lora {name} A", "forward", tokens, r, i, n, w_bytes))
        fwd.append(gemm(c, f"lora {name} B", "forward", tokens, o, r, n, w_bytes))
        bwd.append(gemm(c, f"lora {name} A grads", "backward", tokens, r, i, 2 * n, w_bytes))
        bwd.append(gemm(c, f"lora {name} B grads", "backward", tokens, o, r, 2 * n, w_bytes))
    if adapters:
        clone = w.task == "qlora" and w.qlora_kernel == "bitsandbytes"
        per = [lora_elementwise_bytes(i, o, c.act_b, w.lora_dropout > 0, clone) for _, i, o, _ in adapters]
        f_b = tokens * sum(n * p[0] for (_, _, _, n), p in zip(adapters, per, strict=True))
        b_b = tokens * sum(n * p[1] for (_, _, _, n), p in zip(adapters, per, strict=True))
        fwd.append(roof("lora dropout, scale, add", "forward", 0.0, f_b, 1.0, c.bw * eff.COPY_BW_EFF))
        bwd.append(roof("lora dropout, scale, add", "backward", 0.0, b_b, 1.0, c.bw * eff.COPY_BW_EFF))
    casts = _fp8_casts(c, w, model, tokens, frozen)
    if casts is not None:
        fwd.append(casts[0])
        bwd.append(casts[1])
    if w.task == "qlora":
        base = sum(g.total for g in model.groups if g.linear is not None and g.role != "head") / tp
        fwd.append(roof("nf4 dequantise", "forward", 0.0, base * NF4_DEQUANT_BYTES, 1.0, c.bw * eff.COPY_BW_EFF))
        bwd.append(roof("nf4 dequantise", "backward", 0.0, base * NF4_DEQUANT_BYTES, 1.0, c.bw * eff.COPY_BW_EFF))
    return fwd, bwd


def _layer_ops(c: Ctx, model: ModelSpec, w: Workload, tokens: float) -> tuple[list[Op], list[Op], list[Op], list[Op]]:
    """Attention (forward, backward), the elementwise work of each layer and the loss: returns
    (forward, backward, attention forward, attention backward); the first two hold the attention too."""
    seq = float(w.seq_len)
    fwd: list[Op] = []
    bwd: list[Op] = []
    attn_fwd: list[Op] = []
    attn_bwd: list[Op] = []
    for s in stack_shapes(model):
        # under CP each rank's queries attend over the whole sequence (load-balanced causal chunks)
        attn_fwd += attention_op(c, s, tokens, seq, "forward")
        attn_bwd += attention_op(c, s, tokens, seq, "backward", backward=True)
        ew = elementwise_bytes(s, c) * tokens * s.layers / (w.tp if w.sequence_parallel else 1)
        fwd.append(roof("norms, activations, residuals", "forward", 0.0, ew, 1.0, c.bw * eff.COPY_BW_EFF))
        bwd.append(roof("norms, activations, residuals", "backward", 0.0, 2 * ew, 1.0, c.bw * eff.COPY_BW_EFF))
    fwd += attn_fwd
    bwd += attn_bwd
    if any(g.role == "head" and g.linear is not None for g in model.groups):
        per_logit = LOSS_BYTES_PER_LOGIT_COMPILED if w.compile else LOSS_BYTES_PER_LOGIT[w.loss_impl]
        loss_bytes = tokens * model.vocab_size / w.tp * per_logit
        fwd.append(roof("loss (softmax cross-entropy)", "forward", 0.0, loss_bytes, 1.0, c.bw * eff.COPY_BW_EFF))
    return fwd, bwd, attn_fwd, attn_bwd


def _op_recompute(fwd: tuple[Op, ...] | list[Op]) -> list[Op]:
    """torchtitan's per-op selective checkpointing runs again every other matmul of each layer and
    the elementwise work; attention's output is saved, so the kernel does not run again
    (torchtitan/models/llama3/parallelize_llama.py@01c79fdf6ce3ca7ed1f6808ba8a395a155bbdc40 _save_list).
    A float8 linear still reaches the policy as aten.mm (the checkpoint's dispatch mode sees it before
    torchao's tensor subclass turns it into _scaled_mm), so the same half runs again with its casts."""
    out = []
    for o in fwd:
        if _once(o) or o.name.startswith("attention"):
            continue
        k = 0.5 if o.name.startswith(("linear", "lora", "nf4", "fp8 casts")) else 1.0
        out.append(Op(o.name, "recompute", o.flops * k, o.bytes * k, o.time_s * k, o.bound))
    return out


def _recompute(w: Workload, fwd: list[Op], attn_fwd: list[Op]) -> list[Op]:
    """What checkpointing runs again in backward: every layer's forward (full), attention
    (selective), or every other matmul and the elementwise work (selective-op)."""
    if w.activation_checkpointing == "full":
        return [Op(o.name, "recompute", o.flops, o.bytes, o.time_s, o.bound) for o in fwd if not _once(o)]
    if w.activation_checkpointing == "selective":
        return [Op(o.name, "recompute", o.flops, o.bytes, o.time_s, o.bound) for o in attn_fwd]
    if w.activation_checkpointing == "selective-op":
        return _op_recompute(fwd)
    return []


def _sum_ops(ops: list[Op], once: bool) -> float:
    return sum(o.time_s for o in ops if _once(o) == once)


def training_ops(model: ModelSpec, w: Workload, gpu: GPU) -> MicroOps:
    """The operators of one micro-batch (w.batch_size sequences) at w's tp, cp, ep, checkpointing
    and sequence parallelism, all layers on this GPU; `parallel.compose` splits them over stages."""
    c = make_ctx(model, w, gpu)
    c.pp = 1
    tp, cp, ep, etp = w.tp, w.cp, w.ep, w.expert_tp
    tokens = w.batch_size * float(w.seq_len) / cp  # this rank's share of the micro-batch (TP ranks share it)
    trainable, _, adapters = _trainable_params(model, w)
    lin_fwd, lin_bwd = _linear_ops(c, model, w, tokens)
    lay_fwd, lay_bwd, attn_fwd, attn_bwd = _layer_ops(c, model, w, tokens)
    # the order of the operators as before the split: linears, the elementwise work, attention, loss
    fwd, bwd = lin_fwd + lay_fwd, lin_bwd + lay_bwd
    recompute = _recompute(w, fwd, attn_fwd)
    attn_rec = w.activation_checkpointing in ("selective", "full")
    per_param = OPTIMIZER_BYTES[w.optimizer] if w.master_weights == "fp32" else OPTIMIZER_BYTES_PURE16
    offload_s = 0.0
    if w.offload != "none":
        # CPU-Adam per parameter, plus fp32 gradients out and 16-bit parameters back over PCIe
        offload_s = 1.0 / CPU_ADAM_PARAMS_PER_S + 6.0 / comm.host_link_bandwidth(gpu)
    shapes = stack_shapes(model)
    expert = float(sum(g.total for g in model.groups if g.role == "expert"))
    expert_trainable = expert if w.task in ("pretrain", "finetune") else 0.0
    layers = sum(s.layers for s in shapes)
    kernels = (kernels_per_layer(model) * layers + _adapter_kernels(w, adapters)) * (3 + (1 if recompute else 0))
    d = model.hidden_size
    kv = sum((s.k + s.v) * s.layers for s in shapes)
    full = w.activation_checkpointing == "full"
    profile = MicroProfile(
        layer_fwd_s=_sum_ops(fwd, False),
        layer_bwd_s=_sum_ops(bwd, False),
        layer_rec_s=_sum_ops(recompute, False),
        once_fwd_s=_sum_ops(fwd, True),
        once_bwd_s=_sum_ops(bwd, True),
        attn_s=sum(o.time_s for o in (*attn_fwd, *attn_bwd)) + (sum(o.time_s for o in attn_fwd) if attn_rec else 0.0),
        launch_floor_s=kernels * launch_s(not w.compile),
        tp_bytes=tokens * d * c.act_b if tp > 1 else 0.0,
        tp_collectives=(4 + (2 if full else 0)) * layers,
        cp_bytes=tokens * kv / tp * c.act_b if cp > 1 else 0.0,
        cp_passes=3.0 + (1.0 if full else 0.0),
        ep_bytes=tokens * etp / tp * max(model.experts_per_token, 1) * d * c.act_b if ep > 1 else 0.0,
        ep_collectives=(4 + (2 if full else 0)) * float(model.moe_layers),
        ep_stride=float(etp),
        p2p_bytes=tokens * d * c.act_b / (tp if w.sequence_parallel else 1),
        layers=layers,
        dense_params=float(model.total_params) - expert,
        expert_params=expert,
        dense_trainable=trainable - expert_trainable,
        expert_trainable=expert_trainable,
        grad_b=4.0 if w.master_weights == "fp32" else 2.0,
        param_b=c.act_b if w.task != "qlora" else QLORA_GATHERED_BYTES_PER_PARAM,
        opt_bytes_per_param=per_param,
        offload_s_per_param=offload_s,
        opt_bw=c.bw * eff.KERNEL_BW_EFF,  # the optimizer step: a memory-bound elementwise kernel
        full_recompute=full,
        tp_overlap=comm.tp_overlap_share(w.tp_comm_overlap, w.framework, w.compile),
        bwd_gathers_exposed=w.fsdp_wrap == "adapters" and w.task in ("lora", "qlora"),
        h2d_s_per_byte=1.0 / comm.host_link_bandwidth(gpu) if w.offload == "optimizer+params" else 0.0,
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
    attn = float(p.attn_s) - (attn_fwd if any(o.name.startswith("attention") for o in mo.recompute) else 0.0)
    op_rec = sum(o.time_s for o in _op_recompute(mo.fwd))
    rec = {"none": 0.0, "selective": attn_fwd, "selective-op": op_rec, "full": float(p.layer_fwd_s)}[checkpointing]
    full = checkpointing == "full"
    return replace(
        p,
        layer_rec_s=rec,
        attn_s=attn + (attn_fwd if checkpointing in ("selective", "full") else 0.0),
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


def _links(gpu: GPU, w: Workload, cluster: Cluster | None) -> tuple[GPU, Cluster]:
    """The card and cluster the step runs on: without NVLink where the workload says (`nvlink: false`)."""
    gpu = gpu if w.nvlink else comm.without_nvlink(gpu)
    return gpu, replace(cluster, gpu=gpu) if cluster else implied_cluster(gpu, w.num_gpus)


def _pipeline_notes(model: ModelSpec, w: Workload, once: bool) -> list[str]:
    """The bubble, the FSDP + PP gathers (torchtitan) and an uneven split, where pp > 1."""
    pp, m = w.pp, w.micro_batches
    if pp <= 1:
        return []
    notes = [f"pipeline bubble: (pp-1)/(vp x micro-batches) = {pp - 1}/({w.vp} x {m}) of a step"]
    if once:
        notes.append(
            "torchtitan FSDP + PP: each stage's parameters are all-gathered once per step and its gradients "
            "reduce-scattered after the last micro-batch (reshard_after_forward off under PP)"
        )
    layers = max(model.num_layers, 1)
    if layers % (pp * w.vp):
        most = math.ceil(layers / (pp * w.vp))
        notes.append(
            f"uneven pipeline: {layers} layers over {pp} x {w.vp} virtual stages, up to {most} a stage; "
            "timed on the fullest rank (Megatron-Core --pipeline-model-parallel-layout)"
        )
    return notes


def estimate_training_time(model: ModelSpec, w: Workload, gpu: GPU, cluster: Cluster | None = None) -> TrainingTime:
    """One training step of workload `w` on `gpu` (or on `cluster`'s nodes; default: 8-GPU nodes)."""
    if model.kind == "cnn":
        return cnn_training(make_ctx(model, w, gpu))
    gpu, cl = _links(gpu, w, cluster)
    check_layout(model, w)
    mo = training_ops(model, w, gpu)
    pp, m = w.pp, w.micro_batches
    once = fsdp_keeps_stage_gathered(w.framework, w.zero, pp, w.dp * w.cp)
    parts = compose(mo.profile, cl, w.tp, w.cp, w.ep, pp, w.vp, w.dp, w.zero, m, w.sharding, once)
    spill_bytes, page_s = _paged_spill(model, w, gpu)
    step = float(parts.step) + page_s
    micro_launch = float(parts.launch) / m
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
    opt_t = float(parts.optimizer)
    opt_name = "optimizer step on CPU (offload)" if w.offload != "none" else f"optimizer step ({w.optimizer})"
    opt_ops = [Op(opt_name, "optimizer", 0.0, 0.0, opt_t, "memory")]
    if page_s > 0:
        opt_ops.append(Op("paged optimizer states in and out of host RAM", "optimizer", 0.0, spill_bytes, page_s,
                          "communication"))  # fmt: skip
    comm_ops = [
        Op(name, "communication", 0.0, 0.0, float(t), "communication")
        for name, t in (
            ("tensor-parallel all-reduces", parts.tp),
            ("context-parallel ring (K, V) exposed", parts.cp),
            ("expert-parallel all-to-all", parts.ep),
            ("pipeline send/recv", parts.pp),
            ("pipeline bubble", parts.bubble),
            ("data-parallel gradients/parameters exposed", parts.dp),
        )
        if float(t) > 0
    ]
    ops = (*fwd, *bwd, *rec, *opt_ops, *comm_ops)
    if micro_launch > 0:
        ops = (*ops, Op("kernel launches (CPU-bound)", "launch", 0.0, 0.0, micro_launch * m, "launch"))
    exposed_comm = sum(float(t) for t in (parts.tp, parts.cp, parts.ep, parts.pp, parts.dp))
    bubble = float(parts.bubble)
    split = {
        "compute": sum(o.time_s for o in (*fwd, *bwd, *rec) if o.bound == "compute") * m,
        "memory bandwidth": sum(o.time_s for o in (*fwd, *bwd, *rec) if o.bound == "memory") * m + opt_t,
        "communication": exposed_comm + bubble + page_s,
        "kernel launch": micro_launch * m,
    }
    bottleneck = max(split, key=lambda k: split[k])
    train_tokens = w.train_tokens
    notes = list(mo.notes)
    notes += _pipeline_notes(model, w, once)
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
        compute_s=float(parts.compute),
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


def _adapter_kernels(w: Workload, adapters: list[tuple[str, int, int, float]]) -> float:
    """Kernels the LoRA adapters launch in a forward pass, all layers: each adapted linear's
    `result + lora_B(lora_A(dropout(x))) * scaling` is two GEMMs, the multiply and the add, the
    dropout where lora_dropout > 0, and bitsandbytes 4-bit's `result.clone()` (PEFT v0.10.0,
    src/peft/tuners/lora/layer.py and bnb.py: lora_elementwise_bytes' operations, one kernel each)."""
    per = (
        4.0
        + (1.0 if w.lora_dropout > 0 else 0.0)
        + (1.0 if w.task == "qlora" and w.qlora_kernel == "bitsandbytes" else 0.0)
    )
    return per * sum(n for *_, n in adapters)


def kernels_per_layer(model: ModelSpec) -> float:
    """Kernels one layer launches in a forward pass: one per linear, attention, and about six
    elementwise ones (2 norms, 2 residual adds, rotary, activation)."""
    linears = sum(1 for g in model.groups if g.linear is not None and g.role not in ("head",))
    return linears + 7.0
