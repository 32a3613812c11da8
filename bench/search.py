"""Speed of the parallel-layout search (issue 5: at least 100,000 layouts in under 2 s on the
project's 2-core machine).

Run: .venv/bin/python bench/search.py [--runs N]. Prints one JSON document: per case the layouts
evaluated (step time and memory computed), the wall time of the whole search (enumeration,
operator rooflines per micro-batch shape, the vectorised composition, the memory screen and the
full estimates that confirm the best), and layouts per second; medians over the runs.
Not a test: timings depend on the machine; the figures go into the README and closing notes.
The common case with llm-analysis (bench/llm_analysis_compare.py) is the first one.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

CASES = (
    # model, cluster, global batch (sequences), seq_len
    ("llama-2-70b", "64x8:H100", 1024, 4096),  # the llm-analysis comparison case
    ("mixtral-8x7b", "32x8:H100", 1024, 4096),
    ("mixtral-8x7b", "64x8:H100", 2048, 4096),
    ("qwen3-30b-a3b", "32x8:H200", 2048, 4096),
    ("llama-3.1-8b", "1x8:A100", 64, 8192),
)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    from gpuplan.interfaces import api
    from gpuplan.planner.layouts import search_layouts
    from gpuplan.specs.cluster import parse_cluster
    from gpuplan.specs.models import load_model
    from gpuplan.specs.workload import make_workload

    cat = api.catalog()
    out = []
    for name, spec, gb, seq in CASES:
        model = load_model(name)
        cl = parse_cluster(spec, cat)
        w = make_workload(
            {"model": name, "task": "pretrain", "seq_len": seq, "num_gpus": cl.num_gpus, "global_batch": gb}
        )
        search_layouts(model, w, cl, top=5)  # warm the model's caches
        times, res = [], None
        for _ in range(args.runs):
            t0 = time.perf_counter()
            res = search_layouts(model, w, cl, top=5)
            times.append(time.perf_counter() - t0)
        assert res is not None
        med = statistics.median(times)
        best = res.best[0] if res.best else None
        out.append(
            {
                "model": name,
                "cluster": spec,
                "global_batch": gb,
                "seq_len": seq,
                "evaluated": res.evaluated,
                "fitting": res.fitting,
                "micro_batch_shapes": res.shapes,
                "seconds_median": round(med, 3),
                "seconds_all": [round(t, 3) for t in times],
                "layouts_per_s": round(res.evaluated / med),
                "us_per_layout": round(med / max(res.evaluated, 1) * 1e6, 2),
                "best": best.layout.label if best else None,
                "best_step_s": round(best.time.step_time_s, 3) if best else None,
                "best_mfu": round(best.time.mfu, 3) if best else None,
            }
        )
    print(json.dumps({"cases": out}, indent=2))


if __name__ == "__main__":
    main()
