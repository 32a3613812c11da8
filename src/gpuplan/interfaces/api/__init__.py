"""The library's working API, one module per user action; the public face is `gpuplan`'s own
`__init__` (typed results), and the CLI, web app and lab mode are adapters over these functions.
All numbers are SI units.

Names load on first use (PEP 562, as `gpuplan` itself): `api.estimate` imports the estimate
module only, so a command that estimates does not import the plan search or the charts."""

from __future__ import annotations

import sys
from types import ModuleType
from typing import TYPE_CHECKING, Any

from gpuplan._lazy import lazy_exports

# public name -> the module that defines it (imported when the name is first used)
_EXPORTS: dict[str, str] = {
    "DEFAULT_CONTEXT": "gpuplan.interfaces.api.models",
    "MAX_CONTEXT_LEN": "gpuplan.interfaces.api.models",
    "build_workload": "gpuplan.interfaces.api.workloads",
    "catalog": "gpuplan.interfaces.api.catalog",
    "chart_relative": "gpuplan.interfaces.api.charts",
    "compare_gpus": "gpuplan.interfaces.api.catalog",
    "context": "gpuplan.interfaces.api.catalog",
    "default_context": "gpuplan.interfaces.api.models",
    "estimate": "gpuplan.interfaces.api.estimate",
    "fit": "gpuplan.interfaces.api.estimate",
    "get_gpu": "gpuplan.interfaces.api.catalog",
    "get_model": "gpuplan.interfaces.api.models",
    "gpu_menu_record": "gpuplan.interfaces.api.catalog",
    "gpu_record": "gpuplan.interfaces.api.catalog",
    "lab_have": "gpuplan.interfaces.api.plan",
    "launch": "gpuplan.interfaces.api.launch",
    "list_gpus": "gpuplan.interfaces.api.catalog",
    "list_models": "gpuplan.interfaces.api.models",
    "model_from_json": "gpuplan.interfaces.api.models",
    "model_record": "gpuplan.interfaces.api.models",
    "parse_set_options": "gpuplan.interfaces.api.workloads",
    "plan": "gpuplan.interfaces.api.plan",
    "plan_cluster": "gpuplan.interfaces.api.plan",
    "precision_support": "gpuplan.interfaces.api.catalog",
    "prices": "gpuplan.interfaces.api.catalog",
    "quirks": "gpuplan.interfaces.api.catalog",
    "rent_vs_buy": "gpuplan.interfaces.api.rent",
    "residual_file": "gpuplan.interfaces.api.validate",
    "resolve_cluster": "gpuplan.interfaces.api.workloads",
    "roofline": "gpuplan.interfaces.api.charts",
    "use_case_record": "gpuplan.interfaces.api.catalog",
    "validate": "gpuplan.interfaces.api.validate",
}

__all__ = sorted(_EXPORTS)

if TYPE_CHECKING:  # the names as type checkers see them (the `as` form re-exports them)
    from gpuplan.interfaces.api.catalog import catalog as catalog
    from gpuplan.interfaces.api.catalog import compare_gpus as compare_gpus
    from gpuplan.interfaces.api.catalog import context as context
    from gpuplan.interfaces.api.catalog import get_gpu as get_gpu
    from gpuplan.interfaces.api.catalog import gpu_menu_record as gpu_menu_record
    from gpuplan.interfaces.api.catalog import gpu_record as gpu_record
    from gpuplan.interfaces.api.catalog import list_gpus as list_gpus
    from gpuplan.interfaces.api.catalog import precision_support as precision_support
    from gpuplan.interfaces.api.catalog import prices as prices
    from gpuplan.interfaces.api.catalog import quirks as quirks
    from gpuplan.interfaces.api.catalog import use_case_record as use_case_record
    from gpuplan.interfaces.api.charts import chart_relative as chart_relative
    from gpuplan.interfaces.api.charts import roofline as roofline
    from gpuplan.interfaces.api.estimate import estimate as estimate
    from gpuplan.interfaces.api.estimate import fit as fit
    from gpuplan.interfaces.api.launch import launch as launch
    from gpuplan.interfaces.api.models import DEFAULT_CONTEXT as DEFAULT_CONTEXT
    from gpuplan.interfaces.api.models import MAX_CONTEXT_LEN as MAX_CONTEXT_LEN
    from gpuplan.interfaces.api.models import default_context as default_context
    from gpuplan.interfaces.api.models import get_model as get_model
    from gpuplan.interfaces.api.models import list_models as list_models
    from gpuplan.interfaces.api.models import model_from_json as model_from_json
    from gpuplan.interfaces.api.models import model_record as model_record
    from gpuplan.interfaces.api.plan import lab_have as lab_have
    from gpuplan.interfaces.api.plan import plan as plan
    from gpuplan.interfaces.api.plan import plan_cluster as plan_cluster
    from gpuplan.interfaces.api.rent import rent_vs_buy as rent_vs_buy
    from gpuplan.interfaces.api.validate import residual_file as residual_file
    from gpuplan.interfaces.api.validate import validate as validate
    from gpuplan.interfaces.api.workloads import build_workload as build_workload
    from gpuplan.interfaces.api.workloads import parse_set_options as parse_set_options
    from gpuplan.interfaces.api.workloads import resolve_cluster as resolve_cluster


__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals(), __all__)


class _Package(ModuleType):
    """Several submodules share their name with the function they define (`api.estimate`,
    `api.catalog`, `api.plan`): importing one binds the submodule as an attribute of this package
    (importlib does so), which would hide the function. The function is bound instead."""

    def __setattr__(self, name: str, value: Any) -> None:
        if isinstance(value, ModuleType) and _EXPORTS.get(name) == value.__name__:
            value = getattr(value, name)
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package
