"""The library's working API, one module per user action; the public face is `gpuplan`'s own
`__init__` (typed results), and the CLI, web app and lab mode are adapters over these functions.
All numbers are SI units."""

from gpuplan.interfaces.api.catalog import (
    catalog,
    compare_gpus,
    context,
    get_gpu,
    gpu_menu_record,
    gpu_record,
    list_gpus,
    precision_support,
    prices,
    quirks,
    use_case_record,
)
from gpuplan.interfaces.api.charts import chart_relative, roofline
from gpuplan.interfaces.api.estimate import estimate, fit
from gpuplan.interfaces.api.launch import launch
from gpuplan.interfaces.api.models import (
    DEFAULT_CONTEXT,
    MAX_CONTEXT_LEN,
    default_context,
    get_model,
    list_models,
    model_from_json,
    model_record,
)
from gpuplan.interfaces.api.plan import lab_have, plan, plan_cluster
from gpuplan.interfaces.api.rent import rent_vs_buy
from gpuplan.interfaces.api.validate import residual_file, validate
from gpuplan.interfaces.api.workloads import build_workload, parse_set_options, resolve_cluster

__all__ = [
    "DEFAULT_CONTEXT",
    "MAX_CONTEXT_LEN",
    "build_workload",
    "catalog",
    "chart_relative",
    "compare_gpus",
    "context",
    "default_context",
    "estimate",
    "fit",
    "get_gpu",
    "get_model",
    "gpu_menu_record",
    "gpu_record",
    "lab_have",
    "launch",
    "list_gpus",
    "list_models",
    "model_from_json",
    "model_record",
    "parse_set_options",
    "plan",
    "plan_cluster",
    "precision_support",
    "prices",
    "quirks",
    "rent_vs_buy",
    "residual_file",
    "resolve_cluster",
    "roofline",
    "use_case_record",
    "validate",
]
