"""The typed results' one serialiser (gpuplan/results/base.py): field order, fields left out when
they have no value, nested results and containers, and the verdict's arithmetic."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest

import gpuplan
from gpuplan.results import Estimate, FitResult, Memory, MemoryLine, Result, Verdict
from gpuplan.results.base import optional, plain


@dataclasses.dataclass(frozen=True, kw_only=True)
class _Inner(Result):
    x: float
    x_low: float | None = optional()


@dataclasses.dataclass(frozen=True, kw_only=True)
class _Outer(Result):
    name: str
    inner: _Inner
    many: list[_Inner]
    by_key: dict[str, _Inner | None]
    nothing: float | None  # written as null
    left_out: str | None = optional()


def test_fields_in_order_nested_and_left_out() -> None:
    o = _Outer(
        name="a",
        inner=_Inner(x=1.0),
        many=[_Inner(x=2.0, x_low=1.5)],
        by_key={"k": _Inner(x=3.0), "none": None},
        nothing=None,
    )
    d = o.to_dict()
    assert list(d) == ["name", "inner", "many", "by_key", "nothing"]  # declared order; left_out absent
    assert d["inner"] == {"x": 1.0}  # x_low has no value: absent, not null
    assert d["many"] == [{"x": 2.0, "x_low": 1.5}]
    assert d["by_key"] == {"k": {"x": 3.0}, "none": None}
    assert d["nothing"] is None
    assert _Outer(**{**o.__dict__, "left_out": "here"}).to_dict()["left_out"] == "here"
    json.dumps(d, allow_nan=False)


def test_plain_leaves_plain_data_alone() -> None:
    data: Any = {"a": [1, 2.5, "x", None, True], "b": ({"c": 1},)}
    assert plain(data) == {"a": [1, 2.5, "x", None, True], "b": [{"c": 1}]}


def _memory(per_gpu: float, capacity: float | None) -> Memory:
    return Memory(
        per_gpu_bytes=per_gpu,
        breakdown={"weights": per_gpu},
        fits=None if capacity is None else per_gpu <= capacity,
        capacity_bytes=capacity,
        headroom_bytes=None if capacity is None else capacity - per_gpu,
        allocated_bytes=per_gpu,
        reserved_bytes=per_gpu,
        host_bytes=0.0,
        paged_spill_bytes=0.0,
        on_card_bytes=per_gpu,
        peak_phase="decode",
        phases={"decode": per_gpu},
        trainable_params=0,
        lines=[MemoryLine(name="weights", bytes=per_gpu, kind="model", note="")],
        not_at_peak={},
        notes=[],
    )


@pytest.mark.parametrize(
    ("per_gpu", "capacity", "fits", "headroom", "short"),
    [
        (10.0, 24.0, True, 14.0, None),
        (30.0, 24.0, False, None, 6.0),
        (24.0, 24.0, True, 0.0, None),  # exactly full fits, with no spare byte
        (5.0, None, None, None, None),  # no GPU: no verdict
    ],
)
def test_the_verdict(per_gpu: float, capacity: float | None, fits: bool | None, headroom: Any, short: Any) -> None:
    v = Verdict.of(_memory(per_gpu, capacity), "GPU" if capacity else None, 1)
    assert (v.fits, v.headroom_bytes, v.short_by_bytes) == (fits, headroom, short)
    assert v.limit == "memory at decode"


def test_fit_result_keeps_best_precision_for_inference_only() -> None:
    base: dict[str, Any] = {
        "model": "m", "gpu": "g", "num_gpus": 1, "workload": {}, "memory": _memory(1.0, 2.0), "min_gpus": 1,
        "min_gpus_layout": {}, "largest_batch": 1, "longest_context": 1, "suggestions": [],
    }  # fmt: skip
    base["verdict"] = Verdict.of(base["memory"], "g", 1)
    assert "best_precision" not in FitResult(**base, training=True).to_dict()
    inference = FitResult(**base).to_dict()
    assert inference["best_precision"] is None and "training" not in inference


def test_every_result_type_is_frozen_and_keyword_only() -> None:
    import gpuplan.results as results

    for name in results.__all__:
        cls = getattr(results, name)
        params = getattr(cls, "__dataclass_params__", None)
        assert params is not None and params.frozen, name
        with pytest.raises(TypeError):
            cls(1)  # keyword-only: a positional value is refused


def test_an_estimate_round_trips_through_json() -> None:
    r = gpuplan.estimate("llama-3.2-1b", gpu="L4", task="inference")
    assert isinstance(r, Estimate)
    assert json.loads(json.dumps(r.to_dict(), allow_nan=False)) == r.to_dict()
