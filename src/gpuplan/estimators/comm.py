"""Collective communication: ring and tree all-reduce, all-gather, reduce-scatter, all-to-all and
point-to-point, each with a bandwidth and a latency term (the alpha-beta model: Thakur, Rabenseifner & Gropp 2005,
"Optimization of Collective Communication Operations in MPICH"; NCCL's nccl-tests PERFORMANCE.md
defines bus bandwidth the same way: all-reduce moves 2(n-1)/n of the buffer per GPU, all-gather
and reduce-scatter (n-1)/n).

Links: NVLink/NVSwitch inside a node (the catalog's bandwidth, both directions, halved for one
direction), else PCIe; between nodes the cluster's fabric (specs/cluster.py: rails of one NIC per
GPU on HGX/DGX nodes, or one Ethernet port per node). A group is placed as Megatron-Core places
it (rank order tp, cp, dp, pp: tensor-parallel ranks adjacent), so a group of `n` GPUs with
`per_node` of them in each node crosses the network when n > per_node.

The functions take numpy arrays (one entry per layout) so that the layout search evaluates many
layouts at once; given plain numbers (one estimate) they compute the same formulas on Python
floats, without importing numpy (`gpuplan estimate` starts faster: tests/test_startup.py). Each
function calls its namespace `np`, chosen by `xp()`: numpy itself, or `_Floats`.
"""

from __future__ import annotations

import math
import sys
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Final, TypeAlias

from gpuplan.specs.cluster import Cluster, implied_cluster
from gpuplan.specs.gpu import GB, GPU
from gpuplan.specs.workload import Workload

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    Arr: TypeAlias = npt.NDArray[np.float64]
    Bools: TypeAlias = npt.NDArray[np.bool_]

# a figure per layout (an array) or one layout's (a float)
Num: TypeAlias = "float | Arr"

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
# Per-step latency of a ring collective: 8-GPU small-message all-reduce takes ~25-45 us on A100/H100
# NVLink (14 ring steps: ~2.5 us each) and 42 us on 8x RTX 4090 over PCIe (~3 us); across
# InfiniBand see the cluster's fabric (NCCL's tuning model: 14 us per network hop).
LATENCY_NVLINK_S: Final = 2.5e-6
LATENCY_PCIE_S: Final = 3.0e-6
# Share of a collective that overlaps with compute when there is enough compute to hide it
# behind: NCCL kernels take SMs from the GEMMs they overlap (derived; calibrated on the
# llm-foundry FSDP rows).
OVERLAP_EFF: Final = 0.85
# Share of the tensor-parallel collectives torchtitan's async TP hides (parallelism.
# enable_async_tensor_parallel, "only effective when compile is enabled": pytorch/torchtitan:
# torchtitan/config/job_config.py@6404b932421f5ce382e7dac5ad381b2c17b1373c; torch.compile's
# micro-pipeline pass splits each all-gather -> matmul and matmul -> reduce-scatter into per-rank
# chunks over symmetric memory). Its chunked matmuls run below the whole matmul's rate and the copies contend
# with them, so far less is hidden than Megatron-Core's userbuffer overlap (OVERLAP_EFF). Fitted
# on the async/vanilla throughput ratios of the split=fit pairs of torchtitan's async-TP benchmark
# (stacks.csv TTAT-*: 1.09-1.10x measured on its 3 pairs; planner/stack_fits.fit_async_tp finds
# 0.41); the ratio cancels the card, which the rows name only as Meta's 500 W H100.
ASYNC_TP_HIDDEN: dict[str, float] = {"torchtitan": 0.41}


def tp_overlap_share(tp_comm_overlap: bool, framework: str | None, compiled: bool) -> float:
    """The share of the TP collectives hidden behind the matmuls: none without overlap, torchtitan's
    async TP's where the framework is torchtitan (none there without torch.compile), Megatron-Core's
    --tp-comm-overlap otherwise."""
    if not tp_comm_overlap:
        return 0.0
    if framework in ASYNC_TP_HIDDEN:
        return ASYNC_TP_HIDDEN[framework] if compiled else 0.0
    return OVERLAP_EFF


def host_link_bandwidth(gpu: GPU) -> float:
    """Achieved bandwidth per direction between the GPU and host RAM (offloaded optimizer states,
    paged memory), bytes/s: the card's PCIe link, which the GeForce P2P limit does not touch."""
    return PCIE_GBPS.get(gpu.pcie_gen, 31.5) * GB * PCIE_EFF


def without_nvlink(gpu: GPU) -> GPU:
    """The same card with no NVLink between the GPUs (a workload's `nvlink: false`: RTX 3090s or
    A5000s without the bridge): every collective inside the node goes over PCIe."""
    return replace(gpu, nvlink_bandwidth_bytes_per_s=0.0)


def pcie_bandwidth(gpu: GPU) -> float:
    """Achieved GPU-to-GPU PCIe bandwidth per direction, bytes/s."""
    bw = host_link_bandwidth(gpu)
    if gpu.geforce_eula and gpu.launch_year >= 2022:
        bw = min(bw, NO_P2P_CAP_GBPS * GB)
    return bw


class _Floats:
    """The numpy functions this module and parallel.py use, on Python floats, in the same IEEE
    double arithmetic: one estimate's figures are those of the array code, bit for bit
    (tests/test_parallel.py compares them), except that math.log2 and numpy's log2 may differ in
    the last bit from 1,621 GPUs in a group up. `maximum`/`minimum` propagate NaN as numpy's do."""

    float64 = float

    @staticmethod
    def asarray(x: Any, dtype: Any = None) -> float:
        return float(x)

    @staticmethod
    def maximum(a: float, b: float) -> float:
        return a if a >= b or a != a else b

    @staticmethod
    def minimum(a: float, b: float) -> float:
        return a if a <= b or a != a else b

    @staticmethod
    def clip(x: float, lo: float, hi: float) -> float:
        return _Floats.minimum(_Floats.maximum(x, lo), hi)

    @staticmethod
    def floor(x: float) -> float:
        return float(math.floor(x)) if math.isfinite(x) else x

    @staticmethod
    def ceil(x: float) -> float:
        return float(math.ceil(x)) if math.isfinite(x) else x

    @staticmethod
    def log2(x: float) -> float:
        return math.log2(x)

    @staticmethod
    def where(cond: Any, a: Any, b: Any) -> Any:
        return a if cond else b

    @staticmethod
    def ones_like(x: float) -> float:
        return 1.0

    @staticmethod
    def zeros_like(x: float, dtype: Any = None) -> Any:
        return False if dtype is bool else 0.0

    @staticmethod
    def full_like(x: float, value: float) -> float:
        return float(value)


def xp(*values: object) -> Any:
    """numpy where any of `values` is a numpy array or scalar (the layout search), else `_Floats`:
    numpy loads only where arrays are passed (it is already loaded then)."""
    np_ = sys.modules.get("numpy")
    if np_ is not None and any(isinstance(v, np_.ndarray | np_.generic) for v in values):
        return np_
    return _Floats


def _arr(x: Num) -> Num:
    a: Num = xp(x).asarray(x, dtype=float)
    return a


def _intra(gpu: GPU, n: Num) -> tuple[Num, Num]:
    """(bus bandwidth, per-step latency) of `n` GPUs inside one node."""
    np = xp(n)
    nvlink = gpu.nvlink_bandwidth_bytes_per_s > 0
    use_nv = (n <= gpu.nvlink_domain) if nvlink else np.zeros_like(n, dtype=bool)
    bw = np.where(use_nv, gpu.nvlink_bandwidth_bytes_per_s / 2 * NVLINK_EFF, pcie_bandwidth(gpu))
    lat = np.where(use_nv, LATENCY_NVLINK_S, LATENCY_PCIE_S)
    return bw, lat


def members_per_node(cl: Cluster, n: Num, stride: Num) -> Num:
    """GPUs of one group in a node: a group of `n` ranks `stride` apart (Megatron-Core's rank order)."""
    np = xp(n, stride)
    n_a, s_a = _arr(n), np.maximum(_arr(stride), 1.0)
    fit = np.floor(cl.gpus_per_node / s_a)
    clipped: Num = np.clip(fit, 1.0, np.maximum(n_a, 1.0))
    return clipped


def group_link(cl: Cluster, n: Num, per_node: Num) -> tuple[Num, Num, bool | Bools]:
    """(bus bandwidth bytes/s, per-step latency s, crosses nodes) of a group of `n` GPUs with
    `per_node` of them in each node. Across nodes NCCL runs one ring per NIC rail, so a node's
    NICs serving the group work in parallel, capped by the links inside the node."""
    np = xp(n, per_node)
    n_a = _arr(n)
    k = np.minimum(_arr(per_node), n_a)
    bw_in, lat_in = _intra(cl.gpu, np.maximum(k, 2.0))
    crosses = n_a > k
    nics = np.ones_like(k) if cl.fabric.per_node else k
    net = nics * cl.fabric.gbit / 8 * GB * cl.fabric.efficiency
    bw = np.where(crosses, np.minimum(bw_in, net), bw_in)
    lat = np.where(crosses, cl.fabric.latency_s, lat_in)
    return bw, lat, crosses


def _steps(n: Num, crosses: bool | Bools) -> Num:
    # rings inside a node (n - 1 steps); across nodes NCCL's trees and PAT algorithms take
    # ~log2(n) steps each way (Sanders, Speck & Traeff 2009, two-tree; NCCL 2.23 PAT)
    np = xp(n, crosses)
    steps: Num = np.where(crosses, 2.0 * np.log2(np.maximum(n, 2.0)), np.maximum(n - 1.0, 0.0))
    return steps


def allreduce(cl: Cluster, n: Num, per_node: Num, nbytes: Num) -> Num:
    """Time of an all-reduce of `nbytes` per GPU: bandwidth term 2(n-1)/n x bytes / bus bandwidth
    (ring and tree are both bandwidth-optimal), latency a ring's 2(n-1) steps inside a node, a
    tree's 2 x 2 log2(n) across nodes (NCCL picks trees at scale for their latency)."""
    np = xp(n, per_node, nbytes)
    n_a, b = _arr(n), _arr(nbytes)
    bw, lat, crosses = group_link(cl, n_a, per_node)
    t = 2.0 * (n_a - 1.0) / np.maximum(n_a, 1.0) * b / bw + 2.0 * _steps(n_a, crosses) * lat
    out: Num = np.where((n_a > 1) & (b > 0), t, 0.0)
    return out


def gather(cl: Cluster, n: Num, per_node: Num, nbytes: Num) -> Num:
    """Time of an all-gather (or reduce-scatter) whose full buffer is `nbytes`: (n-1)/n moved."""
    np = xp(n, per_node, nbytes)
    n_a, b = _arr(n), _arr(nbytes)
    bw, lat, crosses = group_link(cl, n_a, per_node)
    t = (n_a - 1.0) / np.maximum(n_a, 1.0) * b / bw + _steps(n_a, crosses) * lat
    out: Num = np.where((n_a > 1) & (b > 0), t, 0.0)
    return out


def all_to_all(cl: Cluster, n: Num, per_node: Num, nbytes: Num) -> Num:
    """Time of an all-to-all where each GPU scatters `nbytes` evenly over the group: (k-1)/n of it
    stays in the node, (n-k)/n leaves through the GPU's share of the node's NICs; both at once."""
    np = xp(n, per_node, nbytes)
    n_a, b = _arr(n), _arr(nbytes)
    k = np.minimum(_arr(per_node), n_a)
    bw_in, lat_in = _intra(cl.gpu, np.maximum(k, 2.0))
    nics = np.ones_like(k) if cl.fabric.per_node else k
    net_per_gpu = nics * cl.fabric.gbit / 8 * GB * cl.fabric.efficiency / k
    t_in = b * (k - 1.0) / np.maximum(n_a, 1.0) / bw_in
    t_net = b * (n_a - k) / np.maximum(n_a, 1.0) / net_per_gpu
    nodes = np.ceil(n_a / k)
    lat = np.where(n_a > k, cl.fabric.latency_s * np.log2(np.maximum(nodes, 2.0)), lat_in)
    out: Num = np.where((n_a > 1) & (b > 0), np.maximum(t_in, t_net) + lat, 0.0)
    return out


def p2p(cl: Cluster, crosses: bool | Bools, nbytes: Num) -> Num:
    """Time of a send/recv of `nbytes` to the next pipeline stage (in the node or across it)."""
    np = xp(crosses, nbytes)
    b = _arr(nbytes)
    bw_in, lat_in = _intra(cl.gpu, np.full_like(b, 2.0))
    per_gpu_net = cl.fabric.gbit / 8 * GB * cl.fabric.efficiency / (cl.gpus_per_node if cl.fabric.per_node else 1)
    bw = np.where(crosses, np.minimum(bw_in, per_gpu_net), bw_in)
    lat = np.where(crosses, cl.fabric.latency_s, lat_in)
    out: Num = np.where(b > 0, b / bw + lat, 0.0)
    return out


# --- one group of contiguous GPUs, for callers that give a GPU and a count -------------------


def _contiguous(gpu: GPU, n: int) -> tuple[Cluster, int]:
    cl = implied_cluster(gpu, n)
    return cl, min(n, cl.gpus_per_node)


def link(gpu: GPU, n: int) -> tuple[float, float, str]:
    """(bus bandwidth bytes/s, per-step latency s, link name) for a group of `n` contiguous GPUs."""
    cl, k = _contiguous(gpu, n)
    bw, lat, crosses = group_link(cl, n, k)
    if bool(crosses):
        name = "network"
    elif gpu.nvlink_bandwidth_bytes_per_s > 0 and n <= gpu.nvlink_domain:
        name = "NVLink"
    else:
        name = "PCIe"
    return float(bw), float(lat), name


# A collective over a fixed group costs a + b x bytes (bandwidth and latency terms above), so the
# scalar callers (one estimate at a time: tensor-parallel all-reduces per layer) keep the two
# coefficients per (GPU, group size) instead of evaluating the array formulas on every call.
_AFFINE: dict[tuple[str, str, int], tuple[GPU, float, float]] = {}


def _affine(kind: str, gpu: GPU, n: int) -> tuple[float, float]:
    key = (kind, gpu.name, n)
    hit = _AFFINE.get(key)
    if hit is not None and (hit[0] is gpu or hit[0] == gpu):
        return hit[1], hit[2]
    cl, k = _contiguous(gpu, n)
    fn = allreduce if kind == "allreduce" else gather
    small, large = 1e6, 1e9  # far apart: the slope does not come from a difference of near-equals
    t_small, t_large = float(fn(cl, n, k, small)), float(fn(cl, n, k, large))
    per_byte = (t_large - t_small) / (large - small)
    fixed = t_small - per_byte * small
    _AFFINE[key] = (gpu, per_byte, fixed)
    return per_byte, fixed


def allreduce_time(gpu: GPU, n: int, nbytes: float) -> tuple[float, float]:
    """(time, bytes each GPU sends) of an all-reduce of `nbytes` over `n` contiguous GPUs."""
    if n <= 1 or nbytes <= 0:
        return 0.0, 0.0
    per_byte, fixed = _affine("allreduce", gpu, n)
    return fixed + per_byte * nbytes, 2.0 * (n - 1) / n * nbytes


def gather_time(gpu: GPU, n: int, nbytes: float) -> tuple[float, float]:
    """(time, bytes moved per GPU) of an all-gather or reduce-scatter of a `nbytes` full buffer."""
    if n <= 1 or nbytes <= 0:
        return 0.0, 0.0
    per_byte, fixed = _affine("gather", gpu, n)
    return fixed + per_byte * nbytes, (n - 1) / n * nbytes


def all_to_all_time(gpu: GPU, n: int, nbytes: float) -> float:
    """Time of an all-to-all over `n` contiguous GPUs, each scattering `nbytes` evenly over the group."""
    if n <= 1 or nbytes <= 0:
        return 0.0
    cl, k = _contiguous(gpu, n)
    return float(all_to_all(cl, n, k, nbytes))


def p2p_time(gpu: GPU, nbytes: float) -> float:
    cl, _ = _contiguous(gpu, 2)
    return float(p2p(cl, False, nbytes))


def exposed(overlappable: Num, window: Num, share: Num = OVERLAP_EFF) -> Num:
    """Communication time left after hiding `share` of what fits behind `window` seconds of compute
    (OVERLAP_EFF by default; tp_overlap_share for the tensor-parallel collectives)."""
    o = _arr(overlappable)
    left: Num = o - share * xp(overlappable, window).minimum(o, _arr(window))
    return left


def data_parallel_comm(
    gpu: GPU, w: Workload, grad_bytes: float, param_bytes: float
) -> tuple[float, float, list[tuple[str, float, float]]]:
    """(overlappable s, exposed s, ops) per step of plain data parallelism over `w.dp` contiguous
    GPUs (the CNN path): DDP's gradient all-reduce, or ZeRO's reduce-scatter + all-gather."""
    dp = w.dp
    if dp <= 1:
        return 0.0, 0.0, []
    if w.zero >= 1:
        t_rs, b_rs = gather_time(gpu, dp, grad_bytes)
        t_ag, b_ag = gather_time(gpu, dp, param_bytes)
        return (
            t_rs,
            t_ag,
            [("ZeRO reduce-scatter of gradients", b_rs, t_rs), ("ZeRO all-gather of parameters", b_ag, t_ag)],
        )
    t_ar, b_ar = allreduce_time(gpu, dp, grad_bytes)
    return t_ar, 0.0, [("data-parallel gradient all-reduce", b_ar, t_ar)]
