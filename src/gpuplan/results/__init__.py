"""Typed results: what every gpuplan question answers, as frozen dataclasses with attributes and a
`to_dict()` that is exactly the `--json` document (results/base.py).

Names load on first use (PEP 562): the command line's `estimate` does not define the lab's or the
ownership model's dataclasses."""

from __future__ import annotations

from typing import TYPE_CHECKING

from gpuplan._lazy import lazy_exports

# public name -> the module that defines it (imported when the name is first used)
_EXPORTS: dict[str, str] = {
    "BestPrecision": "gpuplan.results.estimate",
    "CloudBaseline": "gpuplan.results.lab",
    "CloudJob": "gpuplan.results.lab",
    "ClusterInfo": "gpuplan.results.layouts",
    "Cost": "gpuplan.results.estimate",
    "Energy": "gpuplan.results.estimate",
    "Estimate": "gpuplan.results.estimate",
    "FitResult": "gpuplan.results.estimate",
    "FitRow": "gpuplan.results.estimate",
    "FitServing": "gpuplan.results.estimate",
    "FitTable": "gpuplan.results.estimate",
    "FixResult": "gpuplan.results.estimate",
    "GraphicsOption": "gpuplan.results.graphics",
    "GraphicsPlan": "gpuplan.results.graphics",
    "InferenceSpeed": "gpuplan.results.estimate",
    "InventoryRow": "gpuplan.results.lab",
    "LabAllocation": "gpuplan.results.lab",
    "LabCheck": "gpuplan.results.lab",
    "LabCostAllocation": "gpuplan.results.lab",
    "LabJob": "gpuplan.results.lab",
    "LabJobCheck": "gpuplan.results.lab",
    "LabOption": "gpuplan.results.lab",
    "LaunchFile": "gpuplan.results.plan",
    "LayoutPlan": "gpuplan.results.layouts",
    "LayoutRow": "gpuplan.results.layouts",
    "MemberUse": "gpuplan.results.lab",
    "Memory": "gpuplan.results.estimate",
    "MemoryLine": "gpuplan.results.estimate",
    "OpTime": "gpuplan.results.estimate",
    "OwnBreakdown": "gpuplan.results.ownership",
    "OwnSettings": "gpuplan.results.ownership",
    "Owning": "gpuplan.results.ownership",
    "Plan": "gpuplan.results.plan",
    "PlanOption": "gpuplan.results.plan",
    "Purchase": "gpuplan.results.ownership",
    "Refused": "gpuplan.results.lab",
    "RentOffer": "gpuplan.results.ownership",
    "RentVsBuy": "gpuplan.results.ownership",
    "Result": "gpuplan.results.base",
    "ScheduleFigures": "gpuplan.results.lab",
    "SearchStats": "gpuplan.results.layouts",
    "SegmentRecord": "gpuplan.results.lab",
    "ServingCost": "gpuplan.results.plan",
    "ServingMemory": "gpuplan.results.estimate",
    "ServingQueue": "gpuplan.results.estimate",
    "Skipped": "gpuplan.results.validation",
    "Suggestion": "gpuplan.results.estimate",
    "TrainingSpeed": "gpuplan.results.estimate",
    "Uncertainty": "gpuplan.results.estimate",
    "Unsuitable": "gpuplan.results.graphics",
    "Validation": "gpuplan.results.validation",
    "ValidationRow": "gpuplan.results.validation",
    "Verdict": "gpuplan.results.estimate",
}

__all__ = sorted(_EXPORTS)

if TYPE_CHECKING:  # the names as type checkers see them (the `as` form re-exports them)
    from gpuplan.results.base import Result as Result
    from gpuplan.results.estimate import BestPrecision as BestPrecision
    from gpuplan.results.estimate import Cost as Cost
    from gpuplan.results.estimate import Energy as Energy
    from gpuplan.results.estimate import Estimate as Estimate
    from gpuplan.results.estimate import FitResult as FitResult
    from gpuplan.results.estimate import FitRow as FitRow
    from gpuplan.results.estimate import FitServing as FitServing
    from gpuplan.results.estimate import FitTable as FitTable
    from gpuplan.results.estimate import FixResult as FixResult
    from gpuplan.results.estimate import InferenceSpeed as InferenceSpeed
    from gpuplan.results.estimate import Memory as Memory
    from gpuplan.results.estimate import MemoryLine as MemoryLine
    from gpuplan.results.estimate import OpTime as OpTime
    from gpuplan.results.estimate import ServingMemory as ServingMemory
    from gpuplan.results.estimate import ServingQueue as ServingQueue
    from gpuplan.results.estimate import Suggestion as Suggestion
    from gpuplan.results.estimate import TrainingSpeed as TrainingSpeed
    from gpuplan.results.estimate import Uncertainty as Uncertainty
    from gpuplan.results.estimate import Verdict as Verdict
    from gpuplan.results.graphics import GraphicsOption as GraphicsOption
    from gpuplan.results.graphics import GraphicsPlan as GraphicsPlan
    from gpuplan.results.graphics import Unsuitable as Unsuitable
    from gpuplan.results.lab import CloudBaseline as CloudBaseline
    from gpuplan.results.lab import CloudJob as CloudJob
    from gpuplan.results.lab import InventoryRow as InventoryRow
    from gpuplan.results.lab import LabAllocation as LabAllocation
    from gpuplan.results.lab import LabCheck as LabCheck
    from gpuplan.results.lab import LabCostAllocation as LabCostAllocation
    from gpuplan.results.lab import LabJob as LabJob
    from gpuplan.results.lab import LabJobCheck as LabJobCheck
    from gpuplan.results.lab import LabOption as LabOption
    from gpuplan.results.lab import MemberUse as MemberUse
    from gpuplan.results.lab import Refused as Refused
    from gpuplan.results.lab import ScheduleFigures as ScheduleFigures
    from gpuplan.results.lab import SegmentRecord as SegmentRecord
    from gpuplan.results.layouts import ClusterInfo as ClusterInfo
    from gpuplan.results.layouts import LayoutPlan as LayoutPlan
    from gpuplan.results.layouts import LayoutRow as LayoutRow
    from gpuplan.results.layouts import SearchStats as SearchStats
    from gpuplan.results.ownership import OwnBreakdown as OwnBreakdown
    from gpuplan.results.ownership import Owning as Owning
    from gpuplan.results.ownership import OwnSettings as OwnSettings
    from gpuplan.results.ownership import Purchase as Purchase
    from gpuplan.results.ownership import RentOffer as RentOffer
    from gpuplan.results.ownership import RentVsBuy as RentVsBuy
    from gpuplan.results.plan import LaunchFile as LaunchFile
    from gpuplan.results.plan import Plan as Plan
    from gpuplan.results.plan import PlanOption as PlanOption
    from gpuplan.results.plan import ServingCost as ServingCost
    from gpuplan.results.validation import Skipped as Skipped
    from gpuplan.results.validation import Validation as Validation
    from gpuplan.results.validation import ValidationRow as ValidationRow


__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals(), __all__)
