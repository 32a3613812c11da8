"""What `estimate`, `fit` and `plan` compute from their command-line values, with no command-line
framework loaded: the Typer commands (cli/estimate.py, cli/plan.py) and the `--json` fast path
(cli/fast.py) both call these, so the two cannot answer differently. Also the workload flags the
three commands share, and the JSON writer."""

from __future__ import annotations

import math
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from gpuplan.results import Estimate, FitResult, FitTable, GraphicsPlan, LayoutPlan, Plan


@dataclass(frozen=True)
class WorkloadFlag:
    """A workload key the commands take as its own flag: `--seq-len 4096` is `--set seq_len=4096`."""

    param: str  # the parameter; with dashes, the flag (seq_len: --seq-len)
    key: str  # the workload key it sets
    kind: type  # the value's type on the command line

    @property
    def flag(self) -> str:
        return "--" + self.param.replace("_", "-")


# The keys people set most, as flags with one name, help text and meaning in `fit`, `estimate` and
# `plan` (help: the key's line in docs/workload.md); every other key through --set.
WORKLOAD_FLAGS: Final = (
    WorkloadFlag("task", "task", str),
    WorkloadFlag("gpu", "gpu", str),
    WorkloadFlag("num_gpus", "num_gpus", int),
    WorkloadFlag("batch_size", "batch_size", int),
    WorkloadFlag("seq_len", "seq_len", int),
    WorkloadFlag("precision", "precision", str),
    WorkloadFlag("optimizer", "optimizer", str),
    WorkloadFlag("checkpointing", "activation_checkpointing", str),
    WorkloadFlag("zero", "zero", int),
    WorkloadFlag("tp", "tp", int),
    WorkloadFlag("lora_rank", "lora_rank", int),
    WorkloadFlag("input_len", "input_len", int),
    WorkloadFlag("output_len", "output_len", int),
    WorkloadFlag("weight_dtype", "weight_dtype", str),
    WorkloadFlag("kv_dtype", "kv_dtype", str),
    WorkloadFlag("engine", "engine", str),
    WorkloadFlag("tokens", "tokens", float),
)


# The option checks beyond a value's type, shared by the Typer options (cli/common.py, cli/plan.py)
# and the fast path (cli/fast.py), which leaves a value they refuse to Typer's error: --carbon in
# g CO2e/kWh (the web API's bound; coal plants emit ~1,000), --top's range.
CARBON_MAX: Final = 5_000
TOP_MIN: Final = 1
TOP_MAX: Final = 100_000


def carbon_ok(value: float) -> bool:
    """--carbon: a finite grid carbon intensity from 0 to CARBON_MAX."""
    return math.isfinite(value) and 0 <= value <= CARBON_MAX


def workload_keys(flags: Mapping[str, Any], set_: list[str] | None, **more: Any) -> dict[str, Any]:
    """The workload keys a command line sets: the flags (and a command's own, `more`), then
    --set KEY=VALUE, which wins over a flag for the same key."""
    from gpuplan.interfaces import api

    keys = {k: v for k, v in {**flags, **more}.items() if v is not None}
    keys.update(api.parse_set_options(set_ or []))
    return keys


def emit_json(obj: Any) -> None:
    """One JSON document on stdout: a typed result's `to_dict()`, or plain data as it is."""
    from gpuplan.results.base import plain
    from gpuplan.safeio import dumps_json

    sys.stdout.write(dumps_json(plain(obj)) + "\n")  # strict: never a NaN or Infinity token


def is_lab_file(have: str) -> bool:
    """--have names a lab file (a YAML path), not a list of GPUs."""
    return have.strip().lower().endswith((".yaml", ".yml"))


def estimate_answer(
    workload: str | None,
    flags: Mapping[str, Any],
    prices: Path | None,
    carbon: float | None,
    set_: list[str] | None,
    catalog: list[Path] | None,
    calibration: list[Path] | None,
) -> Estimate:
    """`gpuplan estimate`: memory, time, cost and energy of one workload on one GPU type."""
    from gpuplan.interfaces import api
    from gpuplan.specs.context import Context

    keys = workload_keys(flags, set_)
    ctx = Context.of([*(catalog or []), *(calibration or [])], prices)
    return api.estimate(api.build_workload(workload, keys), ctx, carbon)


def fit_answer(
    workload: str | None,
    flags: Mapping[str, Any],
    set_: list[str] | None,
    catalog: list[Path] | None,
    calibration: list[Path] | None,
) -> FitResult | FitTable | GraphicsPlan:
    """`gpuplan fit`: the memory breakdown on one GPU, or the table over every catalog GPU."""
    from gpuplan.interfaces import api
    from gpuplan.specs.context import Context

    w = api.build_workload(workload, workload_keys(flags, set_))
    return api.fit(w, Context.of([*(catalog or []), *(calibration or [])]))


def plan_answer(
    workload: str | None,
    flags: Mapping[str, Any],
    set_: list[str] | None,
    *,
    objective: str | None = None,
    deadline: str | None = None,
    budget: float | None = None,
    gpus: str | None = None,
    top: int | None = 10,
    prices: Path | None = None,
    spot: bool = False,
    carbon: float | None = None,
    cluster: str | None = None,
    cross_node_tp: bool = False,
    have: str | None = None,
    catalog: list[Path] | None = None,
    calibration: list[Path] | None = None,
) -> Plan | LayoutPlan | GraphicsPlan:
    """`gpuplan plan`: GPU types and counts ranked, a cluster's layouts, or a graphics plan; the
    keywords are the command's own options."""
    from gpuplan.interfaces import api
    from gpuplan.specs.context import Context

    keys = workload_keys(flags, set_, objective=objective, deadline=deadline, budget=budget)
    w = api.build_workload(workload, keys)
    names = [g.strip() for g in gpus.split(",") if g.strip()] if gpus else []
    ctx = Context.of([*(catalog or []), *(calibration or [])], prices)
    owned = Path(have.strip()) if have is not None and is_lab_file(have) else have
    return api.plan(w, ctx, names, top, spot, carbon, cluster, cross_node_tp, have=owned)
