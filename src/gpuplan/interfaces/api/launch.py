"""`launch`: a launch file for a workload, or for the best option of a saved plan."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpuplan.errors import GpuplanError, InvalidSettingError, did_you_mean
from gpuplan.estimators.memory import MemoryEstimate
from gpuplan.interfaces.api.catalog import catalog, context
from gpuplan.interfaces.api.workloads import (
    NO_ENCODER_DECODER_ENGINES,
    build_workload,
    engine_for_model,
    resolve_cluster,
)
from gpuplan.results import LaunchFile
from gpuplan.safeio import clip, load_json
from gpuplan.specs import frameworks
from gpuplan.specs.context import Context
from gpuplan.specs.gpu import GIB
from gpuplan.specs.model import ModelSpec
from gpuplan.specs.models import load_model
from gpuplan.specs.workload import Workload, make_workload, read_user_text

if TYPE_CHECKING:
    from gpuplan.planner.launch_plan import LaunchPlan

# --- launch files ------------------------------------------------------------------------------


def _workload_from_plan(path: Path) -> tuple[Workload, str | None]:
    """A workload (with the best layout's keys) from `gpuplan plan --json` output."""
    text = read_user_text(path, "plan file", "Pass a workload YAML or the JSON `gpuplan plan --json` prints.")
    rec = load_json(text, path.name)  # bounded nesting, no NaN tokens, integers within 64 bits
    if not isinstance(rec, dict) or not isinstance(rec.get("workload"), dict):
        raise InvalidSettingError(f"{path.name} is not a `gpuplan plan --json` document (no 'workload').")
    keys = dict(rec["workload"])
    spec: str | None = None
    try:  # the document's shape, checked as it is read: a wrong one is one line, not a traceback
        if rec.get("mode") == "cluster" and rec.get("layouts"):
            keys.update(rec["layouts"][0]["keys"])
            keys["global_batch"] = rec.get("global_batch")
            spec = rec["cluster"]["spec"]
            if not isinstance(spec, str):
                raise TypeError("cluster.spec is not text")
            keys.update({"cluster": spec, "num_gpus": rec["cluster"]["num_gpus"], "gpu": rec["cluster"]["gpu"]})
        elif rec.get("options"):
            best = next((o for o in rec["options"] if o.get("usable")), rec["options"][0])
            keys.update({"gpu": best["gpu"], "num_gpus": best["num_gpus"]})
            keys.update({k: v for k, v in (best.get("layout") or {}).items() if k in Workload.model_fields})
        else:
            raise InvalidSettingError(f"{clip(path.name)} holds no plan options or layouts to launch.")
    except (KeyError, IndexError, TypeError, AttributeError, ValueError) as exc:
        what = f"no {exc}" if isinstance(exc, KeyError) else clip(str(exc) or type(exc).__name__)
        raise InvalidSettingError(
            f"{clip(path.name)} is not a `gpuplan plan --json` document ({what}). Pass what `gpuplan plan --json` "
            "printed, unedited, or a workload YAML."
        ) from None
    return make_workload(keys), spec


def _is_model_config(path: Path) -> bool:
    """A model's config.json (launched as estimate and plan take it), not a `plan --json` document:
    named config.json, or a JSON object with a model_type and no 'workload'."""
    if path.name.lower() == "config.json":
        return True
    try:
        rec = load_json(read_user_text(path, "plan file", ""), path.name)
    except GpuplanError:
        return False  # the plan reader names what is wrong with it
    return isinstance(rec, dict) and "model_type" in rec and "workload" not in rec


def launch(
    source: str | Workload,
    fmt: str,
    overrides: Mapping[str, Any] | None = None,
    cluster: str | None = None,
    script: str = "train.py",
    script_args: Sequence[str] = (),
    ctx: Context | None = None,
    partition: str | None = None,
    gres: str | None = None,
    time_limit: str | None = None,
    force: bool = False,
) -> LaunchFile:
    """`gpuplan launch`: the launch file for a workload (a `Workload`, a YAML path or a model name;
    or the path of a `gpuplan plan --json` document, whose best option it launches) in `fmt`; an
    empty `fmt` writes the workload framework's own launch (accelerate for hf-trainer, a torchtitan
    TOML, a NeMo command …)."""
    from gpuplan.interfaces.launch import FORMATS, render
    from gpuplan.interfaces.launch_frameworks import default_format, precheck
    from gpuplan.planner.launch_plan import plan_launch

    if fmt and fmt not in FORMATS:
        hint = did_you_mean(fmt, FORMATS)
        raise InvalidSettingError(f"Unknown launch format {fmt!r}.{hint} Known: {', '.join(FORMATS)}.")
    ctx = context(ctx)  # read once: the launch plan and a refusal's fixes share it
    cat = catalog(ctx)
    if isinstance(source, Workload):
        w = source.with_(**{k: v for k, v in (overrides or {}).items() if v is not None}) if overrides else source
    elif source.lower().endswith(".json") and not _is_model_config(Path(source)):
        w, spec = _workload_from_plan(Path(source))
        if overrides:
            w = w.with_(**{k: v for k, v in overrides.items() if v is not None})
        cluster = cluster or spec
    else:
        w = build_workload(source, overrides)
    w, cl = resolve_cluster(w, cat, cluster)
    if fmt in frameworks.names() and w.framework is None and w.is_training:
        # a framework's own file (--format unsloth) plans with that framework's defaults, as framework: does
        w = w.with_(framework=fmt)
    model = load_model(w.model)
    if fmt in NO_ENCODER_DECODER_ENGINES and model.kind == "encoder-decoder":
        w = w.with_(engine=fmt)  # --format vllm is that engine's launch: refused for a T5 below
    w = engine_for_model(w, model)
    if w.is_training:
        fmt = fmt or default_format(w.framework)  # no format: the framework's own launch
    else:  # serving: the engine's own format (vllm), or a refusal naming the engine's own command
        from gpuplan.interfaces.launch_engines import serving_format
        from gpuplan.planner.launch_plan import model_id

        fmt = serving_format(w, fmt, model_id(model, w.model))
    precheck(fmt, w, model)  # a model the framework's file cannot name: one line, before any estimate
    # formats with no TP/PP/CP: the plain trainers', and the frameworks that run data parallel only
    # (frameworks.toml `parallel`); torchtitan, NeMo and Megatron-LM split tensors, pipelines and sequences
    dp_only = fmt in ("accelerate", "fsdp", "deepspeed") or (
        fmt in frameworks.names() and frameworks.frameworks()[fmt].data_parallel
    )
    lp = plan_launch(model, w.model, w, cl, cat, script, tuple(script_args), data_parallel=dp_only)
    if not lp.memory.fits and not force:
        _refuse(model, lp.w, lp.memory, ctx, lp.layout_label if lp.searched_none else None)
    opts = {"partition": partition, "gres": gres, "time_limit": time_limit} if fmt == "slurm" else {}
    text = render(lp, fmt, **opts)
    return LaunchFile(
        format=fmt,
        text=text,
        layout=lp.layout_label,
        workload=lp.w.model_dump(exclude_none=True),
        cluster=lp.cluster.label,
        notes=[*lp.notes, *_json_notes(lp, fmt)],
    )


def _json_notes(lp: LaunchPlan, fmt: str) -> list[str]:
    """A JSON file has no comment for its header: the layout and the command go beside it (stderr),
    after the --force warning of a job that does not fit."""
    if fmt != "deepspeed" or not lp.w.is_training:
        return []
    from gpuplan.interfaces.launch import fit_warning, peft_script
    from gpuplan.interfaces.quoting import shell_line

    cl = lp.cluster
    nodes = f"--num_nodes {cl.nodes} --hostfile hostfile " if cl.nodes > 1 else ""
    script = shell_line(peft_script(lp)) if lp.w.task in ("lora", "qlora") else lp.script
    return [x for x in (fit_warning(lp),) if x] + [
        f"layout {lp.layout_label} on {cl.label}; run: deepspeed {nodes}--num_gpus {cl.gpus_per_node} "
        f"{script} --deepspeed ds_config.json (this file)"
    ]


def _refuse(
    model: ModelSpec, w: Workload, memory: MemoryEstimate, ctx: Context | None, unsearched: str | None = None
) -> None:
    """A launch file for a job that would not run is refused, with the shortfall and the best fix;
    `unsearched`: the layout as written, where the layout search found none that fits."""
    from gpuplan.planner.verdict import fixes

    gpu = memory.gpu
    assert gpu is not None and memory.capacity_bytes is not None
    c = context(ctx)
    short = (memory.per_gpu_bytes - memory.capacity_bytes) / GIB
    if short <= 0 and memory.serving is not None and memory.kv_short_bytes > 0:  # the engine's KV budget binds
        what = (
            f"{memory.serving.limit} is {memory.kv_short_bytes / GIB:,.2f} GiB short of one sequence "
            f"({w.input_len + w.output_len:,} tokens) on {w.num_gpus} x {gpu.name}; the engine would not start."
        )
    else:
        what = (
            f"{short:,.2f} GiB short per GPU on {w.num_gpus} x {gpu.name} "
            f"({memory.per_gpu_bytes / GIB:,.2f} GiB needed at {memory.peak_phase}); it would not run."
        )
    if unsearched is not None:  # the search's layouts (tp, pp, cp, ZeRO, micro-batch, checkpointing) all miss
        what = (
            f"no layout of {model.name} fits on {w.num_gpus} x {gpu.name}; as written ({unsearched}) it is "
            f"{short:,.2f} GiB short per GPU ({memory.per_gpu_bytes / GIB:,.2f} GiB needed at {memory.peak_phase})."
        )
    found = fixes(model, w, gpu, c.catalog, c.prices(), limit=1)
    best = ""
    if found:
        f = found[0]
        sets = " ".join(f"--set {k}={v}" for k, v in f.changes.items())
        best = f" Best fix: {f.label} ({sets}), {f.per_gpu_bytes / GIB:,.2f} GiB per GPU on {f.num_gpus} x {f.gpu}."
    raise InvalidSettingError(
        f"The job does not fit: {what}{best} `gpuplan fit` lists more fixes; --force writes the file anyway."
    )
