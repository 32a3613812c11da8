"""Typed answers of lab mode: `lab check` (what fits where) and `lab allocate` (who runs where,
until when, and the gain over an equal split and first-come-first-served)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gpuplan.results.base import Result


@dataclass(frozen=True, kw_only=True)
class LabOption(Result):
    """One job on one of the lab's GPU types: whether it fits, on how many, and how long alone."""

    gpu: str
    fits: bool
    num_gpus: int  # 0 where it does not fit
    hours: float | None
    tokens_per_s: float  # 0 where it does not fit
    layout: dict[str, Any]  # keys changed to fit (zero / tp) at num_gpus
    reason: str  # why it does not fit, or ""


@dataclass(frozen=True, kw_only=True)
class InventoryRow(Result):
    gpu: str
    count: int
    gres: str  # the Slurm GRES type name
    per_node: int  # the most GPUs of the type on one node


@dataclass(frozen=True, kw_only=True)
class LabJobCheck(Result):
    name: str
    owner: str
    model: str
    task: str
    tokens: float
    fits_anywhere: bool
    options: list[LabOption]


@dataclass(frozen=True, kw_only=True)
class LabCheck(Result):
    """`gpuplan lab check`: per job, on each GPU type of the lab, whether it fits and how long."""

    inventory: list[InventoryRow]
    jobs: list[LabJobCheck]
    speed_weights: dict[str, float]  # per GPU type, the slowest = 1


@dataclass(frozen=True, kw_only=True)
class Refused(Result):
    name: str
    owner: str
    reasons: dict[str, str]  # per GPU type


@dataclass(frozen=True, kw_only=True)
class LabJob(Result):
    """A job's place in a fair or makespan allocation."""

    name: str
    owner: str
    gpu: str  # the type it spends most GPU-time on
    num_gpus: int
    time_shares: dict[str, float]  # its time by GPU type
    expected_finish_s: float
    hours_alone_on_gpu: float | None
    deadline_s: float | None
    meets_deadline: bool | None


@dataclass(frozen=True, kw_only=True)
class MemberUse(Result):
    name: str
    share: float
    gpu_hours: float
    normalised_gpu_hours: float  # 1 h on the slowest type = 1
    budget_gpu_hours_per_month: float | None
    over_budget: bool | None


@dataclass(frozen=True, kw_only=True)
class ScheduleFigures(Result):
    average_jct_s: float
    makespan_s: float
    finish_s: dict[str, float]


@dataclass(frozen=True, kw_only=True)
class SegmentRecord(Result):
    job: str
    gpu: str
    num_gpus: int
    share: float
    start_s: float
    end_s: float


@dataclass(frozen=True, kw_only=True)
class LabAllocation(Result):
    """`gpuplan lab allocate --policy fair|makespan`: each job's GPU type, count and finish, each
    member's GPU-hours, and the gain of the policy's metric over the two baselines."""

    policy: str
    speed_weights: dict[str, float]
    refused: list[Refused]
    jobs: list[LabJob]
    members: list[MemberUse]
    schedule: ScheduleFigures
    equal_split: ScheduleFigures
    fcfs: ScheduleFigures
    metric: str  # "average_jct_s" (fair) or "makespan_s"
    gain_vs_equal_split: float
    gain_vs_fcfs: float
    segments: list[SegmentRecord]


@dataclass(frozen=True, kw_only=True)
class CloudJob(Result):
    """A job's place in the least-cloud-spend allocation: seconds on each lab type or cloud GPU."""

    name: str
    owner: str
    gpu: str
    num_gpus: int
    seconds_by_type: dict[str, float]
    expected_finish_s: float
    deadline_s: float


@dataclass(frozen=True, kw_only=True)
class CloudBaseline(Result):
    cloud_usd: float
    average_jct_s: float
    makespan_s: float
    finish_s: dict[str, float]


@dataclass(frozen=True, kw_only=True)
class LabCostAllocation(Result):
    """`gpuplan lab allocate --policy cost`: the least cloud spend that meets every deadline."""

    policy: str
    speed_weights: dict[str, float]
    refused: list[Refused]
    jobs: list[CloudJob]
    cloud_usd: float
    equal_split: CloudBaseline
    fcfs: CloudBaseline
    metric: str  # "cloud_usd"
    gain_vs_equal_split: float | None
    gain_vs_fcfs: float | None
    horizon_s: float
    spot: bool
