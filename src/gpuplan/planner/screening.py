"""Work a whole-catalog plan (or fit) shares across its options, done once per plan instead of
once per (GPU type, count).

A plan tries the same few layouts (1, 2, 4, 8 GPUs; ZeRO stages; checkpointing) on every GPU
type. Each try used to validate a new workload (`Workload.with_`: a dump, a walk over every value
for NaN and huge integers, pydantic's validation), about a fifth of a plan's time. The workload a
layout gives differs between GPU types only in `gpu`, a catalog name, which validation leaves as
it is (the workload's rules never read the GPU's name: specs/workload.py), so a layout's workload
is validated once and copied per GPU with the name set. Predictions are unchanged: the copy has
the same values and the same set keys as the validated workload (tests/test_golden.py).

A training job's memory does not depend on the GPU either, but for one term: the training memory
estimate (estimators/memory/training.py) reads the GPU only in `finish`, for the cuBLAS workspace by
compute capability (runtime.cublas_workspace_bytes), and keeps it in the estimate to measure the
capacity against. Within `shared_estimates()`, a training job's estimate is computed once per
(workload less its GPU name, cuBLAS workspace) and copied with the GPU and the workload set: a
whole-catalog plan, fit or fix search estimates each layout a few times, not once per GPU type.
The copy is the estimate `estimate_memory` returns (tests/test_screening.py compares every field
over the catalog and many workloads). In the same block `with_changes` validates a changed
workload once for all GPU types, as `Candidates` does for a plan's layouts: the fix search (another
GPU type, the fewest of it) used to validate ~1,500 workloads for one estimate.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, Final

from gpuplan.errors import GpuplanError, InvalidSettingError
from gpuplan.estimators import runtime
from gpuplan.estimators.memory import MemoryEstimate, check_precision_runs, estimate_memory
from gpuplan.specs.gpu import GPU
from gpuplan.specs.model import ModelSpec
from gpuplan.specs.workload import Workload

# the estimates shared in this thread (or task) while a `shared_estimates()` block runs: by key,
# the model they are of and the estimate or the error it raised
_SHARED: ContextVar[dict[tuple[Any, ...], tuple[Any, Any]] | None] = ContextVar("gpuplan_shared_memory", default=None)
_NO_MODEL: Final = object()  # the model slot of a validated workload's entry
NOT_SHARED: Final = -1  # first_fit: no shared answer (outside shared_estimates, or not a training job)


@contextmanager
def shared_estimates() -> Iterator[None]:
    """Within the block, `memory` shares training memory estimates across GPU types (nested blocks
    share the outer one's)."""
    token = _SHARED.set({}) if _SHARED.get() is None else None
    try:
        yield
    finally:
        if token is not None:
            _SHARED.reset(token)


def _values(shared: dict[tuple[Any, ...], tuple[Any, Any]], w: Workload) -> str:
    """The workload's values but its `gpu`, as JSON, dumped once per workload object."""
    key = ("\0values", id(w))
    done = shared.get(key)
    if done is None or done[0] is not w:  # kept with the workload: its id is not reused meanwhile
        done = shared[key] = (w, w.model_dump_json(exclude={"gpu"}))
    return str(done[1])


def _with_gpu(w: Workload, gpu: str | None) -> Workload:
    """`w` with its `gpu` set (a copy, the validated values otherwise the same); within
    `shared_estimates()` the copy's values but its GPU, as `_values` would dump them, are known to
    be `w`'s, so the copy is never dumped again (a fix search makes ~2,700 such copies)."""
    if w.gpu == gpu:
        return w
    out = w.model_copy(update={"gpu": gpu})
    shared = _SHARED.get()
    if shared is not None:
        shared[("\0values", id(out))] = (out, _values(shared, w))
    return out


def with_changes(w: Workload, change: Mapping[str, Any]) -> Workload:
    """`w.with_(**change)`, raising the same GpuplanError where that would; within
    `shared_estimates()` validated once per workload (but its `gpu`) and change, then copied with the
    GPU set, as `Candidates.get` does (the workload's rules never read the GPU's name)."""
    shared = _SHARED.get()
    gpu = change.get("gpu", w.gpu)
    if shared is None or not (gpu is None or isinstance(gpu, str)):
        return w.with_(**change)
    set_keys = frozenset(w.model_fields_set | ({"gpu"} if "gpu" in change else set()))
    rest = tuple(sorted((k, repr(v)) for k, v in change.items() if k != "gpu"))
    key = ("\0with", _values(shared, w), set_keys, rest)
    done = shared.get(key)
    if done is None:
        try:
            done = shared[key] = (_NO_MODEL, w.with_(**change))
        except GpuplanError as exc:
            shared[key] = (_NO_MODEL, exc)
            raise
    v = done[1]
    if isinstance(v, GpuplanError):
        raise v.with_traceback(None)
    assert isinstance(v, Workload)
    return _with_gpu(v, gpu)


def memory(model: ModelSpec, w: Workload, gpu: GPU) -> MemoryEstimate:
    """`estimate_memory(model, w, gpu)`, raising the same GpuplanError where that would; within
    `shared_estimates()` a training job's is computed once per workload (but its `gpu`) and cuBLAS
    workspace (by compute capability), the only GPU figure its memory reads."""
    shared = _SHARED.get()
    if shared is None or not w.is_training:
        return estimate_memory(model, w, gpu)
    check_precision_runs(w, gpu)  # estimate_memory's own refusal, per card: the shared copy skips it
    # the one GPU figure the training memory reads (memory/base.py runtime_lines)
    workspace = runtime.cublas_workspace_bytes(gpu.cc)
    key = (id(model), workspace, _values(shared, w), frozenset(w.model_fields_set - {"gpu"}))
    done = shared.get(key)
    if done is None or done[0] is not model:
        try:
            found: MemoryEstimate | GpuplanError = estimate_memory(model, w, gpu)
        except GpuplanError as exc:
            found = exc
        done = shared[key] = (model, found)
    e = done[1]
    if isinstance(e, GpuplanError):
        raise e.with_traceback(None)
    assert isinstance(e, MemoryEstimate)
    if e.gpu is gpu and e.workload is w:
        return e
    # dataclasses.replace without its per-field __init__ (~15 us here, ~1,000 copies in a training plan): a
    # shallow copy with the two fields set, as replace would give (MemoryEstimate has no
    # __post_init__ and no init=False field; tests/test_screening.py compares the two)
    out = copy.copy(e)
    object.__setattr__(out, "workload", w)
    object.__setattr__(out, "gpu", gpu)
    return out


def first_fit(
    model: ModelSpec,
    w: Workload,
    gpu: GPU,
    tries: Sequence[Mapping[str, Any]],
    changed: Callable[[Mapping[str, Any]], Workload],
) -> int | None:
    """The index of the first of `tries` (changes to `w`, `{}` for `w` itself, each made by
    `changed`) whose workload holds on `gpu`, as walking them with `memory` and `fits` finds it
    (planner/fit.smallest_gpu_count), or None where none does; NOT_SHARED outside
    `shared_estimates()`, for a job whose memory is not shared (not training), or for a card
    that refuses the job's precision before any other card has shared its tries. A training job's
    estimate reads the GPU only for the cuBLAS workspace, so the tries' estimates are made once per
    workspace, and each GPU type is then a comparison of the same estimates with its own capacity:
    a fix search asks ~150 GPU types x counts. A try whose workload or estimate is refused
    (InvalidSettingError) is skipped, another GpuplanError raised where the walk would meet it."""
    shared = _SHARED.get()
    if shared is None or not w.is_training:
        return NOT_SHARED
    workspace = runtime.cublas_workspace_bytes(gpu.cc)
    key = ("\0tries", id(model), workspace, _values(shared, w), frozenset(w.model_fields_set - {"gpu"}),
           tuple(tuple(sorted((k, repr(v)) for k, v in c.items())) for c in tries))  # fmt: skip
    done = shared.get(key)
    if done is None or done[0] is not model:
        done = shared[key] = (model, [])
    tried = done[1]  # the outcomes of the tries so far, made as far as some GPU type's walk went
    assert isinstance(tried, list)
    for i, change in enumerate(tries):
        if i == len(tried):
            try:
                cand = changed(change) if change else w
            except GpuplanError as exc:  # InvalidSettingError among them: skipped below
                tried.append(exc)
            else:
                try:
                    check_precision_runs(cand, gpu)
                except InvalidSettingError:
                    return NOT_SHARED  # this card's refusal, not the others': no shared answer from it
                try:
                    tried.append((cand, memory(model, cand, gpu)))
                except GpuplanError as exc:
                    tried.append(exc)
        got = tried[i]
        if isinstance(got, InvalidSettingError):
            continue
        if isinstance(got, GpuplanError):
            raise got.with_traceback(None)
        cand, e = got
        try:
            check_precision_runs(cand, gpu)  # the per-card refusal `memory` makes before sharing
        except InvalidSettingError:
            continue
        if e.fits_within(runtime.usable_memory_bytes(gpu, cand.ecc)):
            return i
    return None


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
        return _with_gpu(done, gpu_name)

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
