"""Collective communication: ring all-reduce, all-gather, reduce-scatter and point-to-point, each
with a bandwidth and a latency term (the alpha-beta model: Thakur, Rabenseifner & Gropp 2005,
"Optimization of Collective Communication Operations in MPICH"; NCCL's nccl-tests PERFORMANCE.md
defines bus bandwidth the same way: all-reduce moves 2(n-1)/n of the buffer per GPU, all-gather
and reduce-scatter (n-1)/n).

Links: NVLink/NVSwitch inside a node (the catalog's bandwidth, both directions, halved for one
direction), else PCIe; between nodes each GPU's NIC (rails: one NIC per GPU on HGX nodes).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Final

from gpuplan.specs.gpu import GB, GPU
from gpuplan.specs.model import ModelSpec
from gpuplan.specs.workload import Workload

# nccl-tests all-reduce bus bandwidth on NVLink/NVSwitch: 231.6-235 GB/s on 8x A100 (77-78% of the
# 300 GB/s one-direction rate); 367 GB/s ring all-reduce on 8x H200 without SHARP (82% of 450);
# NCCL maintainers: ~370 of 450 (NVIDIA/nccl-tests#175, #212; Azure/AI-benchmarking-guide@8fd0c6e1).
NVLINK_EFF: Final = 0.80
# PCIe x16 per direction, GB/s by generation (PCI-SIG: 8, 16, 32 GT/s per lane with 128b/130b).
PCIE_GBPS: Final = {3: 15.75, 4: 31.5, 5: 63.0, 6: 121.0}
PCIE_EFF: Final = 0.80
# GeForce cards since the RTX 40 series have P2P disabled: GPU-to-GPU traffic is ~26-28 GB/s
# whatever the PCIe generation (8x RTX 5090 all-reduce busbw 28 GB/s, "little different from
# 8x 4090"; RTX 4090 copy ~26 GB/s: sources in gpuplan's notes, see README "Performance model").
NO_P2P_CAP_GBPS: Final = 27.0
# Inter-node NIC per GPU: DGX/HGX H100/H200 8x ConnectX-7 at 400 Gb/s (NVIDIA DGX BasePOD reference
# architecture); HGX A100 nodes 8x 200 Gb/s HDR (llm-foundry's A100 tables: "1600 Gbps node-node");
# PCIe servers typically one 100 Gb/s Ethernet port per node. 80% achieved (nccl-tests).
NIC_GBPS_BY_ARCH: Final = {"Ampere": 25.0, "Hopper": 50.0, "Blackwell": 50.0, "CDNA 3": 50.0, "CDNA 2": 25.0}
NIC_GBPS_DEFAULT: Final = 12.5
NIC_EFF: Final = 0.80
# Per-step latency of a ring collective: 8-GPU small-message all-reduce takes ~25-45 us on A100/H100
# NVLink (14 ring steps: ~2.5 us each) and 42 us on 8x RTX 4090 over PCIe (~3 us); across
# InfiniBand ~15 us per hop.
LATENCY_NVLINK_S: Final = 2.5e-6
LATENCY_PCIE_S: Final = 3.0e-6
LATENCY_NET_S: Final = 15e-6
# GPUs per node when a group spans hosts (HGX/DGX: 8).
GPUS_PER_NODE: Final = 8
# Share of a collective that overlaps with compute when there is enough compute to hide it
# behind: NCCL kernels take SMs from the GEMMs they overlap (derived; calibrated on the
# llm-foundry FSDP rows).
OVERLAP_EFF: Final = 0.85


def pcie_bandwidth(gpu: GPU) -> float:
    """Achieved PCIe bandwidth per direction, bytes/s."""
    bw = PCIE_GBPS.get(gpu.pcie_gen, 31.5) * GB * PCIE_EFF
    if gpu.geforce_eula and gpu.launch_year >= 2022:
        bw = min(bw, NO_P2P_CAP_GBPS * GB)
    return bw


def link(gpu: GPU, n: int) -> tuple[float, float, str]:
    """(bus bandwidth bytes/s, per-step latency s, link name) for a group of `n` GPUs."""
    if n > GPUS_PER_NODE:
        # NCCL runs one ring per NIC rail, so a node's NICs work in parallel: bus bandwidth is the
        # node's aggregate NIC rate (nccl-tests on 8x400G DGX H100 nodes: ~370 GB/s all-reduce
        # busbw), capped by the links inside the node
        nic = NIC_GBPS_BY_ARCH.get(gpu.architecture, NIC_GBPS_DEFAULT) if gpu.multi_node else NIC_GBPS_DEFAULT
        per_node = (nic * GPUS_PER_NODE if gpu.multi_node else nic) * GB * NIC_EFF
        inside, _, _ = link(gpu, min(GPUS_PER_NODE, max(gpu.nvlink_domain, 2)))
        return min(per_node, inside), LATENCY_NET_S, "network"
    if gpu.nvlink_bandwidth_bytes_per_s > 0 and n <= gpu.nvlink_domain:
        return gpu.nvlink_bandwidth_bytes_per_s / 2 * NVLINK_EFF, LATENCY_NVLINK_S, "NVLink"
    return pcie_bandwidth(gpu), LATENCY_PCIE_S, "PCIe"


def _steps(n: int) -> float:
    # rings inside a node; trees (log n) across nodes (NCCL picks trees at scale for latency)
    return float(n - 1) if n <= GPUS_PER_NODE else 2.0 * math.log2(n)


def allreduce_time(gpu: GPU, n: int, nbytes: float) -> tuple[float, float]:
    """(time, bytes each GPU sends) of a ring all-reduce of `nbytes` over `n` GPUs."""
    if n <= 1 or nbytes <= 0:
        return 0.0, 0.0
    bw, lat, _ = link(gpu, n)
    moved = 2.0 * (n - 1) / n * nbytes
    return moved / bw + 2 * _steps(n) * lat, moved


def gather_time(gpu: GPU, n: int, nbytes: float) -> tuple[float, float]:
    """(time, bytes moved per GPU) of an all-gather or reduce-scatter of a `nbytes` full buffer."""
    if n <= 1 or nbytes <= 0:
        return 0.0, 0.0
    bw, lat, _ = link(gpu, n)
    moved = (n - 1) / n * nbytes
    return moved / bw + _steps(n) * lat, moved


def p2p_time(gpu: GPU, nbytes: float) -> float:
    bw, lat, _ = link(gpu, 2)
    return nbytes / bw + lat


def exposed(overlappable: float, window: float) -> float:
    """Communication time left after hiding what fits behind `window` seconds of compute."""
    hidden = OVERLAP_EFF * min(overlappable, window)
    return overlappable - hidden


@dataclass
class TrainingComm:
    tp_per_micro: float = 0.0  # exposed (Megatron TP all-reduces sit on the critical path)
    pp_per_micro: float = 0.0
    dp_overlappable: float = 0.0  # per step: gradient all-reduce / FSDP gathers behind compute
    dp_exposed: float = 0.0  # per step: what cannot overlap (ZeRO-1/2 parameter all-gather)
    ops: list[tuple[str, float, float]] = field(default_factory=list)  # (name, bytes per GPU, time) per step


def training_comm(
    model: ModelSpec, w: Workload, gpu: GPU, tokens: float, act_b: float, trainable: float, lora: bool
) -> TrainingComm:
    """Per-GPU communication of one training step (`tokens` per micro-batch per GPU)."""
    out = TrainingComm()
    tp, pp, dp = w.tp, w.pp, w.dp
    m = w.grad_accum
    layers = max(model.num_layers, 1) / pp
    if tp > 1:
        # Megatron: 2 all-reduces forward, 2 backward per layer (+2 more with full recompute) of
        # tokens x hidden activations; sequence parallelism swaps each for a reduce-scatter plus an
        # all-gather of the same total volume (Korthikanti et al. 2022, sec. 4.2.2)
        per = 4 + (2 if w.activation_checkpointing == "full" else 0)
        t, moved = allreduce_time(gpu, tp, tokens * model.hidden_size * act_b)
        out.tp_per_micro = t * per * layers
        out.ops.append(("tensor-parallel all-reduces", moved * per * layers * m, out.tp_per_micro * m))
    if pp > 1:
        t = p2p_time(gpu, tokens * model.hidden_size * act_b)
        out.pp_per_micro = 2 * t  # activations forward, gradients backward
        out.ops.append(("pipeline send/recv", 2 * tokens * model.hidden_size * act_b * m, out.pp_per_micro * m))
    if dp <= 1:
        return out
    n_params = model.total_params / (tp * pp)
    grad_b = 4.0 if w.master_weights == "fp32" else 2.0
    grads = trainable / (tp * pp) * grad_b
    param_b = act_b if not lora or w.task != "qlora" else 0.53  # FSDP gathers the stored (NF4) base
    if w.zero >= 3:
        # FSDP / ZeRO-3: all-gather parameters forward and again backward, reduce-scatter gradients
        # (Rajbhandari et al. 2020, sec. 7.2.2: 3x the parameter volume against DDP's 2x)
        t_ag, b_ag = gather_time(gpu, dp, n_params * param_b)
        t_rs, b_rs = gather_time(gpu, dp, grads)
        gathers = 2 + (1 if w.activation_checkpointing == "full" else 0)
        out.dp_overlappable = (t_ag * gathers) * m + t_rs * m if not lora else t_ag * gathers * m + t_rs
        # the first layer's gather of each pass cannot hide (prefetch starts with it)
        out.dp_exposed = t_ag * gathers / max(model.num_layers, 1)
        out.ops.append(("FSDP all-gather of parameters", b_ag * gathers * m, t_ag * gathers * m))
        out.ops.append(("FSDP reduce-scatter of gradients", b_rs * m, t_rs * m))
    elif w.zero in (1, 2):
        t_rs, b_rs = gather_time(gpu, dp, grads)
        t_ag, b_ag = gather_time(gpu, dp, n_params * act_b)
        out.dp_overlappable = t_rs
        out.dp_exposed = t_ag  # updated 16-bit parameters gathered after the step
        out.ops.append(("ZeRO reduce-scatter of gradients", b_rs, t_rs))
        out.ops.append(("ZeRO all-gather of parameters", b_ag, t_ag))
    else:
        t_ar, b_ar = allreduce_time(gpu, dp, grads)
        out.dp_overlappable = t_ar  # DDP buckets all-reduce during backward (Li et al. 2020)
        out.ops.append(("data-parallel gradient all-reduce", b_ar, t_ar))
    return out
