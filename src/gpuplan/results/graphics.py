"""Typed answers of `plan` for graphics and video workloads (streaming, VDI, rendering, AI video).

Field names and order are the plan's JSON contract (docs/api.md): `to_dict()` is the `--json` document.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gpuplan.results.base import Result


@dataclass(frozen=True, kw_only=True)
class GraphicsOption(Result):
    """GPUs for a graphics job (streaming, VDI, rendering): capacity per GPU and what limits it."""

    gpu: str
    num_gpus: int
    fits: bool
    per_gpu: float
    unit: str
    demand: float
    hours: float | None
    time_s: float | None
    cost_usd: float | None
    usd_per_hour: float | None
    energy_kwh: float
    bottleneck: str
    limits: dict[str, Any]
    why: str


@dataclass(frozen=True, kw_only=True)
class Unsuitable(Result):
    gpu: str
    fits: bool
    why: str


@dataclass(frozen=True, kw_only=True)
class GraphicsPlan(Result):
    workload: dict[str, Any]
    objective: str
    options: list[GraphicsOption]
    unsuitable: list[Unsuitable]
