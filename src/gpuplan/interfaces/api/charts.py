"""The data behind the charts: a workload's roofline and each GPU's speed relative to H100."""

from __future__ import annotations

from typing import Any, Final

from gpuplan.errors import InvalidSettingError
from gpuplan.estimators.memory import estimate_memory
from gpuplan.estimators.perf import (
    compute_roof,
    estimate_inference_time,
    estimate_training_time,
)
from gpuplan.interfaces.api.catalog import catalog
from gpuplan.interfaces.api.records import op_times
from gpuplan.interfaces.api.workloads import engine_for_model, gpu_for, resolve_cluster
from gpuplan.specs.context import Context
from gpuplan.specs.model import ModelSpec
from gpuplan.specs.models import load_model
from gpuplan.specs.workload import Workload, make_workload

# --- the roofline ------------------------------------------------------------------------------


def roofline(w: Workload, ctx: Context | None = None, model: ModelSpec | None = None) -> dict[str, Any]:
    """The workload's operators on the roofline of its GPU (Williams, Waterman & Patterson,
    CACM 2009): each operator's arithmetic intensity (FLOPs per byte of memory traffic) against
    the FLOP/s it achieves in gpuplan's estimate, under the roofs min(peak, intensity x bandwidth).
    Operators without both FLOPs and bytes (communication, launch gaps) are listed apart."""
    if w.is_graphics:
        raise InvalidSettingError(f"A roofline needs a training or inference workload. Got task {w.task!r}.")
    cat = catalog(ctx)
    model = model or load_model(w.model)
    w = engine_for_model(w, model)
    w, cl = resolve_cluster(w, cat)
    gpu = gpu_for(w, cat)
    if gpu is None:
        raise InvalidSettingError("A roofline needs a GPU: set 'gpu' (e.g. gpu: H100).")
    if w.is_training:
        groups = [("step", estimate_training_time(model, w, gpu, cl).ops)]
    else:
        it = estimate_inference_time(model, w, gpu)
        groups = [("prefill", it.prefill_ops), ("decode", it.decode_ops)]
    runs_as, peak_flop_per_s = compute_roof(model, w, gpu)
    bandwidth = gpu.memory_bandwidth_bytes_per_s
    points: list[dict[str, Any]] = []
    off: list[dict[str, Any]] = []
    for stage, ops in groups:
        for o in (op.to_dict() for op in op_times(ops)):
            rec = {"stage": stage, **o}
            if o["flops"] > 0 and o["bytes"] > 0 and o["time_s"] > 0:
                intensity = o["flops"] / o["bytes"]
                rec["intensity_flop_per_byte"] = intensity
                rec["achieved_flop_per_s"] = o["flops"] / o["time_s"]
                rec["roof_flop_per_s"] = min(peak_flop_per_s, intensity * bandwidth)
                points.append(rec)
            else:
                off.append(rec)
    return {
        "gpu": gpu.name,
        "model": model.name,
        "task": w.task,
        "precision": w.precision,
        "peak_flop_per_s": peak_flop_per_s,
        "peak_runs_as": runs_as,
        "memory_bandwidth_bytes_per_s": bandwidth,
        "ridge_flop_per_byte": peak_flop_per_s / bandwidth,
        "points": points,
        "not_on_roofline": off,
    }


# --- the relative-performance chart -------------------------------------------------------------

# The reference workloads of `gpuplan chart relative` (speed only: memory fit is reported, not
# required, so every card gets a figure). 16-bit runs as bf16 where the card has it, else fp16.
CHART_MODEL: Final = "llama-3.1-8b"
CHART_TRAIN: Final = {"task": "pretrain", "seq_len": 2048, "batch_size": 4, "compile": True}
CHART_INFER: Final = {"task": "inference", "input_len": 1024, "output_len": 128, "batch_size": 64}
CHART_REFERENCE_GPU: Final = "H100 SXM5 80GB"


def chart_relative(ctx: Context | None = None) -> dict[str, Any]:
    """Each GPU's speed relative to H100 SXM = 100% on three reference workloads."""

    cat = catalog(ctx)
    model = load_model(CHART_MODEL)
    rows: list[dict[str, Any]] = []
    for g in cat:
        p16 = "bf16" if g.supports("bf16") else "fp16"
        train = make_workload({"model": CHART_MODEL, "gpu": g.name, "precision": p16, **CHART_TRAIN})
        inf16 = make_workload(
            {"model": CHART_MODEL, "gpu": g.name, "precision": p16, "weight_dtype": p16, "kv_dtype": p16, **CHART_INFER}
        )
        inf8 = inf16.with_(weight_dtype="fp8")
        rows.append(
            {
                "gpu": g.name,
                "architecture": g.architecture,
                "train_tokens_per_s": estimate_training_time(model, train, g).tokens_per_s,
                "infer16_tokens_per_s": estimate_inference_time(model, inf16, g).output_tokens_per_s,
                "infer8_tokens_per_s": estimate_inference_time(model, inf8, g).output_tokens_per_s,
                "fp8_native": g.supports("fp8"),
                "fits_train": bool(estimate_memory(model, train.with_(activation_checkpointing="full"), g).fits),
                "fits_infer16": bool(estimate_memory(model, inf16, g).fits),
            }
        )
    ref = next(r for r in rows if r["gpu"] == CHART_REFERENCE_GPU)
    for r in rows:
        r["train_16bit_pct"] = 100 * r["train_tokens_per_s"] / ref["train_tokens_per_s"]
        r["infer_16bit_pct"] = 100 * r["infer16_tokens_per_s"] / ref["infer16_tokens_per_s"]
        r["infer_8bit_pct"] = 100 * r["infer8_tokens_per_s"] / ref["infer16_tokens_per_s"]
        r["speedup_8bit_vs_16bit"] = r["infer8_tokens_per_s"] / r["infer16_tokens_per_s"]
    rows.sort(key=lambda r: -float(r["train_16bit_pct"]))
    return {
        "reference_gpu": CHART_REFERENCE_GPU,
        "workloads": {
            "model": CHART_MODEL,
            "training_16bit": {**CHART_TRAIN, "precision": "bf16 (fp16 where no bf16)"},
            "inference_16bit": {**CHART_INFER, "weights": "bf16", "kv": "bf16"},
            "inference_8bit": {
                **CHART_INFER,
                "weights": "fp8 (W8A8 on FP8 tensor cores; weight-only W8A16 where the card has none)",
                "kv": "bf16 (as the 16-bit run)",
            },
            "note": "speed of one GPU; memory fit is reported (fits_*), not required. 8-bit is relative to "
            "the H100's 16-bit figure, so the H100's own 8-bit gain shows.",
        },
        "rows": rows,
    }
