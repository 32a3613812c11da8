"""Layout-search speed of llm-analysis (cli-lab/llm-analysis, PyPI `llm-analysis`), run once per layout.

The common case: Llama-2-70B pretraining on 64 nodes x 8 H100-SXM 80GB (512 GPUs), bf16, seq_len 4096,
global batch 1024 sequences. The grid is the one a layout search walks: tp in 1, 2, 4, 8; pp a divisor
of 512/tp up to 16 that divides the 80 layers; dp the rest; micro batch 1, 2, 4, 8; ZeRO 0-3; activation
recomputation none / selective / full; sequence parallelism on (sp = tp, llm-analysis's default).
That is 960 layouts; --max-layouts caps the run (a fixed-seed shuffle of the grid, so a capped run still
spans every tp/pp/ZeRO/recompute value). Each layout is one call of `llm_analysis.analysis.train`, the
function behind `python -m llm_analysis.analysis train ...`, with its logging off and no output_dir (no
files written). Layouts it rejects (an assertion, e.g. no whole number of gradient-accumulation steps)
are counted as failures.

llm-analysis is not a gpuplan dependency, so this script runs only in an environment that has it, e.g.
    python3 -m venv .venv-llm-analysis && .venv-llm-analysis/bin/pip install llm-analysis
    .venv-llm-analysis/bin/python bench/llm_analysis_compare.py [--max-layouts N] [--json]
It does not import gpuplan. Nothing is extrapolated: the figures are for the layouts evaluated.

What llm-analysis's numbers mean (v0.2.2): latency_per_iter = FLOPs per micro batch x accumulation
steps / (tp x pp x peak x flops_efficiency), with flops_efficiency 1.0 unless --flops-efficiency is given;
no pipeline bubble and no tensor-, pipeline-, data-parallel or ZeRO communication enter it. "Fits" means its
memory_left_per_gpu (after weights, gradients, optimizer states and activations) is >= 0. MFU is
6 x N x tokens / (step time x GPUs x peak bf16 FLOP/s) with N = llm-analysis's own parameter count.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import itertools
import json
import logging
import os
import random
import statistics
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from typing import Any

MODEL = "upstage_Llama-2-70b-instruct-v2"  # llm-analysis's bundled Llama-2-70B config (80 layers, GQA 8)
GPU = "h100-sxm-80gb"
DTYPE = "w16a16e16"  # bf16/fp16 weights, activations and embeddings
NUM_LAYERS = 80
NODES, GPUS_PER_NODE = 64, 8
SEQ_LEN = 4096
GLOBAL_BATCH = 1024  # sequences per optimizer step
TPS = (1, 2, 4, 8)
MAX_PP = 16
MICRO_BATCHES = (1, 2, 4, 8)
ZERO_STAGES = (0, 1, 2, 3)
RECOMPUTE = {0: "none", 1: "selective", 2: "full"}  # llm-analysis's ActivationRecomputation values
REL_TIE = 1e-9
QUIET_ENV = {"TRANSFORMERS_VERBOSITY": "error", "TRANSFORMERS_NO_ADVISORY_WARNINGS": "1"}


@dataclass(frozen=True)
class Layout:
    tp: int
    pp: int
    dp: int
    micro_batch: int
    zero: int
    recompute: int  # 0 none, 1 selective, 2 full

    def label(self) -> str:
        return (
            f"TP={self.tp} PP={self.pp} DP={self.dp} micro_batch={self.micro_batch} "
            f"ZeRO-{self.zero} recompute={RECOMPUTE[self.recompute]}"
        )


REFERENCE = Layout(tp=8, pp=4, dp=16, micro_batch=1, zero=1, recompute=2)


@dataclass
class Outcome:
    layout: Layout
    seconds: float  # wall time of the train() call alone
    summary: dict[str, Any] | None = None
    error: str | None = None


def layout_grid(gpus: int = NODES * GPUS_PER_NODE) -> list[Layout]:
    out: list[Layout] = []
    for tp in TPS:
        rest = gpus // tp
        pps = [pp for pp in range(1, MAX_PP + 1) if rest % pp == 0 and NUM_LAYERS % pp == 0]
        for pp, mb, zero, rc in itertools.product(pps, MICRO_BATCHES, ZERO_STAGES, RECOMPUTE):
            out.append(Layout(tp, pp, rest // pp, mb, zero, rc))
    return out


def _import_llm_analysis() -> Any:
    """Import llm_analysis.analysis quietly; None where it is not installed."""
    os.environ.update(QUIET_ENV)  # transformers' "None of PyTorch ..." notice on import
    try:
        from llm_analysis import analysis  # type: ignore[import-not-found,import-untyped,unused-ignore]
    except ImportError:
        return None
    return analysis


def run_layout(analysis: Any, layout: Layout, flops_efficiency: float | None) -> Outcome:
    t0 = time.perf_counter()
    try:
        summary = analysis.train(
            model_name=MODEL,
            gpu_name=GPU,
            dtype_name=DTYPE,
            log_level="CRITICAL",
            seq_len=SEQ_LEN,
            global_batch_size=GLOBAL_BATCH,
            batch_size_per_gpu=layout.micro_batch,
            total_num_gpus=NODES * GPUS_PER_NODE,
            tp_size=layout.tp,
            pp_size=layout.pp,
            dp_size=layout.dp,
            sp_size=layout.tp,
            activation_recomputation=layout.recompute,
            ds_zero=layout.zero,
            num_gpus_per_node=GPUS_PER_NODE,
            flops_efficiency=flops_efficiency,
            output_dir=None,
        )
    except Exception as exc:  # an invalid layout: llm-analysis asserts
        return Outcome(layout, time.perf_counter() - t0, error=f"{type(exc).__name__}: {exc}".strip())
    return Outcome(layout, time.perf_counter() - t0, summary=summary)


def derived(summary: dict[str, Any], peak_tflops: float) -> dict[str, Any]:
    step_s = float(summary["latency_per_iter"])
    gpus = int(summary["total_num_gpus"])
    tokens = int(summary["global_batch_size"]) * int(summary["seq_len"])
    n_params = float(summary["num_params_total"])
    return {
        "step_time_s": step_s,
        "tokens_per_s": tokens / step_s,
        "mfu": 6.0 * n_params * tokens / (step_s * gpus * peak_tflops * 1e12),
        "fits_memory": float(summary["memory_left_per_gpu"]) >= 0,
        "memory_left_per_gpu_GiB": float(summary["memory_left_per_gpu"]) / 2**30,
        "gradient_accumulation_steps": int(summary["gradient_accumulation_steps"]),
        "num_params_total": n_params,
    }


def time_cli(runs: int, flops_efficiency: float | None) -> list[float]:
    """Wall time of the CLI (`python -m llm_analysis.analysis train ...`), one process per layout."""
    ref = REFERENCE
    cmd = [
        sys.executable, "-m", "llm_analysis.analysis", "train",
        f"--model_name={MODEL}", f"--gpu_name={GPU}", f"--dtype_name={DTYPE}", "--log_level=CRITICAL",
        f"--seq_len={SEQ_LEN}", f"--global_batch_size={GLOBAL_BATCH}", f"--batch_size_per_gpu={ref.micro_batch}",
        f"--tp_size={ref.tp}", f"--pp_size={ref.pp}", f"--dp_size={ref.dp}", f"--sp_size={ref.tp}",
        f"--activation_recomputation={ref.recompute}", f"--ds_zero={ref.zero}",
    ]  # fmt: skip
    if flops_efficiency is not None:
        cmd.append(f"--flops_efficiency={flops_efficiency}")
    env = {**os.environ, **QUIET_ENV}
    walls = []
    for _ in range(runs):
        t0 = time.perf_counter()
        subprocess.run(cmd, check=True, capture_output=True, env=env)
        walls.append(time.perf_counter() - t0)
    return walls


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    ap.add_argument("--max-layouts", type=int, default=300, help="evaluate at most this many layouts (0: all 960)")
    ap.add_argument("--repeats", type=int, default=3, help="time the sweep this many times (median wall time)")
    ap.add_argument("--seed", type=int, default=0, help="seed of the shuffle that picks the capped subset")
    ap.add_argument(
        "--flops-efficiency", type=float, default=None, help="llm-analysis's flops_efficiency (default 1.0)"
    )
    ap.add_argument("--cli-runs", type=int, default=3, help="also time N CLI processes for the reference layout")
    ap.add_argument("--json", action="store_true", help="print one JSON document instead of text")
    args = ap.parse_args()

    t_import = time.perf_counter()
    analysis = _import_llm_analysis()
    t_import = time.perf_counter() - t_import
    if analysis is None:
        print(
            "llm_analysis is not importable in this Python; this comparison needs it. Install it in a "
            "scratch venv (python3 -m venv .venv-llm-analysis && .venv-llm-analysis/bin/pip install llm-analysis) "
            "and run this script with that venv's python.",
            file=sys.stderr,
        )
        return 2
    logging.getLogger("__name__").setLevel(logging.CRITICAL)  # llm-analysis's logger is literally "__name__"
    version = importlib.metadata.version("llm-analysis")
    peak = float(analysis.get_gpu_config_by_name(GPU).peak_fp16_TFLOPS)

    grid = layout_grid()
    random.Random(args.seed).shuffle(grid)
    layouts = grid if args.max_layouts <= 0 else grid[: args.max_layouts]

    warm = run_layout(analysis, REFERENCE, args.flops_efficiency)  # untimed warm-up (config lookups, caches)
    if warm.summary is None:
        print(f"llm-analysis rejected the reference layout: {warm.error}", file=sys.stderr)
        return 1

    sweeps: list[tuple[float, list[Outcome]]] = []
    for _ in range(max(1, args.repeats)):
        t0 = time.perf_counter()
        sweep = [run_layout(analysis, lay, args.flops_efficiency) for lay in layouts]
        sweeps.append((time.perf_counter() - t0, sweep))
    walls = [w for w, _ in sweeps]
    wall = statistics.median(walls)
    outcomes = sweeps[0][1]  # the results are the same every sweep; only the times differ

    ok = [(o, derived(o.summary, peak)) for o in outcomes if o.summary is not None]
    failed = [o for o in outcomes if o.error is not None]
    fitting = [(o, d) for o, d in ok if d["fits_memory"]]
    pool = fitting or ok
    best: dict[str, Any] | None = None
    if pool:
        o, d = min(pool, key=lambda od: (od[1]["step_time_s"], tuple(asdict(od[0].layout).values())))
        ties = sum(1 for _, d2 in pool if abs(d2["step_time_s"] - d["step_time_s"]) <= REL_TIE * d["step_time_s"])
        best = {"layout": o.layout.label(), "among": "fitting" if fitting else "all (none fits)", "ties": ties, **d}
    errors: dict[str, int] = {}
    for o in failed:
        key = (o.error or "").splitlines()[0][:120]
        errors[key] = errors.get(key, 0) + 1

    ref = run_layout(analysis, REFERENCE, args.flops_efficiency)
    assert ref.summary is not None
    ref_d = derived(ref.summary, peak)
    ref_d.update(
        {
            "latency_per_micro_batch_s": ref.summary["latency_per_micro_batch"],
            "max_batch_size_per_gpu": ref.summary["max_batch_size_per_gpu"],
            "flops_efficiency": ref.summary["flops_efficiency"],
        }
    )
    cli = time_cli(args.cli_runs, args.flops_efficiency) if args.cli_runs > 0 else []

    per_ms = [1e3 * o.seconds for _, sweep in sweeps for o in sweep]
    report: dict[str, Any] = {
        "llm_analysis_version": version,
        "python": sys.version.split()[0],
        "cpus": os.cpu_count(),
        "case": f"{MODEL} on {NODES}x{GPUS_PER_NODE} {GPU}, {DTYPE}, seq_len {SEQ_LEN}, global batch {GLOBAL_BATCH}",
        "grid_size": len(grid),
        "layouts_evaluated": len(outcomes),
        "layouts_ok": len(ok),
        "layouts_failed": len(failed),
        "layouts_fitting_memory": len(fitting),
        "failure_reasons": errors,
        "import_s": t_import,
        "sweeps": len(sweeps),
        "wall_s": wall,
        "wall_s_per_sweep": walls,
        "median_ms_per_layout": statistics.median(per_ms),
        "mean_ms_per_layout": statistics.fmean(per_ms),
        "median_ms_per_ok_layout": statistics.median(
            1e3 * o.seconds for _, sweep in sweeps for o in sweep if o.summary is not None
        )
        if ok
        else None,
        "layouts_per_s": len(outcomes) / wall,
        "best": best,
        "reference": {"layout": REFERENCE.label(), **ref_d},
        "cli_process_s": cli,
    }
    if args.json:
        print(json.dumps(report, indent=1))
        return 0
    print(f"llm-analysis {version} (Python {report['python']}, {report['cpus']} CPUs): {report['case']}")
    print(
        f"layouts evaluated: {len(outcomes)} of {len(grid)}  (ok {len(ok)}, failed {len(failed)}, "
        f"fit in memory {len(fitting)})"
    )
    for reason, n in errors.items():
        print(f"  failed x{n}: {reason}")
    print(
        f"wall time for the {len(outcomes)} layouts: {wall:.3f} s, median of {len(walls)} sweeps "
        f"({', '.join(f'{w:.3f}' for w in walls)}); import of llm_analysis, once: {t_import:.2f} s, not included"
    )
    print(
        f"median ms per layout: {report['median_ms_per_layout']:.3f}  (mean {report['mean_ms_per_layout']:.3f}, "
        f"over {len(per_ms)} calls)"
    )
    print(f"layouts per second: {report['layouts_per_s']:.0f}")
    if best:
        print(
            f"best by latency_per_iter ({best['among']}): {best['layout']}: {best['step_time_s']:.3f} s/step, "
            f"{best['tokens_per_s']:,.0f} tokens/s, MFU {best['mfu']:.1%}  ({best['ties']} layouts tie at this step time)"
        )
    print(
        f"reference {report['reference']['layout']}: {ref_d['step_time_s']:.3f} s/step "
        f"({ref_d['gradient_accumulation_steps']} x {1e3 * ref_d['latency_per_micro_batch_s']:.2f} ms micro batches), "
        f"{ref_d['tokens_per_s']:,.0f} tokens/s, MFU {ref_d['mfu']:.1%}, fits: {ref_d['fits_memory']} "
        f"({ref_d['memory_left_per_gpu_GiB']:.1f} GiB left), flops_efficiency {ref_d['flops_efficiency']}, "
        f"N = {ref_d['num_params_total'] / 1e9:.2f} B params"
    )
    if cli:
        print(f"CLI, one process per layout: median {statistics.median(cli):.2f} s over {len(cli)} runs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
