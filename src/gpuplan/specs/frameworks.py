"""Training frameworks as sets of workload defaults: `framework: nemo` fills the keys NeMo's recipes
set (attention kernel, fused kernels, TP overlap, sequence parallelism, distributed optimizer …)
wherever the workload leaves them unset. The table, with a cited source per default, is the
bundled data/frameworks.toml (docs/frameworks.md is generated from it); reading a workload
applies it (specs/workload_derived.py framework_filled), so a key the user sets always wins.
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any, Final

from gpuplan.specs.workload_derived import cluster_gpus

# Launch files in a framework's own format (interfaces/launch_frameworks.py, launch_trainers.py)
OWN_FORMATS: Final = ("torchtitan", "nemo", "axolotl", "llama-factory", "torchtune", "unsloth")
# The launch formats a framework's own launch may name (interfaces/launch.py FORMATS, plus "none"
# for a framework that starts its own processes from a plain `python`/CLI command).
LAUNCH_FORMATS: Final = ("torchrun", "accelerate", "deepspeed", *OWN_FORMATS, "none")
# `when` conditions besides "a boolean key is true"
CONDITIONS: Final = ("tp>1", "num_gpus>1", "num_gpus=1", "task=pretrain", "task=finetune", "grad_accum=1")


@dataclass(frozen=True)
class Default:
    """One key a framework sets: its value, the layouts it applies to, and where it is documented."""

    key: str
    value: Any
    source: str
    # one of CONDITIONS, or a boolean key that must be true, joined by " and ";
    # "" always
    when: str = ""


@dataclass(frozen=True)
class Framework:
    name: str
    title: str
    launch: str  # the format `gpuplan launch` writes when no --format is given ("none": none)
    note: str
    defaults: tuple[Default, ...]
    max_gpus: int | None = None  # a framework that trains on one GPU only (Unsloth)
    data_parallel: bool = False  # `parallel = "data"`: no tensor, pipeline or context parallelism
    tasks: tuple[str, ...] | None = None  # the training tasks it runs (None: all of them)
    fp8_recipes: tuple[str, ...] | None = None  # the fp8 scaling recipes it has (None: any)
    scope: str = ""  # where `tasks`, `parallel` and `fp8_recipes` are documented


def _int(v: Any, fallback: int) -> int:
    try:
        return int(v)
    except (TypeError, ValueError):
        return fallback


def _holds(when: str, data: Mapping[str, Any]) -> bool:
    """Whether a default's condition holds ("A and B": both)."""
    if " and " in when:
        return all(_holds(part.strip(), data) for part in when.split(" and "))
    if not when:
        return True
    if when in ("task=pretrain", "task=finetune"):
        return data.get("task") == when.removeprefix("task=")
    if when == "grad_accum=1":  # one micro-batch per optimizer step (no global_batch above one batch per GPU)
        gb, per_step = data.get("global_batch"), _int(data.get("batch_size", 1), 1) * _int(data.get("num_gpus", 1), 1)
        return _int(data.get("grad_accum", 1), 1) == 1 and (gb is None or _int(gb, 0) <= per_step)
    if when == "tp>1":
        return _int(data.get("tp", 1), 1) > 1
    if when in ("num_gpus>1", "num_gpus=1"):
        n = cluster_gpus(data).get("num_gpus")  # NODESxGPUS:GPU sets num_gpus where the workload does not
        return (_int(n, 1) > 1) == (when == "num_gpus>1")
    return data.get(when) is True


def _parse(doc: Mapping[str, Any]) -> dict[str, Framework]:
    out: dict[str, Framework] = {}
    for name, sec in doc.items():
        defaults = tuple(  # a key given as an array of tables has one default per layout (`when`)
            Default(key, d["value"], d["source"], d.get("when", ""))
            for key, ds in sec.get("defaults", {}).items()
            for d in (ds if isinstance(ds, list) else [ds])
        )
        tasks, recipes = sec.get("tasks"), sec.get("fp8_recipes")
        out[name] = Framework(
            name, sec["title"], sec["launch"], sec.get("note", ""), defaults, sec.get("max_gpus"),
            sec.get("parallel") == "data", tuple(tasks) if tasks else None, tuple(recipes) if recipes else None,
            sec.get("scope", ""),
        )  # fmt: skip
    return out


@cache
def frameworks() -> dict[str, Framework]:
    """The bundled table (data/frameworks.toml), by name."""
    text = (resources.files("gpuplan") / "data" / "frameworks.toml").read_text(encoding="utf-8")
    return _parse(tomllib.loads(text))


def names() -> tuple[str, ...]:
    return tuple(frameworks())


def normalise(value: Any) -> Any:
    """'HF_Trainer' -> 'hf-trainer': framework names are lower case with hyphens."""
    return value.strip().lower().replace("_", "-") if isinstance(value, str) else value


def fill(name: str, data: Mapping[str, Any]) -> dict[str, Any]:
    """The keys framework `name` sets that `data` (a workload's keys) leaves unset, in the table's
    order: a later default's condition sees the earlier ones (tp_comm_overlap follows the
    sequence_parallel NeMo turns on)."""
    fw = frameworks()[name]
    merged = dict(data)
    filled: dict[str, Any] = {}
    for d in fw.defaults:
        if d.key in data or d.key in filled or not _holds(d.when, merged):  # the first default that holds
            continue
        filled[d.key] = merged[d.key] = d.value
    return filled


def check_gpus(name: str, num_gpus: int) -> None:
    """A framework that trains on at most `max_gpus` GPUs refuses more (ValueError: one line)."""
    fw = frameworks()[name]
    if fw.max_gpus is not None and num_gpus > fw.max_gpus:
        raise ValueError(
            f"framework {name} trains on {fw.max_gpus} GPU at most ({fw.title}); num_gpus is {num_gpus}: set "
            f"num_gpus: {fw.max_gpus}, or framework: axolotl, llama-factory or hf-trainer for several GPUs"
        )


def running(task: str) -> list[str]:
    """The frameworks that run training task `task`."""
    return [f.name for f in frameworks().values() if f.tasks is None or task in f.tasks]


def check(name: str, task: str, split: Mapping[str, int], fp8_recipe: str | None) -> None:
    """What the framework cannot run is refused when the workload is built, in every face
    (ValueError: one line): a task it has no recipe for, tensor/pipeline/context parallelism in a
    data-parallel-only framework, an fp8 recipe it lacks (`fp8_recipe` None: not fp8 training)."""
    fw = frameworks()[name]
    if fw.tasks is not None and task not in fw.tasks:
        raise ValueError(
            f"framework {name} does not run task {task} (it runs {', '.join(fw.tasks)}); for {task} use framework: "
            f"{', '.join(n for n in running(task) if n != name)}"
        )
    over = [f"{k} {v}" for k, v in split.items() if v > 1]
    if fw.data_parallel and over:
        raise ValueError(
            f"framework {name} splits no tensors, pipelines or sequences (data parallelism with ZeRO/FSDP only); "
            f"this workload sets {', '.join(over)}: set them to 1, or framework: megatron, nemo or torchtitan"
        )
    if fp8_recipe is not None and fw.fp8_recipes is not None and fp8_recipe not in fw.fp8_recipes:
        raise ValueError(
            f"framework {name} has no fp8_recipe {fp8_recipe} (its fp8 recipes: {', '.join(fw.fp8_recipes)}); "
            f"set fp8_recipe: {fw.fp8_recipes[0]}, or another framework"
        )
