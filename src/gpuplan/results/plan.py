"""Typed answers of `plan` (GPU types and counts) and `launch`; a cluster's layouts are in
results/layouts.py, graphics plans in results/graphics.py, `validate` in results/validation.py.

Field names and order are the plan's JSON contract (docs/api.md): `to_dict()` is the `--json` document.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from gpuplan.results.base import Result, band, optional
from gpuplan.results.estimate import Verdict


@dataclass(frozen=True, kw_only=True)
class ServingCost(Result):
    """What a serving option's output tokens cost: $ per million at the largest batch (concurrent
    sequences) that fits and meets the workload's latency targets (`max_tpot_ms`, `max_ttft_ms`),
    or at its own `batch_size` without one. `limited_by` says what stops a larger batch."""

    batch: int | None  # None: no batch meets the targets
    tokens_per_s: float | None  # output tokens/s at that batch, all GPUs together
    usd_per_million_tokens: float | None  # price x GPUs / (tokens/s x 3600) x 1e6; None without a price
    tpot_s: float | None
    ttft_s: float | None  # one request's time to first token
    limited_by: str


@dataclass(frozen=True, kw_only=True)
class PlanOption(Result):
    """One GPU type and count for the workload: memory, time, cost, energy and why it ranks where
    it does. `time_s` is the job's time (a service: one request's latency). Where the engine's KV
    cache holds fewer of the `batch_size` requests than were sent at once, `why` starts with how
    many run at once, and `throughput`, `ttft_s`, `tpot_s` and `time_s` are the whole queued batch's
    (the median request's: InferenceSpeed.queue in `estimate`)."""

    verdict: Verdict  # fits, by how much, what binds (a plan row's fixes are the other rows)
    gpu: str
    num_gpus: int
    fits: bool
    layout: dict[str, Any] | None
    per_gpu_bytes: float | None
    per_gpu_bytes_low: float | None = band()
    per_gpu_bytes_high: float | None = band()
    time_s: float | None
    time_s_low: float | None = band()
    time_s_high: float | None = band()
    throughput: float | None
    throughput_low: float | None = band()
    throughput_high: float | None = band()
    cost_usd: float | None
    usd_per_hour: float | None
    usd_per_million_tokens: float | None
    energy_kwh: float | None
    kwh_per_million_tokens: float | None
    bottleneck: str | None
    why: str
    meets_deadline: bool | None
    within_budget: bool | None
    too_slow: bool
    licence_barred: bool
    usable: bool  # fits, fast enough, licence-clean, within deadline and budget
    mfu: float | None = optional()  # training options
    ttft_s: float | None = optional()  # inference options
    tpot_s: float | None = optional()
    pareto: bool = False  # on the time-cost Pareto front of the usable options
    serving: ServingCost | None = optional()  # inference of a generating model: $/Mtok at the best batch
    same_as: list[str] | None = optional()  # other GPUs with this row's very figures and price, folded into it
    # a row of the workload's own `gpu` ranked below the top N, shown after them: `rank` is its place
    # among the fitting rows of the whole ranking (the text table's #)
    pinned: bool | None = optional()
    rank: int | None = optional()


@dataclass(frozen=True, kw_only=True)
class Plan(Result):
    """`gpuplan plan`: GPU types and counts ranked for the objective."""

    workload: dict[str, Any]
    model: str
    objective: str
    mode: str  # training | service | batch inference
    deadline_s: float | None
    budget_usd: float | None
    options: list[PlanOption]
    considered: int
    throughput_unit: str
    chosen_gpu: str | None = optional()  # the workload's own `gpu`, by catalog name: faces highlight it
    have: dict[str, int] | None = optional()  # the GPUs the user owns: `options` are on them only
    rent_options: list[PlanOption] | None = optional()  # with `have`: what renting would add (priced)
    # with `have` when nothing owned holds the job: per owned GPU type, the verdict at the owned count
    # (shortfall, what binds, the verified fixes on those GPUs), ahead of the rental options
    owned_verdicts: list[Verdict] | None = optional()

    @property
    def best(self) -> PlanOption | None:
        """The first usable option, if any."""
        return next((o for o in self.options if o.usable), None)


@dataclass(frozen=True, kw_only=True)
class LaunchFile(Result):
    """`gpuplan launch`: the file's text and the layout and workload it launches."""

    format: str
    text: str
    layout: str
    workload: dict[str, Any]
    cluster: str
    # what the user should read beside the file (the CLI prints them to stderr): a setting the
    # written layout changed from the workload's, a JSON file's layout and run command
    notes: list[str] = field(default_factory=list)
