"""Typed answers of `plan --cluster`: a cluster's parallel layouts for a training job.

Field names and order are the plan's JSON contract (docs/api.md): `to_dict()` is the `--json` document.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gpuplan.results.base import Result, band, optional


@dataclass(frozen=True, kw_only=True)
class LayoutRow(Result):
    """One parallel layout (TP x PP x CP x DP, ZeRO, micro-batches) of a training job on a cluster."""

    layout: str
    keys: dict[str, Any]
    dp: int
    micro_batches: int
    step_time_s: float
    step_time_s_low: float | None = band()
    step_time_s_high: float | None = band()
    tokens_per_s: float
    tokens_per_s_low: float | None = band()
    tokens_per_s_high: float | None = band()
    tokens_per_s_per_gpu: float
    mfu: float
    per_gpu_bytes: float
    per_gpu_bytes_low: float | None = band()
    per_gpu_bytes_high: float | None = band()
    comm_share: float
    bubble_share: float
    bottleneck: str
    time_to_train_s: float | None = optional()
    time_to_train_s_low: float | None = band()
    time_to_train_s_high: float | None = band()
    cost_usd: float | None
    energy_kwh: float
    breakdown_s: dict[str, float]


@dataclass(frozen=True, kw_only=True)
class ClusterInfo(Result):
    spec: str
    gpu: str
    nodes: int
    gpus_per_node: int
    num_gpus: int
    interconnect: str
    interconnect_note: str


@dataclass(frozen=True, kw_only=True)
class SearchStats(Result):
    evaluated: int
    fitting: int
    micro_batch_shapes: int
    seconds: float
    rejected: dict[str, int]


@dataclass(frozen=True, kw_only=True)
class LayoutPlan(Result):
    """`gpuplan plan --cluster`: the fastest layouts of a training job on a cluster."""

    workload: dict[str, Any]
    model: str
    mode: str  # "cluster"
    cluster: ClusterInfo
    global_batch: int
    layouts: list[LayoutRow]
    search: SearchStats
    notes: list[str]
