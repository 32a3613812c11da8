"""One training step of a parallel layout, composed from one micro-batch's compute profile.

A micro-batch's compute on one GPU depends on the tensor-parallel size, context-parallel size,
expert-parallel size, micro-batch size, checkpointing and sequence parallelism (`MicroProfile`,
built by perf.py's operator roofline at pp = 1). Everything else a layout changes is composed
here, vectorised over layouts (numpy arrays), so that `estimate_training_time` and the layout
search run the same arithmetic (one layout's on Python floats, without numpy: comm.xp):

- pipeline parallelism: each stage runs 1/pp of the layers (the last stage adds the head and the
  loss); the 1F1B bubble is (pp - 1) stage-times per step, divided by the interleaved virtual
  stages vp (Narayanan et al. 2021, sec. 2.2); activations and gradients cross 2 x vp stage
  boundaries per micro-batch;
- tensor parallelism: Megatron's 4 all-reduces per layer (6 with full recompute) on the critical
  path; sequence parallelism swaps each for a reduce-scatter + all-gather of the same volume
  (Korthikanti et al. 2022, sec. 4.2.2); with --tp-comm-overlap they are chunked behind the GEMMs
  (Transformer Engine userbuffers; Wang et al. 2023, "Overlap communication with dependent
  computation via decomposition");
- context parallelism: ring attention passes each rank's K and V around the cp ranks (cp - 1 hops)
  forward and K, V plus their gradients backward, hidden behind the attention it overlaps
  (Megatron-Core context_parallel; Liu et al. 2023, Ring Attention);
- expert parallelism: token dispatch and combine all-to-alls, 2 forward and 2 backward per MoE
  layer (Lepikhin et al. 2020, GShard; Megatron-Core's all-to-all dispatcher);
- data parallelism over dp x cp ranks: DDP's gradient all-reduce during the last micro-batch's
  backward; ZeRO-1/2's reduce-scatter plus the parameter all-gather after the step; ZeRO-3/FSDP's
  parameter all-gathers forward and backward and gradient reduce-scatter in every micro-batch,
  prefetched behind compute (Rajbhandari et al. 2020; Zhao et al. 2023, PyTorch FSDP), except the
  backward ones where each LoRA adapter is its own FSDP unit (see `MicroProfile.bwd_gathers_exposed`);
  with parameters offloaded to the host, each gather first copies this GPU's shard over PCIe;
  under pipeline parallelism torchtitan's FSDP2 keeps the stage gathered for the whole step instead:
  one all-gather and one reduce-scatter per step (`fsdp_pp.FSDP_PP_GATHER_ONCE`);
- the optimizer step over this GPU's shard of the trainable parameters.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from gpuplan.estimators import comm
from gpuplan.estimators import efficiency as eff
from gpuplan.estimators.comm import Num
from gpuplan.specs.cluster import Cluster

if TYPE_CHECKING:
    from gpuplan.estimators.comm import Arr, Bools

# DeepSpeed ZeRO-1/2 gathers the updated 16-bit parameters after the step with nothing to overlap;
# FSDP (SHARD_GRAD_OP) and Megatron's distributed optimizer (--overlap-param-gather) gather them
# layer by layer behind the next forward.
ZERO12_GATHER_OVERLAPS: Final = {"fsdp": True, "deepspeed": False}


@dataclass(frozen=True)
class MicroProfile:
    """One micro-batch on one GPU, all layers on it (pp = 1); seconds and bytes. Each field may be
    an array (one entry per layout) when many shapes are composed at once."""

    layer_fwd_s: float | Arr
    layer_bwd_s: float | Arr
    layer_rec_s: float | Arr
    once_fwd_s: float | Arr  # embedding, head and loss: on the last pipeline stage only
    once_bwd_s: float | Arr
    attn_s: float | Arr  # attention forward + backward (+ recompute), all layers: what ring attention hides behind
    launch_floor_s: float | Arr  # CPU time to issue the layers' kernels (eager PyTorch), all layers
    tp_bytes: float | Arr  # one tensor-parallel all-reduce's buffer
    tp_collectives: float | Arr  # all-reduces per micro-batch, all layers
    cp_bytes: float | Arr  # K and V of this rank's chunk, all layers (one ring hop)
    cp_passes: float | Arr  # ring passes per micro-batch: forward 1, backward 2, recompute 1
    ep_bytes: float | Arr  # one all-to-all's buffer per MoE layer
    ep_collectives: float | Arr  # all-to-alls per micro-batch, all MoE layers
    ep_stride: float | Arr  # rank distance between members of an expert-parallel group (the expert TP size)
    p2p_bytes: float | Arr  # activations crossing a pipeline stage boundary
    layers: float | Arr
    dense_params: float | Arr  # parameters every data-parallel rank holds (before tp x pp)
    expert_params: float | Arr  # MoE expert parameters (split over ep too)
    dense_trainable: float | Arr
    expert_trainable: float | Arr
    grad_b: float | Arr  # bytes per gradient element reduced
    param_b: float | Arr  # bytes per parameter element gathered (ZeRO-3 / FSDP)
    opt_bytes_per_param: float | Arr  # optimizer-step traffic per trainable parameter
    offload_s_per_param: float | Arr  # CPU optimizer (offload) seconds per local trainable parameter; 0 if none
    opt_bw: float | Arr  # device bandwidth the optimizer step streams at
    full_recompute: bool | Arr
    # share of the tensor-parallel collectives hidden behind the GEMMs (comm.tp_overlap_share): 0
    # without overlap, Megatron-Core's --tp-comm-overlap, torchtitan's async TP
    tp_overlap: float | Arr = 0.0
    # ZeRO-3 backward gathers wait in line: PEFT's fsdp_auto_wrap_policy makes every LoRA adapter an
    # FSDP unit nested in its block's (AnswerDotAI/fsdp_qlora:train.py@7242daa5c6c5ba370c4236b8044d90f7416c046f
    # get_wrapping_policy: lambda_policy_fn, the same rule as huggingface/peft src/peft/utils/other.py
    # fsdp_auto_wrap_policy that accelerate applies); FSDP issues every unit's
    # all-gather on one stream in order, so the adapters' small gathers, which the recomputed forward
    # needs first, queue behind the next block's prefetched one: the backward prefetch order is
    # broken and the block's gathers are not hidden (pytorch/pytorch#175406, nested units under
    # activation checkpointing; #105635, the extra backward all-gather that spoils the overlap)
    bwd_gathers_exposed: bool | Arr = False
    # FSDP CPUOffload(offload_params=True) / ZeRO-Infinity: the sharded parameters live in host RAM,
    # so each all-gather first copies this GPU's shard to the device; seconds per byte of the host link
    h2d_s_per_byte: float | Arr = 0.0


@dataclass(frozen=True)
class StepParts:
    """Per layout: the step and its parts (seconds), arrays of one entry per layout (floats for one)."""

    step: Num
    compute: Num  # micro-batches' compute (max of GPU time and CPU launch time)
    launch: Num  # of it, what the CPU launch floor adds
    tp: Num
    cp: Num
    ep: Num
    pp: Num
    bubble: Num
    dp: Num
    optimizer: Num


def _f(x: float | Arr | Bools) -> Num:
    a: Num = comm.xp(x).asarray(x, dtype=float)
    return a


def stage_share(layers: float | Arr, pp: float | Arr, vp: float | Arr = 1) -> Num:
    """Share of the layers on the fullest pipeline rank: 1/pp where the pp x vp virtual stages
    divide them evenly, else ceil(layers / (pp x vp)) on each of its vp chunks, / layers."""
    np = comm.xp(layers, pp, vp)
    pp_a, vp_a = _f(pp), _f(vp)
    n = np.maximum(_f(layers), 1.0)
    share: Num = np.minimum(np.ceil(n / (pp_a * vp_a)) * vp_a / n, 1.0)
    return share


def compose(
    p: MicroProfile,
    cl: Cluster,
    tp: int | Arr,
    cp: int | Arr,
    ep: int | Arr,
    pp: int | Arr,
    vp: int | Arr,
    dp: int | Arr,
    zero: int | Arr,
    micro_batches: int | Arr,
    sharding: str = "fsdp",
    gather_once: bool = False,  # ZeRO-3 with pp > 1 gathers each stage once a step (fsdp_pp.FSDP_PP_GATHER_ONCE)
) -> StepParts:
    # numpy for arrays (the layout search), Python floats for one layout (comm.xp)
    np = comm.xp(tp, cp, ep, pp, vp, dp, zero, micro_batches, *vars(p).values())
    tp_a, cp_a, ep_a, pp_a, vp_a, dp_a, z, m = (_f(x) for x in (tp, cp, ep, pp, vp, dp, zero, micro_batches))
    gpn = cl.gpus_per_node

    # --- one micro-batch on the busiest (last) stage ---
    # its share of the layers: 1/pp where pp x vp virtual stages divide them, else the fullest
    # virtual stage's ceil(layers / (pp x vp)) on each of vp chunks (an uneven layout)
    share = stage_share(p.layers, pp_a, vp_a)
    gpu_time = (p.layer_fwd_s + p.layer_bwd_s + p.layer_rec_s) * share + p.once_fwd_s + p.once_bwd_s
    floor = p.launch_floor_s * share
    # GPU time and kernel issue joined at the roofline's smoothed corner (efficiency.ROOF_P: why)
    micro = (gpu_time**eff.ROOF_P + floor**eff.ROOF_P) ** (1.0 / eff.ROOF_P)
    launch = micro - gpu_time

    tp_raw = comm.allreduce(cl, tp_a, np.minimum(tp_a, gpn), p.tp_bytes) * p.tp_collectives * share
    t_tp = comm.exposed(tp_raw, gpu_time, p.tp_overlap)
    cp_link, cp_lat, _ = comm.group_link(cl, cp_a, comm.members_per_node(cl, cp_a, tp_a))
    cp_raw = np.where(cp_a > 1, p.cp_passes * (cp_a - 1) * (p.cp_bytes / cp_link + cp_lat * p.layers), 0.0) * share
    t_cp = comm.exposed(cp_raw, p.attn_s * share)
    # Megatron-Core lays expert ranks out etp-ep-dp-pp (parallel_state.py, expert rank generator; MoE
    # parallel folding, Liu et al. 2025): an ep group's members sit etp ranks apart
    t_ep = (
        comm.all_to_all(cl, ep_a, comm.members_per_node(cl, ep_a, p.ep_stride), p.ep_bytes) * p.ep_collectives * share
    )
    stage_crosses = (tp_a * cp_a * dp_a >= gpn) & (cl.nodes > 1)
    pp_raw = np.where(pp_a > 1, 2.0 * vp_a * comm.p2p(cl, stage_crosses, p.p2p_bytes), 0.0)
    # the interleaved schedule batches its sends and receives behind the next chunk's compute
    # (Megatron-LM overlap_p2p_comm, on unless --no-overlap-p2p-communication); 1F1B waits on them
    t_pp = np.where(vp_a > 1, comm.exposed(pp_raw, gpu_time), pp_raw)
    stage = micro + t_tp + t_cp + t_ep + t_pp
    bubble = np.where(pp_a > 1, (pp_a - 1.0) / vp_a * stage, 0.0)

    # --- data parallelism over dp x cp ranks (context-parallel ranks hold the same weights) ---
    dpc = dp_a * cp_a
    edp = np.maximum(dpc / ep_a, 1.0)  # expert-data-parallel ranks
    mp = tp_a * pp_a
    grads_d = p.dense_trainable / mp * p.grad_b
    grads_e = p.expert_trainable / (mp * ep_a) * p.grad_b
    params_d = p.dense_params / mp * p.param_b
    params_e = p.expert_params / (mp * ep_a) * p.param_b
    k_d = comm.members_per_node(cl, dpc, tp_a)
    k_e = comm.members_per_node(cl, edp, tp_a * ep_a)
    bwd_last = p.layer_bwd_s * share + p.once_bwd_s
    fwd_first = p.layer_fwd_s * share
    ar = comm.allreduce(cl, dpc, k_d, grads_d) + comm.allreduce(cl, edp, k_e, grads_e)
    rs = comm.gather(cl, dpc, k_d, grads_d) + comm.gather(cl, edp, k_e, grads_e)
    ag = comm.gather(cl, dpc, k_d, params_d) + comm.gather(cl, edp, k_e, params_e)
    gathers = np.where(p.full_recompute, 3.0, 2.0)
    ag_overlaps = ZERO12_GATHER_OVERLAPS.get(sharding, True)
    dp_z0 = comm.exposed(ar, bwd_last)
    dp_z12 = comm.exposed(rs, bwd_last) + (comm.exposed(ag, fwd_first) if ag_overlaps else ag)
    # ZeRO-3: every gather of a host-offloaded shard starts with its copy to the device
    ag3 = ag + (params_d / dpc + params_e / edp) * p.h2d_s_per_byte
    hidden = np.where(p.bwd_gathers_exposed, 1.0, gathers)  # gathers prefetched behind compute
    per_micro_z3 = ag3 * hidden + rs
    dp_z3 = (
        comm.exposed(per_micro_z3 * m, micro * m)
        + ag3 * (gathers - hidden) * m  # backward gathers that wait in line
        + ag3 * gathers / np.maximum(p.layers, 1)
    )
    # fsdp_pp.FSDP_PP_GATHER_ONCE: one gather behind the first forward; the reduce-scatter after the last backward, exposed
    dp_z3 = np.where((pp_a > 1) & gather_once, comm.exposed(ag3, fwd_first) + rs, dp_z3)
    dp_exposed = np.where(z >= 3, dp_z3, np.where(z >= 1, dp_z12, dp_z0))
    dp_exposed = np.where(dpc > 1, dp_exposed, 0.0)

    # --- optimizer step over this GPU's shard of the trainable parameters ---
    shard_d = np.where(z >= 1, dpc, 1.0)
    shard_e = np.where(z >= 1, edp, 1.0)
    local = p.dense_trainable / (mp * shard_d) + p.expert_trainable / (mp * ep_a * shard_e)
    per_param = np.where(_f(p.offload_s_per_param) > 0, p.offload_s_per_param, _f(p.opt_bytes_per_param) / p.opt_bw)
    opt = local * per_param

    step = m * stage + bubble + dp_exposed + opt
    return StepParts(
        step=step,
        compute=m * micro,
        launch=m * launch,
        tp=m * t_tp,
        cp=m * t_cp,
        ep=m * t_ep,
        pp=m * t_pp,
        bubble=bubble,
        dp=dp_exposed,
        optimizer=opt,
    )
