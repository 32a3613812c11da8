"""The answer first: does a job fit on its GPUs, by how much, what binds, and the smallest changes
that make it fit, each verified by running the estimate again with exactly those changes.

A fix is a set of workload changes. The candidates are the memory savings `fit.py` knows (activation
checkpointing, a fused loss, a smaller micro-batch with more accumulation, 8-bit or paged optimizers,
ZeRO-3 on the job's own GPUs (then with checkpointing, then with optimizer offload), LoRA/QLoRA for
a fine-tune (never for pretraining), ZeRO-3 over more GPUs, offload; for serving: a higher
gpu_memory_utilization, fp8 KV, 8- or 4-bit weights, a smaller batch, tensor parallelism), their
cumulative combination in that order, the fewest GPUs of the same type (with 8-bit and 4-bit
weights too, for serving), and the cheapest other GPU type at the fewest of it that hold the job;
those two with full activation checkpointing and a fused loss first where they need fewer GPUs.
Each is estimated; only those that fit are kept, ranked by how much they change the job (the sum of
the weights below; adapters after an equal change that keeps full training), then by price. The
quantised-weight and other-GPU fixes are always among those shown when they fit.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any, Final

from gpuplan.errors import InvalidSettingError
from gpuplan.estimators.engines import LAYER_SPLIT_ENGINES
from gpuplan.estimators.memory import MemoryEstimate
from gpuplan.planner.fit import (
    GPU_COUNTS,
    GpuCount,
    inference_candidates,
    smallest_gpu_count,
    training_candidates,
)
from gpuplan.planner.screening import memory, shared_estimates, with_changes
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
    "gpu_layers": 1,  # llama.cpp / Ollama partial offload: the same job on the same card, slower
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
    kept: bool = False  # a quantised-weight or other-GPU fix: always shown when it fits

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
        return with_changes(w, changes)  # validated once per GPU type within shared_estimates()
    except InvalidSettingError:
        return None


def _estimate(model: ModelSpec, w: Workload, gpu: GPU) -> MemoryEstimate | None:
    try:
        return memory(model, w, gpu)  # shared across GPU types within screening.shared_estimates()
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


# Weight formats tried with more GPUs when the job does not fit as it is: 8-bit (near-lossless) and
# 4-bit AWQ (fit.py's WEIGHT_LADDER ranks them so).
QUANTISED_WEIGHTS: Final = (("int8", "8-bit weights: near-lossless"), ("awq", "4-bit AWQ weights: small quality loss"))


# Same-GPU savings that leave the job's nature alone (CHANGE_WEIGHT 1: the same job at some speed):
# applied before more GPUs or another GPU, so those fixes need no more GPUs than the job must have
# (QA: a 70B full fine-tune fits 8 x B200 with full checkpointing, not 32 without it).
FREE_SAVINGS: Final = frozenset({"activation_checkpointing", "loss_impl"})


def _offload(model: ModelSpec, w: Workload, gpu: GPU, prices: Mapping[str, Price]) -> list[Fix]:
    """llama.cpp / Ollama partial offload: gpu_layers=N (-ngl N) with the largest N whose estimate fits
    (memory grows with N: each layer more on the GPU adds its weights and KV cache)."""
    if w.is_training or w.engine not in LAYER_SPLIT_ENGINES or model.kind != "decoder" or model.num_layers <= 0:
        return []
    top = model.num_layers if w.gpu_layers is None else min(w.gpu_layers, model.num_layers + 1) - 1
    lo, hi, best = 0, top, None  # N = num_layers + 1 is every layer (the job as it is); bisect below it
    while lo <= hi:
        n = (lo + hi) // 2
        cw = _applied(w, {"gpu_layers": n})
        e = _estimate(model, cw, gpu) if cw is not None else None
        if e is not None and e.fits:
            lo, best = n + 1, (n, e)
        else:
            hi = n - 1
    if best is None:
        return []
    n, e = best
    where = f"the output layer and {n - 1} of {model.num_layers} layers" if n else f"none of {model.num_layers} layers"
    label = f"partial offload ({where} on the GPU, the rest on the CPU)"
    return [_fix(label, {"gpu_layers": n}, e, gpu, prices, "CPU-bound decode for the host's layers", w)]


def _savings(w: Workload) -> list[tuple[str, dict[str, Any], str]]:
    return [c for c in training_candidates(w) if set(c[1]) <= FREE_SAVINGS] if w.is_training else []


Fewest = tuple[GpuCount, dict[str, Any], list[tuple[str, str]]]


def _fewest(model: ModelSpec, w: Workload, gpu: GPU, counts: tuple[int, ...] = GPU_COUNTS) -> list[Fewest]:
    """The fewest GPUs of `gpu` that hold `w`: with the free savings when they need fewer GPUs
    (only those savings still needed at that count, verified), then as it is. Each: the count (its
    estimate on `w` with exactly the savings and the layout), the savings, and their (label, cost)."""
    bare = smallest_gpu_count(model, w, gpu, counts)
    savings = _savings(w)
    sw = _applied(w, {k: v for _, c, _ in savings for k, v in c.items()}) if savings else None
    fewer = tuple(n for n in counts if bare.num_gpus is None or n < bare.num_gpus)
    helped = smallest_gpu_count(model, sw, gpu, fewer) if sw is not None and fewer else None
    if helped is None or helped.num_gpus is None:
        return [(bare, {}, [])]
    layout = {k: v for k, v in helped.layout.items() if k != "num_gpus"}
    layout |= {"num_gpus": helped.num_gpus} if helped.layout else {}
    kept, e = list(savings), helped.estimate
    for s in savings:  # drop a saving the count holds without
        rest = [x for x in kept if x is not s]
        rw = _applied(w, {**{k: v for _, c, _ in rest for k, v in c.items()}, **layout})
        re = _estimate(model, rw, gpu) if rw is not None else None
        if re is not None and re.fits:
            kept, e = rest, re
    saved = {k: v for _, c, _ in kept for k, v in c.items()}
    return [(replace(helped, estimate=e), saved, [(label, cost) for label, _, cost in kept]), (bare, {}, [])]


def _more_gpus(model: ModelSpec, w: Workload, gpu: GPU, prices: Mapping[str, Price]) -> list[Fix]:
    """The fewest GPUs of the job's type that hold it (with the free savings when they need fewer);
    for serving, also with 8-bit and 4-bit weights."""
    out: list[Fix] = []
    tries: list[tuple[dict[str, Any], str]] = [({}, "")]
    if not w.is_training:
        tries += [({"weight_dtype": wf}, cost) for wf, cost in QUANTISED_WEIGHTS if wf != w.effective_weight_dtype]
    for extra, cost in tries:
        qw = _applied(w, extra)
        count, saved, notes = _fewest(model, qw, gpu)[0] if qw is not None else (None, {}, [])
        if count is None or count.num_gpus is None or count.estimate is None:
            continue
        if count.num_gpus == w.num_gpus and not extra:
            continue
        if count.num_gpus == w.num_gpus and not count.layout:
            continue  # the format alone fits: the same-GPU fixes hold it
        changes = {**extra, **saved, "num_gpus": count.num_gpus}
        changes |= {k: v for k, v in count.layout.items() if k != "num_gpus"}
        label = (f"{extra['weight_dtype']} weights on " if extra else "") + f"{count.num_gpus} x {gpu.name}"
        label += _how(w, changes, notes)
        what = "; ".join([f"{count.num_gpus} GPUs", *(c for _, c in notes), *([cost] if cost else [])])
        out.append(replace(_fix(label, changes, count.estimate, gpu, prices, what, w), kept=bool(extra)))
    return out


def _how(w: Workload, changes: Mapping[str, Any], notes: list[tuple[str, str]]) -> str:
    """' (zero 3, tp 2)' for the layout keys changed, ' with <savings>' for the free savings."""
    how = ", ".join(f"{k} {v}" for k, v in changes.items() if k in ("zero", "tp", "pp") and getattr(w, k, None) != v)
    return (f" ({how})" if how else "") + (" with " + " and ".join(label for label, _ in notes) if notes else "")


def _other_gpu(model: ModelSpec, w: Workload, gpu: GPU, catalog: Catalog, prices: Mapping[str, Price]) -> list[Fix]:
    """The cheapest listed other GPU type, at the fewest of it (no fewer than the job's) that hold the
    job (with the free savings when they need fewer); the largest one when none is priced. Then the
    cheapest that holds the job unchanged, when it differs: `fixes` shows the first that is not a
    larger change than a same-GPU fix."""
    best: tuple[float, Fix] | None = None
    plain: tuple[float, Fix] | None = None
    counts = tuple(n for n in GPU_COUNTS if n >= w.num_gpus)
    for g in catalog:
        moved = _applied(w, {"gpu": g.name}) if g.name != gpu.name else None
        for count, saved, notes in _fewest(model, moved, g, counts) if moved is not None else []:
            if count.num_gpus is None or count.estimate is None:
                continue
            f, key = _on_other(w, g, prices, count, saved, notes)
            if best is None or key < best[0]:
                best = (key, f)
            if not saved and (plain is None or key < plain[0]):
                plain = (key, f)
    out = [best[1]] if best else []
    return [*out, plain[1]] if plain and (best is None or plain[1] is not best[1]) else out


def _on_other(
    w: Workload,
    g: GPU,
    prices: Mapping[str, Price],
    count: GpuCount,
    saved: dict[str, Any],
    notes: list[tuple[str, str]],
) -> tuple[Fix, float]:
    """The other-GPU fix at `count` with the free savings `saved`, and its price key."""
    changes = {"gpu": g.name, **saved, **({"num_gpus": count.num_gpus} if count.num_gpus != w.num_gpus else {})}
    changes.update({k: v for k, v in count.layout.items() if k != "num_gpus"})
    label = f"{count.num_gpus} x {g.name}" + _how(w, changes, notes)
    what = "; ".join(["other hardware", *(c for _, c in notes)])
    assert count.num_gpus is not None and count.estimate is not None
    f = replace(_fix(label, changes, count.estimate, g, prices, what, w), kept=True)
    return f, f.usd_per_hour if f.usd_per_hour is not None else 1e12 + g.memory_bytes


def _always(f: Fix) -> bool:
    """A fix shown whatever else ranks before it: quantised weights, or other hardware."""
    return f.kept or set(f.changes) == {"weight_dtype"}


def fixes(
    model: ModelSpec, w: Workload, gpu: GPU, catalog: Catalog, prices: Mapping[str, Price], limit: int = MAX_FIXES
) -> list[Fix]:
    """The verified changes that make `w` fit, the least change first (then the cheaper)."""
    with shared_estimates():  # a training job's memory estimated once per layout, not once per GPU type
        found = [*_offload(model, w, gpu, prices), *_same_gpu_fixes(model, w, gpu, prices)]
        found += _more_gpus(model, w, gpu, prices)
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
    other = [f for f in kept if "gpu" in f.changes]  # one other-GPU fix: the first that is left
    kept = [f for f in kept if "gpu" not in f.changes or f is other[0]]
    # the least change first; of equal changes, full training before adapters (`task`), then the cheaper
    ranked = sorted(kept, key=lambda f: (f.weight, "task" in f.changes, f.usd_per_hour or 0.0, f.per_gpu_bytes))
    shown = ranked[:limit]
    for f in (f for f in ranked[limit:] if _always(f)):  # quantised weights and other hardware always show
        drop = next((g for g in reversed(shown[1:]) if not _always(g)), None)  # the best fix stays
        if drop is None:
            break
        shown.remove(drop)
        shown.append(f)
    return sorted(shown, key=ranked.index)
