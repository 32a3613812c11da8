"""Speed benchmark for gpuplan's performance targets (issue 4): one estimate in-process, and
`gpuplan plan` over the whole catalog end to end (Python start-up included).

Run: .venv/bin/python bench/speed.py [--runs N]. Prints one JSON document with the medians.
Not a test: timings depend on the machine; the figures go into the README and closing notes.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _per_call(fn, n: int) -> float:  # type: ignore[no-untyped-def]
    fn()  # warm caches (catalog, presets)
    samples = []
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        samples.append((time.perf_counter() - t0) / n)
    return statistics.median(samples)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=7)
    args = ap.parse_args()
    from gpuplan.estimators.memory import estimate_memory
    from gpuplan.estimators.perf import estimate_inference_time, estimate_training_time
    from gpuplan.interfaces import api
    from gpuplan.specs.models import load_model

    cat = api.catalog()
    train_w = api.build_workload(str(ROOT / "examples" / "lora-4090.yaml"))
    infer_w = api.build_workload(str(ROOT / "examples" / "serve-70b.yaml"))
    m8, m70 = load_model(train_w.model), load_model(infer_w.model)
    g4090, h100 = cat.get("RTX 4090"), cat.get("H100")
    out = {
        "training_estimate_ms": 1e3 * _per_call(lambda: estimate_training_time(m8, train_w, g4090), 200),
        "training_memory_plus_time_ms": 1e3
        * _per_call(lambda: (estimate_memory(m8, train_w, g4090), estimate_training_time(m8, train_w, g4090)), 200),
        "inference_estimate_ms (static batch)": 1e3
        * _per_call(lambda: estimate_inference_time(m70, infer_w, h100), 200),
        "inference_estimate_ms (with best-batch search)": 1e3
        * _per_call(lambda: estimate_inference_time(m70, infer_w, h100, max_batch=512), 50),
    }
    exe = Path(sys.executable).parent / "gpuplan"
    # as installed: bytecode cached (the warm-up run writes it even where the shell sets
    # PYTHONDONTWRITEBYTECODE)
    cached = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    for label, env in (("bytecode cached", cached),):
        for example, fmt in (("pretrain-1b.yaml", "--json"), ("chat-7b.yaml", None)):
            cmd = [str(exe), "plan", str(ROOT / "examples" / example), *([fmt] if fmt else [])]
            subprocess.run(cmd, check=True, capture_output=True, env=env)  # warm caches
            walls = []
            for _ in range(args.runs):
                t0 = time.perf_counter()
                subprocess.run(cmd, check=True, capture_output=True, env=env)
                walls.append(time.perf_counter() - t0)
            what = "json" if fmt else "table"
            out[f"cli plan {example} ({what}, {label}) s, median of {args.runs}"] = statistics.median(walls)
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
