"""gpuplan: what can I run, on which GPU, how fast and at what cost.

The library's public face: `estimate`, `fit`, `plan`, `launch`, `validate`, `catalog`, `model`
and `lab`, each taking a `Workload`, a dict of workload keys or a workload YAML path, and returning
a typed result (`Estimate`, `FitResult`, `Plan`, `LayoutPlan`, ...) whose `to_dict()` is what the
CLI prints with `--json`. A `Context` (`gpuplan.context(...)`) carries the user's own catalog,
prices and calibrations. See gpuplan/library.py and docs/api.md.

Names load on first use, so `import gpuplan` stays cheap for the command line.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gpuplan._lazy import lazy_exports

__version__ = "0.1.0"

# public name -> the module that defines it (imported when the name is first used)
_EXPORTS: dict[str, str] = {
    **dict.fromkeys(
        ["context", "workload", "estimate", "fit", "plan", "launch", "validate", "catalog", "model", "lab"],
        "gpuplan.library",
    ),
    "WorkloadLike": "gpuplan.library",
    "Workload": "gpuplan.specs.workload",
    "Context": "gpuplan.specs.context",
    "Catalog": "gpuplan.specs.gpu",
    "GPU": "gpuplan.specs.gpu",
    "ModelSpec": "gpuplan.specs.model",
    "GpuplanError": "gpuplan.errors",
    "InvalidSettingError": "gpuplan.errors",
    **dict.fromkeys(
        [
            "Result",
            "Estimate",
            "Memory",
            "MemoryLine",
            "TrainingSpeed",
            "InferenceSpeed",
            "Cost",
            "Energy",
            "Verdict",
            "FitResult",
            "FitTable",
            "FitRow",
            "Suggestion",
            "Plan",
            "PlanOption",
            "LayoutPlan",
            "LayoutRow",
            "GraphicsPlan",
            "LaunchFile",
            "Validation",
            "ValidationRow",
        ],
        "gpuplan.results",
    ),
}

__all__ = ["__version__", *_EXPORTS]

if TYPE_CHECKING:  # the names as type checkers see them (the `as` form re-exports them)
    from gpuplan.errors import GpuplanError as GpuplanError
    from gpuplan.errors import InvalidSettingError as InvalidSettingError
    from gpuplan.library import WorkloadLike as WorkloadLike
    from gpuplan.library import catalog as catalog
    from gpuplan.library import context as context
    from gpuplan.library import estimate as estimate
    from gpuplan.library import fit as fit
    from gpuplan.library import lab as lab
    from gpuplan.library import launch as launch
    from gpuplan.library import model as model
    from gpuplan.library import plan as plan
    from gpuplan.library import validate as validate
    from gpuplan.library import workload as workload
    from gpuplan.results import Cost as Cost
    from gpuplan.results import Energy as Energy
    from gpuplan.results import Estimate as Estimate
    from gpuplan.results import FitResult as FitResult
    from gpuplan.results import FitRow as FitRow
    from gpuplan.results import FitTable as FitTable
    from gpuplan.results import GraphicsPlan as GraphicsPlan
    from gpuplan.results import InferenceSpeed as InferenceSpeed
    from gpuplan.results import LaunchFile as LaunchFile
    from gpuplan.results import LayoutPlan as LayoutPlan
    from gpuplan.results import LayoutRow as LayoutRow
    from gpuplan.results import Memory as Memory
    from gpuplan.results import MemoryLine as MemoryLine
    from gpuplan.results import Plan as Plan
    from gpuplan.results import PlanOption as PlanOption
    from gpuplan.results import Result as Result
    from gpuplan.results import Suggestion as Suggestion
    from gpuplan.results import TrainingSpeed as TrainingSpeed
    from gpuplan.results import Validation as Validation
    from gpuplan.results import ValidationRow as ValidationRow
    from gpuplan.results import Verdict as Verdict
    from gpuplan.specs.context import Context as Context
    from gpuplan.specs.gpu import GPU as GPU
    from gpuplan.specs.gpu import Catalog as Catalog
    from gpuplan.specs.model import ModelSpec as ModelSpec
    from gpuplan.specs.workload import Workload as Workload


__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals(), __all__)
