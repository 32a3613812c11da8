"""Work a whole-catalog plan (or fit) shares across its options, done once per plan instead of
once per (GPU type, count).

A plan tries the same few layouts (1, 2, 4, 8 GPUs; ZeRO stages; checkpointing) on every GPU
type. Each try used to validate a new workload (`Workload.with_`: a dump, a walk over every value
for NaN and huge integers, pydantic's validation), about a fifth of a plan's time. The workload a
layout gives differs between GPU types only in `gpu`, a catalog name, which validation leaves as
it is (the workload's rules never read the GPU's name: specs/workload.py), so a layout's workload
is validated once and copied per GPU with the name set. Predictions are unchanged: the copy has
the same values and the same set keys as the validated workload (tests/test_golden.py).
"""

from __future__ import annotations

from typing import Any

from gpuplan.errors import GpuplanError
from gpuplan.specs.workload import Workload


class Candidates:
    """The workloads of the layouts a plan tries, validated once per layout (for one base workload)."""

    def __init__(self, base: Workload) -> None:
        self.base = base
        self._done: dict[tuple[tuple[str, Any], ...], Workload | GpuplanError] = {}

    def get(self, w: Workload, gpu_name: str, layout: dict[str, Any]) -> Workload:
        """`w.with_(gpu=gpu_name, **layout)`, raising the same GpuplanError where that would."""
        if w is not self.base or "gpu" in layout:
            return w.with_(gpu=gpu_name, **layout)
        key = tuple(sorted(layout.items()))
        done = self._done.get(key)
        if done is None:
            try:
                done = w.with_(gpu=gpu_name, **layout)
            except GpuplanError as exc:
                done = exc
            self._done[key] = done
        if isinstance(done, GpuplanError):
            raise done.with_traceback(None)  # the same error, without the tracebacks of earlier raises
        if done.gpu == gpu_name:
            return done
        return done.model_copy(update={"gpu": gpu_name})

    def changed(self, w: Workload, change: dict[str, Any]) -> Workload:
        """`w.with_(**change)` for a change that names no GPU (`fit`'s GPU counts), validated once."""
        if w is not self.base or "gpu" in change:
            return w.with_(**change)
        key = (("\0changed", True), *sorted(change.items()))
        done = self._done.get(key)
        if done is None:
            try:
                done = w.with_(**change)
            except GpuplanError as exc:
                done = exc
            self._done[key] = done
        if isinstance(done, GpuplanError):
            raise done.with_traceback(None)
        return done
