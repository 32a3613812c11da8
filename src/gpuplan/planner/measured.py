"""Our own measurements as a validation file: the report `bench/gpu_validation.py` writes on a lent
GPU (runs of `gpuplan measure`, each with its workload and the environment) becomes rows in the
columns of `published.csv`, category `measured-<gpu>` (e.g. measured-h200). `gpuplan validate`
reads every bundled `measured-*.csv` as its own category, predicting each row through the same
reading as published rows: the workload keys travel literally as `key=value` in extra_config.

Per run: peak memory as torch.cuda.max_memory_allocated and max_memory_reserved (GiB); the median
training step (ms: forward, backward and optimizer over all micro-batches); inference time to first token (the whole
batch's prefill) and time per output token (ms). A run that ran out of memory is a fit verdict
(value 0: it does not fit on the card).
"""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Mapping
from typing import Any, Final

from gpuplan.errors import InvalidSettingError

PREFIX: Final = "measured-"
GIB: Final = float(2**30)
# workload keys that are columns of their own (or not workload keys of a run)
_COLUMN_KEYS: Final = ("model", "gpu", "num_gpus", "task", "precision", "seq_len", "batch_size", "input_len")


def is_measured(category: str) -> bool:
    return category.startswith(PREFIX)


def category_for(gpu: str) -> str:
    """`measured-h200` for "H200 SXM", `measured-rtx-4090` for "RTX 4090": the card's name without
    its form factor or memory size."""
    words = [w for w in re.split(r"[\s_]+", gpu.lower()) if w]
    kept = [
        w
        for w in words
        if w not in ("sxm", "sxm4", "sxm5", "pcie", "nvl", "nvidia", "geforce", "tesla")
        and not re.fullmatch(r"\d+gb", w)
    ]
    slug = re.sub(r"[^a-z0-9-]+", "-", "-".join(kept or words)).strip("-")
    return PREFIX + slug


def _extra(workload: Mapping[str, Any]) -> str:
    """The workload's own keys as `key=value` pairs (validation.py reads them literally; '+' joins a list)."""
    parts = []
    for k, v in workload.items():
        if k in _COLUMN_KEYS or v is None:
            continue
        if isinstance(v, list | tuple):
            v = "+".join(str(x) for x in v)
        elif isinstance(v, bool):
            v = "true" if v else "false"
        parts.append(f"{k}={v}")
    return "; ".join(parts)


def rows(report: Mapping[str, Any], category: str | None = None) -> list[dict[str, str]]:
    """The validation rows of a gpu_validation report (see the module's docstring)."""
    runs = report.get("runs")
    if not isinstance(runs, list):
        raise InvalidSettingError("not a gpu_validation report: it has no 'runs' list")
    bench = report.get("bench") or {}
    out: list[dict[str, str]] = []
    for i, run in enumerate(runs, 1):
        w = run.get("workload") or {}
        gpu = run.get("gpu") or bench.get("gpu")
        if not gpu or not w.get("model"):
            continue  # a CPU check of the code path, or a run that failed before it knew its GPU
        cat = category or category_for(str(gpu))
        env = run.get("environment") or report.get("environment") or {}
        training = w.get("task") != "inference"
        base = {
            "category": cat,
            "source": "gpuplan measure on a lent GPU (bench/gpu_validation.py): random weights, "
            f"{run.get('steps', '?')} steps, the first a warm-up",
            "source_ref": "; ".join(f"{k} {v}" for k, v in env.items() if v is not None),
            "model": str(w["model"]),
            "params_b": "",
            "gpu": str(gpu),
            "num_gpus": "1",
            "precision": str(w.get("precision", "bf16")),
            "task": str(w.get("task", "finetune")),
            "seq_len": str(w.get("seq_len", 2048) if training else w.get("input_len", 128)),
            "batch": str(w.get("batch_size", 1)),
            "extra_config": _extra(w),
            "notes": "",
        }
        figures: list[tuple[str, float, str, str]] = []
        if run.get("status") == "OutOfMemoryError":
            figures.append(("fits", 0.0, "boolean", "torch.cuda.OutOfMemoryError"))
        elif run.get("status", "ok") == "ok":
            for key, metric, note in (
                ("max_memory_allocated_bytes", "peak_memory_allocated", "torch.cuda.max_memory_allocated"),
                ("max_memory_reserved_bytes", "peak_memory_reserved", "torch.cuda.max_memory_reserved"),
            ):
                if run.get(key):
                    figures.append((metric, run[key] / GIB, "GiB", note))
            if training and run.get("step_time_s"):
                figures.append(("step_time_ms", run["step_time_s"] * 1e3, "ms", "median optimizer step"))
            if not training and run.get("ttft_s"):
                figures.append(("time_to_first_token_ms", run["ttft_s"] * 1e3, "ms", "prefill of the whole batch"))
            if not training and run.get("tpot_s"):
                figures.append(("time_per_output_token_ms", run["tpot_s"] * 1e3, "ms", "generate: decode steps"))
        for metric, value, unit, note in figures:
            out.append({"id": f"{cat.upper()}-{i:03d}-{metric}", **base, "metric": metric, "value": f"{value:.6g}",
                        "unit": unit, "notes": note})  # fmt: skip
    return out


def csv_text(report: Mapping[str, Any], category: str | None = None) -> str:
    from gpuplan.planner.validation import COLUMNS

    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=COLUMNS, lineterminator="\n")
    writer.writeheader()
    for r in rows(report, category):
        writer.writerow({k: r.get(k, "") for k in COLUMNS})
    return buf.getvalue()
