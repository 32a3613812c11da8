"""Plan a graphics or video workload over the catalog: GPUs needed, cost, energy, ranked.

Services (streaming, vdi, ai-video) are sized for the requested streams or users and priced per
hour of service; a render job is timed from its frame count. Unsuitable GPUs are kept apart with
their reason. Ranking follows the workload's objective: time (fewest GPUs, then cost; for a
render, the shortest time), cost, or energy.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from gpuplan.estimators.graphics import GraphicsCapacity, graphics_capacity
from gpuplan.specs.gpu import Catalog
from gpuplan.specs.model import ModelSpec
from gpuplan.specs.prices import cheapest_prices
from gpuplan.specs.workload import Workload


@dataclass(frozen=True)
class GraphicsOption:
    capacity: GraphicsCapacity
    num_gpus: int
    demand: float  # streams / users requested, or frames to render
    hours: float  # hours of service, or hours to render
    time_s: float | None  # render: wall time; services: None
    cost_usd: float | None  # for `hours` on num_gpus GPUs, cheapest listed on-demand price
    usd_per_hour: float | None
    energy_kwh: float  # num_gpus x TDP x hours
    why: str


def _demand(w: Workload) -> float:
    if w.task == "vdi":
        return float(w.users or 1)
    if w.task == "render":
        return float(w.frames or 1)
    return float(w.streams or 1)


def plan_graphics(
    w: Workload, catalog: Catalog, model: ModelSpec | None = None
) -> tuple[list[GraphicsOption], list[GraphicsCapacity]]:
    """(ranked options, unsuitable GPUs with reasons)."""
    options: list[GraphicsOption] = []
    unsuitable: list[GraphicsCapacity] = []
    demand = _demand(w)
    prices = cheapest_prices(catalog)
    for gpu in catalog:
        cap = graphics_capacity(gpu, w, model)
        if not cap.suitable:
            unsuitable.append(cap)
            continue
        if w.task == "render":
            n = w.num_gpus
            hours = demand / (cap.per_gpu * n)
            time_s: float | None = hours * 3600
            why = f"{cap.per_gpu:,.0f} frames/hour per GPU ({cap.reason})"
        else:
            n = max(math.ceil(demand / cap.per_gpu), 1)
            hours, time_s = 1.0, None
            why = f"{cap.per_gpu:,.0f} {cap.unit} per GPU, limited by {cap.bottleneck}"
        price = prices.get(gpu.name)
        rate = price.usd_per_hour if price else None
        cost = rate * n * hours if rate is not None else None
        energy = gpu.tdp_watts * n * hours / 1000
        options.append(GraphicsOption(cap, n, demand, hours, time_s, cost, rate, energy, why))

    def key(o: GraphicsOption) -> tuple[float, ...]:
        cost = o.cost_usd if o.cost_usd is not None else math.inf
        if w.objective == "cost":
            return (cost, o.num_gpus)
        if w.objective == "energy":
            return (o.energy_kwh, cost)
        if w.task == "render":
            return (o.time_s or math.inf, cost)
        return (o.num_gpus, -o.capacity.per_gpu, cost)

    options.sort(key=key)
    return options, unsuitable
