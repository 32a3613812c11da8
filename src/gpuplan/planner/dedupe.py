"""One row per distinct answer: plan options that are the same GPU chip at the same count, with the
same layout and the very same figures, are one choice for the job, listed once.

The catalog keeps memory variants of one chip as separate cards (V100 SXM2 16GB and 32GB, both
GV100; Quadro RTX 8000 and TITAN RTX, both TU102): where the job fits both, every figure of the two
rows is equal (time, throughput, memory per GPU, energy, what binds) and a plan listed the same
answer twice. The row kept is the cheapest listed price (a priced row before an unpriced one,
then the plan's order); the others are named in its `same_as`.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass

from gpuplan.planner.recommend import Option

# figures are compared to 6 significant digits: equal estimates are bit-identical in practice, and
# a difference below a millionth is no difference a plan shows (it prints 3-4 digits)
_DIGITS = 6


@dataclass(frozen=True)
class Folded:
    option: Option
    same_as: tuple[str, ...]  # other GPUs folded into this row, plan order


def _r(v: float | None) -> float | None:
    return None if v is None else float(f"{v:.{_DIGITS}g}")


def _key(o: Option) -> Hashable | None:
    """What makes two options one answer; None for an option that does not fit (kept as it is)."""
    if not o.fits:
        return None
    c, m = o.cost, o.memory
    return (
        o.gpu.vendor,
        o.gpu.architecture,
        o.gpu.chip,
        o.num_gpus,
        tuple(sorted((k, repr(v)) for k, v in o.layout.items())),
        _r(o.time_s),
        _r(o.throughput),
        _r(m.per_gpu_bytes if m else None),
        _r(c.energy_kwh if c else None),
        o.bottleneck,
        o.serving.batch if o.serving else None,  # a latency target may allow the larger card a larger batch
        _r(o.serving.tokens_per_s if o.serving else None),
        o.ok,
        o.too_slow,
        o.licence_barred,
        o.meets_deadline,
        o.within_budget,
    )


def _price(o: Option) -> float:
    p = o.cost.usd_per_gpu_hour if o.cost else None
    return p if p else float("inf")


def dedupe(options: Sequence[Option]) -> list[Folded]:
    """`options` in their order, each group of equal answers folded into its cheapest member (kept
    at the group's first place)."""
    out: list[Folded] = []
    where: dict[Hashable, int] = {}
    for o in options:
        key = _key(o)
        if key is None or key not in where:
            if key is not None:
                where[key] = len(out)
            out.append(Folded(o, ()))
            continue
        i = where[key]
        kept = out[i]
        if _price(o) < _price(kept.option):
            out[i] = Folded(o, (*kept.same_as, kept.option.gpu.name))
        else:
            out[i] = Folded(kept.option, (*kept.same_as, o.gpu.name))
    return out
