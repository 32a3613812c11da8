"""Cost and energy of a job: GPU-hours x price, and power draw x time.

Power is the board power (TDP) scaled by how busy the GPU is, stated as such: an idle-but-loaded
GPU draws about a fifth of its TDP (H100 with a model loaded and not computing: 140-145 W of
700 W, arXiv 2605.11999), a GPU running dense matmuls near its cap (an 8x H100 training node
peaked at ~8.4 kW of its 10.2 kW rating, arXiv 2506.14551), and bandwidth-bound decode draws
20-43% of TDP (H200 decode 137-300 W of 700 W, same source). So
    P = TDP x (IDLE_SHARE + (1 - IDLE_SHARE) x busy),
    busy = (time in compute-bound operators + MEMORY_BOUND_WEIGHT x time in memory-bound ones) / time.
Energy is GPU energy only; `pue` scales it to the facility, and a grid carbon intensity
(g CO2e / kWh) turns it into emissions.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from gpuplan.specs.gpu import GPU
from gpuplan.specs.prices import Price

if TYPE_CHECKING:
    from gpuplan.estimators.perf import TrainingTime

IDLE_SHARE: Final = 0.2  # H100 loaded-idle 140-145 W of 700 W
MEMORY_BOUND_WEIGHT: Final = 0.3  # H200 decode at 137-300 W of 700 W: ~0.2 + 0.8 x 0.3 at the top


@dataclass(frozen=True)
class CostEnergy:
    usd: float | None
    usd_per_gpu_hour: float | None
    price_source: str
    gpu_hours: float
    energy_kwh: float
    avg_power_w: float  # per GPU
    co2_kg: float | None
    usd_per_million_tokens: float | None
    kwh_per_million_tokens: float | None


def busy_share(ops: Iterable[tuple[str, float]]) -> float:
    """Share of a step the GPU's units are busy: (bound, seconds) pairs of its operators."""
    total = compute = memory = 0.0
    for bound, t in ops:
        total += t
        if bound == "compute":
            compute += t
        elif bound in ("memory", "communication"):
            memory += t
    if total <= 0:
        return 0.0
    return min(1.0, (compute + MEMORY_BOUND_WEIGHT * memory) / total)


def power_w(gpu: GPU, busy: float) -> float:
    return gpu.tdp_watts * (IDLE_SHARE + (1 - IDLE_SHARE) * max(0.0, min(busy, 1.0)))


def cost_and_energy(
    gpu: GPU,
    num_gpus: int,
    seconds: float,
    busy: float,
    price: Price | None,
    tokens: float | None = None,
    carbon_g_per_kwh: float | None = None,
    pue: float = 1.0,
) -> CostEnergy:
    hours = seconds / 3600.0
    gpu_hours = hours * num_gpus
    watts = power_w(gpu, busy)
    kwh = watts * num_gpus * hours / 1000.0 * pue
    usd = price.usd_per_hour * gpu_hours if price is not None else None
    per_m = 1e6 / tokens if tokens else None
    return CostEnergy(
        usd=usd,
        usd_per_gpu_hour=price.usd_per_hour if price is not None else None,
        price_source=f"{price.provider} ({price.version})" if price is not None else "no price listed",
        gpu_hours=gpu_hours,
        energy_kwh=kwh,
        avg_power_w=watts,
        co2_kg=kwh * carbon_g_per_kwh / 1000.0 if carbon_g_per_kwh is not None else None,
        usd_per_million_tokens=usd * per_m if usd is not None and per_m is not None else None,
        kwh_per_million_tokens=kwh * per_m if per_m is not None else None,
    )


def training_job(
    t: TrainingTime, gpu: GPU, num_gpus: int, price: Price | None, carbon_g_per_kwh: float | None = None
) -> tuple[float, CostEnergy]:
    """(seconds, cost and energy) of a training job: the time to train its tokens, else one step."""
    seconds = t.time_to_train_s if t.time_to_train_s is not None else t.step_time_s
    busy = busy_share((o.bound, o.time_s) for o in t.ops)
    tokens = t.train_tokens or t.tokens_per_step
    return seconds, cost_and_energy(gpu, num_gpus, seconds, busy, price, tokens, carbon_g_per_kwh)
