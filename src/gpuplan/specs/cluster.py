"""A cluster: nodes x GPUs per node of one GPU type, joined by an inter-node fabric.

Written `16x8:H100` (16 nodes of 8 H100s) with an optional fabric, `16x8:H100:roce`. Inside a
node the GPUs talk over the catalog's NVLink/NVSwitch or PCIe; between nodes over the fabric's
NICs. The fabric presets give each GPU's share of the node's network and the per-hop latency.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from gpuplan.errors import InvalidSettingError, UnknownGPUError, did_you_mean
from gpuplan.safeio import clip_repr
from gpuplan.specs.gpu import GB, GPU, Catalog


@dataclass(frozen=True)
class Fabric:
    """An inter-node network: `gbit_per_gpu` is each GPU's NIC rate (rails: one NIC per GPU) or,
    with `per_node`, one NIC the whole node shares."""

    name: str
    gbit: float  # line rate of one NIC, Gb/s
    per_node: bool  # one NIC per node (True) or one per GPU (rail-optimised HGX/DGX nodes)
    efficiency: float  # achieved share of the line rate (nccl-tests bus bandwidth)
    latency_s: float  # per hop of a collective
    rdma: bool
    source: str

    def bytes_per_s(self, gpus_in_node: int) -> float:
        """The network bandwidth, bytes/s, that `gpus_in_node` GPUs of one node have together."""
        nics = 1 if self.per_node else max(gpus_in_node, 1)
        return nics * self.gbit / 8 * GB * self.efficiency


# NCCL's own model of a network hop (src/graph/tuning.cc, hwLat[NET]: 14 us for the Simple
# protocol that large buffers use) sets the RDMA latency; TCP sockets add the kernel stack.
_RDMA_LAT: Final = 14e-6
_TCP_LAT: Final = 30e-6
# RDMA fabrics reach ~80% of line rate in nccl-tests all-reduce bus bandwidth (8x400G DGX H100
# nodes: ~370 of 400 GB/s per node at scale, NVIDIA DGX SuperPOD reference; 80% kept, as for NVLink)
_RDMA_EFF: Final = 0.80
# NCCL's socket transport over TCP reaches well under line rate (derived: NCCL's docs recommend RDMA
# for multi-node; we take 60%).
_TCP_EFF: Final = 0.60

FABRICS: Final = {
    f.name: f
    for f in (
        Fabric(
            "ib-ndr",
            400,
            False,
            _RDMA_EFF,
            _RDMA_LAT,
            True,
            "NVIDIA DGX H100/H200: 8x ConnectX-7 400 Gb/s NDR, one per GPU",
        ),
        Fabric(
            "ib-hdr", 200, False, _RDMA_EFF, _RDMA_LAT, True, "NVIDIA DGX A100: 8x ConnectX-6 200 Gb/s HDR, one per GPU"
        ),
        Fabric(
            "ib-xdr", 800, False, _RDMA_EFF, _RDMA_LAT, True, "NVIDIA DGX B300: 8x ConnectX-8 800 Gb/s XDR, one per GPU"
        ),
        Fabric(
            "roce",
            400,
            False,
            _RDMA_EFF,
            _RDMA_LAT,
            True,
            "RoCEv2 400 Gb/s per GPU (Meta's Llama 3 clusters, Gangidi et al. 2024)",
        ),
        Fabric("efa", 400, False, _RDMA_EFF, _RDMA_LAT, True, "AWS p5: 3200 Gb/s EFA per 8-GPU node"),
        Fabric("ethernet", 100, True, _TCP_EFF, _TCP_LAT, False, "one 100 Gb/s Ethernet port per node, TCP"),
        Fabric("ethernet-25g", 25, True, _TCP_EFF, _TCP_LAT, False, "one 25 Gb/s Ethernet port per node, TCP"),
        Fabric("ethernet-10g", 10, True, _TCP_EFF, _TCP_LAT, False, "one 10 Gb/s Ethernet port per node, TCP"),
    )
}
_FABRIC_ALIASES: Final = {
    "ib": "ib-ndr",
    "infiniband": "ib-ndr",
    "ndr": "ib-ndr",
    "hdr": "ib-hdr",
    "xdr": "ib-xdr",
    "rocev2": "roce",
    "eth": "ethernet",
    "100gbe": "ethernet",
    "25gbe": "ethernet-25g",
    "10gbe": "ethernet-10g",
}
# The fabric a GPU's usual multi-node servers ship with (DGX/HGX reference designs).
DEFAULT_FABRIC_BY_ARCH: Final = {
    "Ampere": "ib-hdr",
    "Hopper": "ib-ndr",
    "Blackwell": "ib-ndr",
    "CDNA 3": "roce",
    "CDNA 4": "roce",  # MI355X platforms ship the same Pollara/RoCE class of NIC as MI300X/MI325X
    "CDNA 2": "ib-hdr",
}
# GPUs per node when a count spans hosts and no cluster is given (HGX/DGX boards hold 8).
GPUS_PER_NODE: Final = 8


def fabric(name: str) -> Fabric:
    key = name.strip().lower()
    key = _FABRIC_ALIASES.get(key, key)
    if key not in FABRICS:
        hint = did_you_mean(key, [*FABRICS, *_FABRIC_ALIASES])
        raise InvalidSettingError(f"Unknown interconnect {name!r}.{hint} Known: {', '.join(FABRICS)}.")
    return FABRICS[key]


def default_fabric(gpu: GPU) -> Fabric:
    """Multi-node-capable datacenter GPUs get their reference RDMA fabric; others plain Ethernet."""
    if gpu.multi_node:
        return FABRICS[DEFAULT_FABRIC_BY_ARCH.get(gpu.architecture, "ib-hdr")]
    return FABRICS["ethernet"]


@dataclass(frozen=True)
class Cluster:
    gpu: GPU
    nodes: int
    gpus_per_node: int
    fabric: Fabric
    fabric_given: bool = False

    @property
    def num_gpus(self) -> int:
        return self.nodes * self.gpus_per_node

    @property
    def label(self) -> str:
        return f"{self.nodes}x{self.gpus_per_node}:{self.gpu.name}:{self.fabric.name}"

    def warnings(self) -> list[str]:
        """What a user planning on this cluster should know (cards not built for multi-node work)."""
        out: list[str] = []
        if self.nodes > 1 and not self.gpu.multi_node:
            out.append(
                f"{self.gpu.name} is not built for multi-node training (no NVLink/RDMA reference design): "
                f"planned over {self.fabric.name} ({self.fabric.gbit:g} Gb/s{' per node' if self.fabric.per_node else ' per GPU'}), "
                "expect communication to dominate"
            )
        if self.nodes > 1 and not self.fabric.rdma:
            out.append(f"{self.fabric.name} has no RDMA: NCCL falls back to TCP sockets")
        return out


def parse_cluster(text: str, catalog: Catalog) -> Cluster:
    """`NODESxGPUS:GPU[:FABRIC]` (e.g. 16x8:H100, 2x4:RTX-4090:ethernet, 8:A100) -> Cluster."""
    spec = str(text).strip()
    head, sep, rest = spec.partition(":")
    m = re.fullmatch(r"(?:(\d+)\s*[x×*]\s*)?(\d+)", head.strip(), re.IGNORECASE)
    if not sep or not m or not rest.strip():
        raise InvalidSettingError(
            f"A cluster is written NODESxGPUS_PER_NODE:GPU[:INTERCONNECT], e.g. 16x8:H100 or 2x4:L40S:roce. Got {spec!r}."
        )
    nodes = int(m.group(1) or 1)
    per_node = int(m.group(2))
    if nodes < 1 or per_node < 1:
        raise InvalidSettingError(f"A cluster needs at least 1 node of at least 1 GPU. Got {spec!r}.")
    if per_node > 16:
        raise InvalidSettingError(
            f"{per_node} GPUs per node: servers hold at most 16 (HGX: 8). Write it as nodes x GPUs, e.g. "
            f"{math.ceil(per_node / 8)}x8:{rest.strip()}."
        )
    if nodes * per_node > 100_000:
        raise InvalidSettingError(f"A cluster of {nodes * per_node} GPUs is beyond what gpuplan plans (100,000).")
    # the GPU name may itself hold a colon-free suffix; the fabric is the last part if it names one
    parts = [p.strip() for p in rest.split(":") if p.strip()]
    fab: Fabric | None = None
    if len(parts) > 1:
        fab = fabric(parts[-1])
        parts = parts[:-1]
    gpu = catalog.get(":".join(parts))
    return Cluster(gpu, nodes, per_node, fab or default_fabric(gpu), fab is not None)


def implied_cluster(gpu: GPU, num_gpus: int) -> Cluster:
    """The cluster a plain `num_gpus` means: one node up to 8 GPUs, else 8-GPU nodes."""
    if num_gpus <= GPUS_PER_NODE:
        return Cluster(gpu, 1, num_gpus, default_fabric(gpu))
    return Cluster(gpu, math.ceil(num_gpus / GPUS_PER_NODE), GPUS_PER_NODE, default_fabric(gpu))


def gres_name(gpu: str) -> str:
    """A Slurm GRES type name for a catalog GPU: its model number, lower case, with Ti/Super kept
    so that cards of one generation stay apart ("h100", "a100", "rtx4090", "rtx2080ti", "rtx3090ti",
    "rtxa6000", "l40s", "mi300x")."""
    name = gpu.lower()
    for vendor_word in ("geforce ", "nvidia ", "quadro ", "amd ", "instinct "):
        name = name.replace(vendor_word, "")
    words = name.split()
    if not words:
        return "gpu"
    if words[0] in ("rtx", "gtx") and len(words) > 1:
        core = words[0] + words[1] + (words[2] if len(words) > 2 and words[2] in ("ti", "super") else "")
    else:
        core = words[0]
    return re.sub(r"[^a-z0-9]", "", core) or "gpu"


# "4x RTX 3090", "2 x 3090", "2*A100" (count first) or "3090x2", "3090 x2" (name first)
_HAVE_COUNT_FIRST: Final = re.compile(r"^\s*(\d{1,5})\s*[x×*]\s*(.+?)\s*$", re.IGNORECASE)
# name first: a space before the x, or none on either side ("RTX 3090" is a name, not "RT" x 3090)
_HAVE_NAME_FIRST: Final = re.compile(r"^\s*(.+?)(?:\s+[x×*]\s*|[x×*])(\d{1,5})\s*$", re.IGNORECASE)


# one item's length: the longest catalog label has 55 characters (errors._MAX_COMPARED allows 100)
_HAVE_ITEM_CHARS: Final = 200


def _have_item(part: str, catalog: Catalog) -> tuple[str, int]:
    """One --have item as (name, count): the reading whose name the catalog knows, count first
    when both are ("2x3090" and "3090x2" are two 3090s); unknown either way, the longer name's
    error ("3099x2" is answered about '3099', not '2')."""
    if len(part) > _HAVE_ITEM_CHARS:  # the patterns backtrack quadratically on a long run of spaces
        raise InvalidSettingError(
            f"--have: an item of {len(part):,} characters is longer than any GPU name and count. Got {clip_repr(part)}."
        )
    readings = [(m.group(2), int(m.group(1))) for m in [_HAVE_COUNT_FIRST.match(part)] if m]
    readings += [(m.group(1), int(m.group(2))) for m in [_HAVE_NAME_FIRST.match(part)] if m]
    if not readings:
        raise InvalidSettingError(
            "--have lists GPUs as COUNTx NAME (or NAMExCOUNT), comma-separated "
            f"(e.g. '4x RTX 3090, 1x A100 40GB' or '3090x2'). Got {clip_repr(part.strip())}."
        )
    for name, count in readings:
        try:
            catalog.get(name)
        except UnknownGPUError:
            continue
        return name, count
    return max(readings, key=lambda r: len(r[0].strip()))


def parse_have(text: str | Mapping[str, int], catalog: Catalog) -> dict[str, int]:
    """The GPUs a user owns: "4x RTX 3090, 1x A100 40GB", "3090x2" (or {name: count}) as {catalog name: count}."""
    items: list[tuple[str, object]]
    if isinstance(text, Mapping):
        items = [(str(k), v) for k, v in text.items()]
    else:
        items = [_have_item(part, catalog) for part in str(text).split(",") if part.strip()]
    out: dict[str, int] = {}
    for name, count in items:
        if isinstance(count, bool) or not isinstance(count, int) or not 1 <= count <= 4096:
            raise InvalidSettingError(f"--have: the count of {clip_repr(name)} must be 1-4096. Got {clip_repr(count)}.")
        gpu = catalog.get(name)
        out[gpu.name] = out.get(gpu.name, 0) + count
    if not out:
        raise InvalidSettingError("--have names no GPU (e.g. '4x RTX 3090').")
    return out
