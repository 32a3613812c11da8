"""gpuplan as a library: one function per question, each taking a workload as a `Workload`, a dict
of workload keys, or the path of a workload YAML file (or a model name), plus keys that override
it, and returning a typed result whose `to_dict()` is exactly what `gpuplan ... --json` prints.

A `Context` carries the user's own catalog rows, calibrations and prices (the CLI's `--catalog`,
`--calibration` and `--prices`, or `$GPUPLAN_CATALOG` / `$GPUPLAN_PRICES`); build one with
`gpuplan.context(...)` and pass it to every call, or pass nothing for the bundled data.

>>> import gpuplan
>>> r = gpuplan.estimate("llama-3.1-8b", task="lora", gpu="RTX 4090", batch_size=2, seq_len=2048,
...                      activation_checkpointing="full")
>>> r.verdict.fits, r.verdict.limit
(True, 'memory at forward/backward')
>>> f"{r.memory.per_gpu_bytes / 2**30:.2f} GiB"
'23.09 GiB'
>>> r.to_dict()["memory"]["fits"]
True
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeAlias

from gpuplan.errors import InvalidSettingError
from gpuplan.interfaces import api
from gpuplan.results import (
    Estimate,
    FitResult,
    FitTable,
    GraphicsPlan,
    LabAllocation,
    LabCostAllocation,
    LaunchFile,
    LayoutPlan,
    Plan,
    Validation,
)
from gpuplan.specs.context import Context
from gpuplan.specs.gpu import Catalog
from gpuplan.specs.model import ModelSpec
from gpuplan.specs.workload import Workload, check_keys_apply, make_workload

WorkloadLike: TypeAlias = Workload | Mapping[str, Any] | str | os.PathLike[str]


def context(
    catalog: Iterable[str | os.PathLike[str]] = (),
    prices: str | os.PathLike[str] | None = None,
    calibration: Iterable[str | os.PathLike[str]] = (),
) -> Context:
    """The user's catalog TOML files, price CSV and `gpuplan bench` calibration files, read once
    on first use. The environment's `$GPUPLAN_CATALOG` and `$GPUPLAN_PRICES` apply as on the CLI.

    >>> import gpuplan
    >>> gpuplan.context().catalog.get("4090").name
    'GeForce RTX 4090'
    """
    return Context.of([*map(Path, catalog), *map(Path, calibration)], Path(prices) if prices is not None else None)


def workload(source: WorkloadLike, **keys: Any) -> Workload:
    """A validated `Workload` from a `Workload`, a dict of keys, a workload YAML path or a model
    name; `keys` override (as `--set KEY=VALUE` does). Bad keys raise `InvalidSettingError` with
    one line naming the key.

    >>> import gpuplan
    >>> w = gpuplan.workload({"model": "llama-3.1-8b", "task": "qlora"}, gpu="T4")
    >>> (w.task, w.gpu, w.precision)
    ('qlora', 'T4', 'bf16')
    """
    if isinstance(source, Workload):
        return source.with_(**keys) if keys else source
    if isinstance(source, Mapping):
        w = make_workload({**source, **keys})
        check_keys_apply(w)  # a key the task ignores is an error, not silence
        return w
    if isinstance(source, str | os.PathLike):
        return api.build_workload(os.fspath(source), keys)
    raise InvalidSettingError(
        f"A workload is a Workload, a dict of workload keys, or a YAML path. Got {type(source).__name__}."
    )


def estimate(
    source: WorkloadLike, *, context: Context | None = None, carbon_g_per_kwh: float | None = None, **keys: Any
) -> Estimate:
    """Memory, time, cost and energy of one workload on one GPU type, each with its breakdown and
    validation range (`gpuplan estimate`).

    >>> import gpuplan
    >>> r = gpuplan.estimate({"model": "llama-3.2-1b", "task": "inference", "gpu": "L4",
    ...                       "batch_size": 8, "input_len": 512, "output_len": 256})
    >>> r.verdict.fits
    True
    >>> round(r.time.tpot_s * 1e3, 1)  # ms per output token
    11.6
    """
    return api.estimate(workload(source, **keys), context, carbon_g_per_kwh)


def fit(source: WorkloadLike, *, context: Context | None = None, **keys: Any) -> FitResult | FitTable | GraphicsPlan:
    """Will it fit (`gpuplan fit`)? With a GPU, a `FitResult`: the breakdown, the fewest GPUs, the
    largest batch, the longest context and changes that fit; without one, a `FitTable` over every
    catalog GPU.

    >>> import gpuplan
    >>> r = gpuplan.fit("llama-3.1-70b", task="qlora", batch_size=1, seq_len=4096,
    ...                 activation_checkpointing="full")
    >>> [(row.gpu, row.min_gpus) for row in r.gpus if row.fits][:2]
    [('H100 SXM5 80GB', 1), ('H100 PCIe 80GB', 1)]
    """
    return api.fit(workload(source, **keys), context)


def plan(
    source: WorkloadLike,
    *,
    context: Context | None = None,
    gpus: Sequence[str] = (),
    top: int | None = 10,
    spot: bool = False,
    carbon_g_per_kwh: float | None = None,
    cluster: str | None = None,
    allow_cross_node_tp: bool = False,
    have: str | Mapping[str, int] | Path | None = None,
    **keys: Any,
) -> Plan | LayoutPlan | GraphicsPlan:
    """GPU types and counts ranked by the workload's objective (`gpuplan plan`); with a cluster
    (`cluster="64x8:H100"` or the `cluster` key) and a training job, a `LayoutPlan` of its fastest
    parallel layouts; a graphics job gets a `GraphicsPlan`. `have` ("4x RTX 3090, 1x A100 40GB" or
    {name: count}, or a lab file's `Path`: one node's worth of each of its GPU types) plans on the
    GPUs the user owns, with what renting would add in `rent_options`.

    >>> import gpuplan
    >>> p = gpuplan.plan("examples/chat-7b.yaml", gpus=["L4", "A10G", "L40S"])
    >>> [(o.gpu, o.num_gpus) for o in p.options[:2]]
    [('L4', 1), ('L40S', 1)]
    """
    return api.plan(
        workload(source, **keys), context, gpus, top, spot, carbon_g_per_kwh, cluster, allow_cross_node_tp, have=have
    )


def launch(
    source: WorkloadLike,
    format: str,
    *,
    context: Context | None = None,
    cluster: str | None = None,
    script: str = "train.py",
    script_args: Sequence[str] = (),
    partition: str | None = None,
    gres: str | None = None,
    time_limit: str | None = None,
    force: bool = False,
    **keys: Any,
) -> LaunchFile:
    """A launch file (torchrun, accelerate, deepspeed, fsdp, slurm, skypilot, vllm, or a framework's
    own: torchtitan, nemo, axolotl, llama-factory, torchtune, unsloth; "" for the workload framework's own) for the
    workload's layout, searched on the cluster unless the workload sets one (`gpuplan launch`).
    `source` may also be the path of a `gpuplan plan --json` document: its best option launches.
    A job that does not fit raises `InvalidSettingError` with the shortfall and the best fix,
    unless `force`.

    >>> import gpuplan
    >>> f = gpuplan.launch("examples/lora-4090.yaml", "torchrun")
    >>> f.layout
    'TP1 PP1 DP1 mb2x1 full ckpt'
    >>> f.text.splitlines()[0]
    '# gpuplan: llama-3.1-8b lora (bf16) on 1 x 1 GeForce RTX 4090'
    """
    if isinstance(source, str | os.PathLike) and os.fspath(source).lower().endswith(".json"):
        return api.launch(
            os.fspath(source), format, keys, cluster, script, script_args, context, partition, gres, time_limit, force
        )
    w = workload(source, **keys)
    return api.launch(w, format, None, cluster, script, script_args, context, partition, gres, time_limit, force)


def validate(
    file: str | os.PathLike[str] | None = None, *, category: str | None = None, context: Context | None = None
) -> Validation:
    """Predicted against published for every measurement gpuplan can express: the bundled ones, or
    a CSV of your own with the same columns (`gpuplan validate`).

    >>> import gpuplan
    >>> v = gpuplan.validate(category="memory")
    >>> len(v.rows) > 30 and v.summary["memory"]["median_abs_error"] < 0.1
    True
    """
    return api.validate(os.fspath(file) if file is not None else None, context, category)


def catalog(*files: str | os.PathLike[str], context: Context | None = None) -> Catalog:
    """The GPU catalog: the bundled one plus catalog TOML files (and `$GPUPLAN_CATALOG`).

    >>> import gpuplan
    >>> h100 = gpuplan.catalog().get("H100")
    >>> h100.name, h100.memory_bytes / 2**30
    ('H100 SXM5 80GB', 80.0)
    """
    if files and context is not None:
        raise InvalidSettingError("Pass catalog files or a context, not both.")
    return (context or Context.of([Path(f) for f in files])).catalog


def model(name_or_path: str | os.PathLike[str]) -> ModelSpec:
    """A model: a bundled preset, a local config.json (or its folder), or a hub id (read offline
    from the local cache; no code from a model repository ever runs).

    >>> import gpuplan
    >>> m = gpuplan.model("llama-3.1-8b")
    >>> m.total_params, m.num_layers
    (8030261248, 32)
    """
    return api.get_model(os.fspath(name_or_path))


def lab(
    path: str | os.PathLike[str],
    policy: str = "fair",
    *,
    context: Context | None = None,
    burst: bool = True,
    spot: bool = False,
) -> LabAllocation | LabCostAllocation:
    """Lab mode's allocation of a lab file (nodes, members, jobs) under a policy: `fair`,
    `makespan`, or `cost` (the least cloud spend that meets every deadline) (`gpuplan lab allocate`).

    >>> import gpuplan
    >>> a = gpuplan.lab("examples/lab.yaml", "fair")
    >>> sorted(j.name for j in a.jobs)[:2]
    ['bert-mlm', 'eval-7b']
    """
    from gpuplan.planner.lab_allocate import allocate

    return allocate(os.fspath(path), policy, context, burst=burst, spot=spot)
