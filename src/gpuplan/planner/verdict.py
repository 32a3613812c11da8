"""The answer first: does a job fit on its GPUs, by how much, what binds, and the smallest changes
that make it fit, each verified by running the estimate again with exactly those changes.

A fix is a set of workload changes. The candidates are the memory savings `fit.py` knows (activation
checkpointing, a fused loss, a smaller micro-batch with more accumulation, 8-bit or paged optimizers,
LoRA/QLoRA, ZeRO-3 over more GPUs, offload; for serving: a higher gpu_memory_utilization, fp8 KV,
8- or 4-bit weights, a smaller batch, tensor parallelism), their cumulative combination in that order, the fewest GPUs of the same
type, and the cheapest other GPU that holds the job unchanged. Each is estimated; only those that
fit are kept, ranked by how much they change the job (the sum of the weights below), then by price.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from gpuplan.errors import InvalidSettingError
from gpuplan.estimators.memory import MemoryEstimate, estimate_memory
from gpuplan.planner.fit import inference_candidates, smallest_gpu_count, training_candidates
from gpuplan.specs.gpu import GPU, Catalog
from gpuplan.specs.model import ModelSpec
from gpuplan.specs.precision import storage_format
from gpuplan.specs.prices import Price
from gpuplan.specs.workload import Workload

# How much a change alters the job, by key: 1 = the same job at some speed, 2 = a numerics or
# batching change the result barely notices, 3 = a lossy format or offload, 4 = other weights
# trained (adapters) or more GPUs to pay for, 5 = other hardware. A judgement, stated here once.
CHANGE_WEIGHT: Final[dict[str, int]] = {
    "activation_checkpointing": 1,
    "loss_impl": 1,
    "kv_dtype": 1,
    "gpu_memory_utilization": 1,
    "batch_size": 2,
    "grad_accum": 0,  # comes with a smaller micro-batch, which carries the weight
    "optimizer": 2,
    "weight_dtype": 3,
    "offload": 3,
    "task": 4,
    "num_gpus": 4,
    "zero": 0,
    "tp": 0,
    "pp": 0,
    "gpu": 5,
}
MAX_FIXES: Final = 5


@dataclass(frozen=True)
class Fix:
    """Workload changes that make the job fit, with what the estimate gives after them."""

    label: str
    changes: dict[str, Any]
    per_gpu_bytes: float
    capacity_bytes: float
    gpu: str
    num_gpus: int
    usd_per_hour: float | None  # all the job's GPUs, where a price is listed
    cost: str  # what the change costs in speed, quality or money
    workload: Workload  # the job with the changes applied

    base_gpus: int = 1  # the job's GPUs before the change

    @property
    def weight(self) -> float:
        """How much the fix changes the job: CHANGE_WEIGHT summed; more GPUs weigh 3 + log2 of the
        factor (2x: 4, 8x: 6, 32x: 8), so a few more GPUs rank near LoRA and many more far below."""
        w: float = sum(CHANGE_WEIGHT.get(k, 3) for k in self.changes if k not in ("num_gpus", "weight_dtype"))
        if "weight_dtype" in self.changes:  # 8 bits and more barely change the answers; fewer do
            bits = storage_format(str(self.changes["weight_dtype"])).bits_per_value
            w += 2 if bits >= 8 else CHANGE_WEIGHT["weight_dtype"]
        if "num_gpus" in self.changes:
            w += 3 + math.log2(max(self.num_gpus / max(self.base_gpus, 1), 1.0))
        return w


def _applied(w: Workload, changes: Mapping[str, Any]) -> Workload | None:
    try:
        return w.with_(**changes)
    except InvalidSettingError:
        return None


def _estimate(model: ModelSpec, w: Workload, gpu: GPU) -> MemoryEstimate | None:
    try:
        return estimate_memory(model, w, gpu)
    except InvalidSettingError:
        return None


def _fix(
    label: str,
    changes: dict[str, Any],
    e: MemoryEstimate,
    gpu: GPU,
    prices: Mapping[str, Price],
    cost: str,
    w: Workload,
) -> Fix:
    price = prices.get(gpu.name)
    return Fix(
        label=label,
        changes={k: v for k, v in changes.items() if getattr(w, k, None) != v},  # what actually changes
        base_gpus=w.num_gpus,
        per_gpu_bytes=e.per_gpu_bytes,
        capacity_bytes=e.capacity_bytes or 0.0,
        gpu=gpu.name,
        num_gpus=e.num_gpus,
        usd_per_hour=price.usd_per_hour * e.num_gpus if price else None,
        cost=cost,
        workload=e.workload,
    )


def _same_gpu_fixes(model: ModelSpec, w: Workload, gpu: GPU, prices: Mapping[str, Price]) -> list[Fix]:
    """Each known saving alone, then the savings that need no more GPUs applied together in order."""
    cands = training_candidates(w) if w.is_training else inference_candidates(w)
    out: list[Fix] = []
    together: dict[str, Any] = {}
    labels: list[str] = []
    done = False  # the combination fits: no more savings are added to it
    for label, change, cost in cands:
        cw = _applied(w, change)
        e = _estimate(model, cw, gpu) if cw else None
        if e is not None and e.fits:
            out.append(_fix(label, dict(change), e, gpu, prices, cost, w))
        if done or "num_gpus" in change or any(k in together for k in change):
            continue  # more GPUs are their own fix; a key already changed is not changed twice
        together.update(change)
        labels.append(label)
        tw = _applied(w, together)
        te = _estimate(model, tw, gpu) if tw else None
        if len(labels) > 1 and te is not None and te.fits:
            out.append(_fix(" + ".join(labels), dict(together), te, gpu, prices, "the costs of each", w))
            done = True
    return out


def _more_gpus(model: ModelSpec, w: Workload, gpu: GPU, prices: Mapping[str, Price]) -> list[Fix]:
    count = smallest_gpu_count(model, w, gpu)
    if count.num_gpus is None or count.estimate is None or count.num_gpus == w.num_gpus:
        return []
    changes = {"num_gpus": count.num_gpus, **{k: v for k, v in count.layout.items() if k != "num_gpus"}}
    how = ", ".join(f"{k} {v}" for k, v in changes.items() if k != "num_gpus" and getattr(w, k, None) != v)
    label = f"{count.num_gpus} x {gpu.name}" + (f" ({how})" if how else "")
    return [_fix(label, changes, count.estimate, gpu, prices, f"{count.num_gpus} GPUs", w)]


def _other_gpu(model: ModelSpec, w: Workload, gpu: GPU, catalog: Catalog, prices: Mapping[str, Price]) -> list[Fix]:
    """The cheapest listed GPU that holds the job as it is (same count); the largest one when none is priced."""
    best: tuple[float, Fix] | None = None
    for g in catalog:
        if g.name == gpu.name or g.memory_bytes <= gpu.memory_bytes:
            continue
        e = _estimate(model, w.with_(gpu=g.name), g)
        if e is None or not e.fits:
            continue
        f = _fix(f"{w.num_gpus} x {g.name}", {"gpu": g.name}, e, g, prices, "other hardware", w)
        key = f.usd_per_hour if f.usd_per_hour is not None else 1e12 + g.memory_bytes
        if best is None or key < best[0]:
            best = (key, f)
    return [best[1]] if best else []


def fixes(
    model: ModelSpec, w: Workload, gpu: GPU, catalog: Catalog, prices: Mapping[str, Price], limit: int = MAX_FIXES
) -> list[Fix]:
    """The verified changes that make `w` fit, the least change first (then the cheaper)."""
    found = [*_same_gpu_fixes(model, w, gpu, prices), *_more_gpus(model, w, gpu, prices)]
    found += _other_gpu(model, w, gpu, catalog, prices)
    unique: dict[tuple[tuple[str, str], ...], Fix] = {}
    for f in found:
        unique.setdefault(tuple(sorted((k, repr(v)) for k, v in f.changes.items())), f)
    # a fix that changes everything another fitting fix changes, and more, is not a smaller change
    kept = [
        f
        for f in unique.values()
        if not any(g is not f and g.changes.items() < f.changes.items() for g in unique.values())
    ]
    ranked = sorted(kept, key=lambda f: (f.weight, f.usd_per_hour or 0.0, f.per_gpu_bytes))
    return ranked[:limit]
