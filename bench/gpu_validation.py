"""The prepared script for issue 9's measured validation set: run it once on a lent GPU (an H200).
It benchmarks the card (gpuplan bench), measures a matrix of workloads (gpuplan measure), each
beside gpuplan's estimate, and writes one JSON report with the exact environment plus the same runs
as validation rows (planner/measured.py): commit the CSV as src/gpuplan/data/validation/measured-<gpu>.csv
and `gpuplan validate` reads it as its own category.

Run on the device machine (bench/device-run.sh does this after installing the carried wheels):
    python3 bench/gpu_validation.py --out "$OUT/measured-h200.json" --budget-s 420
Check the code path here (no GPU; tiny models, no estimates):
    .venv/bin/python bench/gpu_validation.py --device cpu --out /tmp/measured-cpu.json

The matrix, per Llama-style model (3.2 1B, 3.2 3B, 3.1 8B, built from their configs with random
weights): bf16 full fine-tuning (AMP, fused AdamW) with and without activation checkpointing, LoRA
with and without checkpointing, QLoRA (bitsandbytes NF4) with checkpointing, and inference with
transformers' generate (prefill and decode) at batch 1, 8 and 32 with 512- and 2048-token prompts;
then, for all three, inference through bitsandbytes as transformers loads it: NF4 at batch 1 and 8,
LLM.int8 at batch 1.
The report and the CSV are rewritten after every run, so a run cut short by its time limit still
leaves everything measured so far; runs that would start after --budget-s are recorded as skipped.
A workload that runs out of memory is recorded as such: a fit verdict for the estimate. The
closing lines are `gpuplan validate`'s errors on the CSV (the issue's targets: memory median
absolute error at most 5%, step time at most 15%).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import traceback
from pathlib import Path
from typing import Any

from gpuplan.interfaces import api, bench, measure
from gpuplan.planner import measured
from gpuplan.specs.workload import make_workload

TRAIN: list[dict[str, Any]] = [
    {"task": "finetune", "batch_size": 4, "seq_len": 2048, "activation_checkpointing": "none"},
    {"task": "finetune", "batch_size": 4, "seq_len": 2048, "activation_checkpointing": "full"},
    {"task": "lora", "batch_size": 4, "seq_len": 2048, "activation_checkpointing": "none"},
    {"task": "lora", "batch_size": 8, "seq_len": 2048, "activation_checkpointing": "full"},
    {"task": "qlora", "batch_size": 4, "seq_len": 2048, "activation_checkpointing": "full"},
]
INFER: list[dict[str, Any]] = [
    {"task": "inference", "batch_size": b, "input_len": i, "output_len": 64} for b in (1, 8, 32) for i in (512, 2048)
]
# transformers' bitsandbytes inference paths, after the rest (a cut run loses these first): load_in_4bit
# at one token (gemv_4bit) and at eight (dequantise + GEMM), load_in_8bit (LLM.int8) at one
BNB_INFER: list[dict[str, Any]] = [
    {"task": "inference", "batch_size": b, "input_len": 512, "output_len": 64, "weight_dtype": f}
    for b, f in ((1, "nf4"), (8, "nf4"), (1, "int8"))
]
MODELS = ("llama-3.2-1b", "llama-3.2-3b", "llama-3.1-8b")
MATRIX: list[tuple[str, dict[str, Any]]] = [
    *((m, k) for m in MODELS for k in TRAIN + INFER),
    *((m, k) for m in MODELS for k in BNB_INFER),
]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True, type=Path, help="the JSON report (the CSV goes beside it)")
    ap.add_argument("--steps", type=int, default=4, help="training steps per run, the first a warm-up")
    ap.add_argument("--infer-steps", type=int, default=3, help="prefill + generate repeats, the first a warm-up")
    ap.add_argument("--budget-s", type=float, default=420.0, help="start no run after this many seconds")
    ap.add_argument("--device", default=None, help="cpu: check the code path on tiny models")
    args = ap.parse_args()
    t_start = time.perf_counter()
    report: dict[str, Any] = {"started": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "runs": []}
    if args.device != "cpu":
        try:
            rec = bench.bench()
            report["bench"] = {k: v for k, v in rec.items() if k != "calibration"}
            report["calibration"] = rec["calibration"]
        except Exception as exc:  # the measured workloads are worth having without the benchmark
            report["bench_error"] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:300]}"
        _save(report, args.out)
        print(json.dumps({"bench": report.get("bench", report.get("bench_error"))}, default=str), flush=True)
    for model, keys in MATRIX:
        w = make_workload({"model": model, "precision": "bf16", **keys})
        run: dict[str, Any]
        if time.perf_counter() - t_start > args.budget_s:
            run = {"status": "skipped", "error": f"past the {args.budget_s:g} s budget"}
        else:
            t0 = time.perf_counter()
            steps = args.steps if w.is_training else args.infer_steps
            try:
                run = measure.measure(w, steps, args.device)
                run["status"] = "ok"
            except Exception as exc:  # an OOM or a failed kernel is a result to record, not a crash
                run = {"status": type(exc).__name__, "error": str(exc).splitlines()[0][:300],
                       "trace": traceback.format_exc(limit=3)}  # fmt: skip
                run["gpu"] = _gpu_name()
            run["wall_s"] = time.perf_counter() - t0
        run.setdefault("workload", w.model_dump(exclude_unset=True))
        report["runs"].append(run)
        _save(report, args.out)
        print(json.dumps({k: run.get(k) for k in ("workload", "status", "wall_s", "step_time_s", "ttft_s",
                                                   "tpot_s", "max_memory_allocated_bytes", "error")}),
              flush=True)  # fmt: skip
        _free()
    report["elapsed_s"] = time.perf_counter() - t_start
    _save(report, args.out)
    csv_path = args.out.with_suffix(".csv")
    if measured.rows(report):
        summary = api.validate(csv_path).summary
        print(json.dumps(summary, indent=1), file=sys.stderr)


def _save(report: dict[str, Any], out: Path) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=1, default=str), encoding="utf-8")
    out.with_suffix(".csv").write_text(measured.csv_text(report), encoding="utf-8")


def _gpu_name() -> str | None:
    try:
        import torch
    except ImportError:
        return None
    return measure.local_gpu(torch)[0] if torch.cuda.is_available() else None


def _free() -> None:
    try:
        import gc

        import torch

        gc.collect()
        if torch.cuda.is_available():
            torch.cuda.empty_cache()
    except ImportError:
        pass


if __name__ == "__main__":
    main()
