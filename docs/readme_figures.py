"""The figures that README.md and docs/*.md quote in their prose and tables, each computed from
what a gpuplan command prints (its --json document) or from the bundled data a command reads.

docs/readme_blocks.py puts them between `<!-- gpuplan:begin GROUP.KEY -->` markers; each group
below is a function that returns its keys' texts. Add a key here, then mark where it goes.
"""

from __future__ import annotations

import csv
import importlib.util
import re
import statistics
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from readme_blocks import Runner

ROOT = Path(__file__).resolve().parents[1]
VALIDATION = ROOT / "src" / "gpuplan" / "data" / "validation"

Figures = dict[str, str]


def _pct(x: float, signed: bool = False) -> str:
    return f"{100 * x:+.1f}%" if signed else f"{100 * x:.1f}%"


def _hours(seconds: float) -> str:
    return f"{seconds / 3600:.1f} h"


def _csv_rows(name: str) -> list[dict[str, str]]:
    with (VALIDATION / name).open(encoding="utf-8", newline="") as f:
        return list(csv.DictReader(f))


def catalog(run: Runner) -> Figures:
    return {"gpus": str(len(run.json("gpus")))}


# --- validation ---------------------------------------------------------------------------------


def _row_filters() -> list[tuple[str, Callable[[dict[str, Any]], bool], bool]]:
    """The README's validation table: (label, which rows, show the mean too)."""

    def model(r: dict[str, Any]) -> str:
        return str(r["workload"].get("model", "")).lower()

    def gpus(r: dict[str, Any]) -> int:
        return int(r["workload"].get("num_gpus", 1))

    def train(r: dict[str, Any]) -> bool:
        return bool(r["category"] == "train_throughput")

    def trt10(r: dict[str, Any]) -> bool:
        return str(r["id"]).startswith("TRT10-")

    def cnn_or_bert(r: dict[str, Any]) -> bool:
        return "bert" in model(r) or "resnet" in model(r)

    return [
        ("memory", lambda r: r["category"] == "memory", True),
        ("training throughput, all", train, True),
        (
            "— decoder LLMs (llm-foundry, NeMo, Megatron, BLOOM, torchtune, torchtitan)",
            lambda r: train(r) and not cnn_or_bert(r),
            False,
        ),
        ("— multi-GPU training rows (2 to 3072 GPUs)", lambda r: train(r) and gpus(r) > 1, True),
        ("— multi-node (more than 8 GPUs)", lambda r: train(r) and gpus(r) > 8, True),
        ("— BERT-large (DLE, Lambda)", lambda r: train(r) and "bert" in model(r), False),
        ("— ResNet-50 (DLE, Lambda)", lambda r: train(r) and "resnet" in model(r), False),
        ("inference (TTFT, decode, throughput)", lambda r: r["category"] == "inference", True),
        (
            "— batch-1 decode (gpt-fast, MLC, llama.cpp, LitGPT)",
            lambda r: r["metric"] == "decode_tokens_per_s" and r["id"].split("-")[0] in ("GF", "MLC", "LCPP", "LITGPT"),
            True,
        ),
        ("— TensorRT-LLM v1.0 max-throughput serving (H100, H200, B200, GB200, RTX PRO 6000)", trt10, True),
        (
            "— of which H100/H200 FP8 (Llama 3.1 8B/70B/405B)",
            lambda r: trt10(r) and r["workload"]["gpu"][:4] in ("H100", "H200") and model(r).startswith("llama-3.1"),
            True,
        ),
        (
            "— of which GB200 Llama 3.3 70B / 3.1 405B (dense, NVFP4)",
            lambda r: trt10(r) and r["workload"]["gpu"] == "GB200" and model(r).startswith("llama-3"),
            True,
        ),
        (
            "— of which Llama 4 Scout/Maverick (MoE, read as tensor-parallel)",
            lambda r: trt10(r) and model(r).startswith("llama-4"),
            True,
        ),
    ]


def validation(run: Runner) -> Figures:
    # the headline table is the bundled vendor/paper files; the everyday stacks have their own (stacks)
    rows = [r for r in run.json("validate")["rows"] if r["unit"] != "fits" and not r.get("stack")]
    table = ["| category | rows | median abs. error | mean abs. error |", "|---|---|---|---|"]
    for label, keep, mean in _row_filters():
        errors = [abs(r["error"]) for r in rows if keep(r)]
        shown_mean = _pct(statistics.fmean(errors)) if mean else ""
        table.append(
            f"| {label} | {len(errors)} | {_pct(statistics.median(errors))} | {shown_mean} |".replace("|  |", "| |")
        )
    memory = [abs(r["error"]) for r in rows if r["category"] == "memory"]
    bundled = {name: _csv_rows(name) for name in ("published.csv", "memory-more.csv", "perf-more.csv", "multinode.csv")}
    return {
        "table": "\n".join(table),
        "memory_rows": str(len(memory)),
        "memory_median": _pct(statistics.median(memory)),
        "speed_rows": str(sum(1 for r in rows if r["measured_as"] == "speed")),
        "perf_more_rows": str(len(bundled["perf-more.csv"])),
        "multinode_rows": str(len(bundled["multinode.csv"])),
        "skip_rows": str(sum(1 for rows_ in bundled.values() for r in rows_ if r.get("skip_reason"))),
    }


def _figure(r: dict[str, Any]) -> str:
    return (
        "fit verdict"
        if r["unit"] == "fits"
        else {"train_throughput": "training speed"}.get(r["category"], r["category"])
    )


# issue 27's targets over the held-out rows: median |error| per stack and figure, and no stack with
# more than 10 rows worse than 20%
STACK_TARGETS: Final = {"training speed": 0.12, "inference": 0.15, "memory": 0.08}


def _stack_targets(rows: list[dict[str, Any]]) -> str:
    """Each stack and figure with held-out rows against its target: median |error|, rows > 20%."""
    out = [
        "| stack | figure | held-out rows | median abs. error | target | rows > 20% | met |",
        "|---|---|---|---|---|---|---|",
    ]
    held = [r for r in rows if r["split"] == "heldout" and _figure(r) in STACK_TARGETS]
    for stack, fig in sorted({(r["stack"], _figure(r)) for r in held}):
        sel = [abs(r["error"]) for r in held if r["stack"] == stack and _figure(r) == fig]
        med, worse, goal = statistics.median(sel), sum(1 for e in sel if e > 0.20), STACK_TARGETS[fig]
        ok = "yes" if med <= goal and worse <= 10 else "no"
        out.append(f"| {stack} | {fig} | {len(sel)} | {_pct(med)} | ≤ {_pct(goal)} | {worse} | {ok} |")
    return "\n".join(out)


def stacks(run: Runner) -> Figures:
    """stacks.csv: rows per source (predicted, skipped) and the median error per stack, figure and
    split (fit rows / held-out rows), from `gpuplan validate --json`."""
    v = run.json("validate")
    rows = [r for r in v["rows"] if r.get("stack")]
    skipped = [s for s in v["skipped"] if s.get("stack")]
    sources = sorted({r["source"] for r in rows} | {s["source"] for s in skipped})
    src = ["| source | stack | rows | predicted | skipped |", "|---|---|---|---|---|"]
    for name in sorted(sources, key=lambda n: -sum(1 for r in [*rows, *skipped] if r["source"] == n)):
        n = sum(1 for r in rows if r["source"] == name)
        k = sum(1 for r in skipped if r["source"] == name)
        stack = ", ".join(sorted({r["stack"] for r in [*rows, *skipped] if r["source"] == name}))
        src.append(f"| {name} | {stack} | {n + k} | {n} | {k} |")
    table = ["| stack | figure | fit rows | held-out rows | skipped |", "|---|---|---|---|---|"]
    for stack in sorted({r["stack"] for r in [*rows, *skipped]}):
        k = sum(1 for r in skipped if r["stack"] == stack)
        figures = sorted({_figure(r) for r in rows if r["stack"] == stack})
        if not figures:
            table.append(f"| {stack} | — | — | — | {k} |")
        for i, fig in enumerate(figures):
            cells = []
            for split in ("fit", "heldout"):
                sel = [r for r in rows if r["stack"] == stack and r["split"] == split]
                sel = [r for r in sel if _figure(r) == fig]
                if not sel:
                    cells.append("—")
                elif fig == "fit verdict":
                    cells.append(f"{sum(1 for r in sel if r['error'])} wrong of {len(sel)}")
                else:
                    cells.append(f"{_pct(statistics.median(abs(r['error']) for r in sel))} ({len(sel)})")
            table.append(
                f"| {stack} | {fig} | {cells[0]} | {cells[1]} | {k if i == 0 else ''} |".replace("|  |", "| |")
            )
    return {
        "sources": "\n".join(src),
        "table": "\n".join(table),
        "targets": _stack_targets(rows),
        "rows": str(len(rows) + len(skipped)),
        "expressed": str(len(rows)),
        "source_count": str(len(sources)),
    }


def _first(pattern: str, text: str) -> str:
    """The first group of `pattern` in a command's text; fails loudly when the text changed."""
    m = re.search(pattern, text)
    assert m is not None, (pattern, text)
    return m.group(1)


def serving(run: Runner) -> Figures:
    """The serving prose: $/Mtok batches at max_tpot_ms=50, TGI's KV budget, a llama.cpp CPU-only
    decode and the request-rate concurrency (Little's law) the README quotes."""
    plan = run.json("plan", "examples/chat-7b.yaml", "--gpus", "A40,A10", "--set", "max_tpot_ms=50")
    one = {o["gpu"]: o["serving"] for o in plan["options"] if o["fits"] and o["num_gpus"] == 1}
    nxt = re.search(r"batch (\d+) takes ([\d.]+) ms", one["A40"]["limited_by"])
    assert nxt is not None, one["A40"]["limited_by"]
    tgi = run.json("estimate", "examples/tgi-8b.yaml")["memory"]["serving"]
    cpu = run.json(
        "estimate", "llama-3.1-8b", "--engine", "llama.cpp", "--weight-dtype", "q4_k_m", "--gpu", "4090",
        "--set", "gpu_layers=0",
    )["time"]  # fmt: skip

    def in_flight(rate: str) -> str:
        notes = run.json(
            "estimate", "llama-3.1-8b", "--gpu", "H100", "--input-len", "1000", "--output-len", "250",
            "--set", f"request_rate={rate}",
        )["time"]["notes"]  # fmt: skip
        return str(next(n for n in notes if n.startswith("request_rate")))

    cap = _first(r"about ([\d.]+) requests/s", in_flight("100"))
    return {
        "a40_batch": str(one["A40"]["batch"]),
        "a40_next": f"the {nxt.group(1)}th would take {nxt.group(2)} ms",
        "a10_batch": str(one["A10"]["batch"]),
        "tgi_kv": f"KV budget {tgi['kv_budget_bytes'] / 2**30:.2f} GiB = {tgi['max_tokens']:,} tokens",
        "cpu_only": f"{cpu['tpot_s'] * 1e3:.0f} ms",
        "rate_2": _first(r"([\d.]+) requests in flight", in_flight("2")),
        "rate_8": _first(r"([\d.]+) requests in flight", in_flight("8")),
        "rate_cap": f"{float(cap):.0f}",
    }


def _signed(x: float) -> str:
    return f"{100 * x:+.0f}".replace("-", "−")


def misses(run: Runner) -> Figures:
    """The signed median errors the README's account of the validation misses quotes."""
    rows = run.json("validate")["rows"]
    by_id = {r["id"]: r for r in rows}

    def median(model: str, gpu: str, num_gpus: int | None = None) -> float:
        errors = [
            r["error"]
            for r in rows
            if r["id"].startswith("TRT10-")
            and r["workload"]["model"] == model
            and r["workload"]["gpu"].startswith(gpu)
            and num_gpus in (None, r["workload"]["num_gpus"])
        ]
        return float(statistics.median(errors))

    def series(model: str, cases: list[tuple[str, int]]) -> list[str]:
        return [_signed(median(model, gpu, n)) for gpu, n in cases]

    big = [("B200", 8), ("H200", 8), ("H100", 8)]
    pro = "RTX PRO 6000 Server"
    mav = {
        r["workload"]["gpu"][:4]: r
        for r in rows
        if r["id"].startswith("TRT10-")
        and r["workload"]["model"] == "llama-4-maverick"
        and r["workload"].get("input_len") == 128
        and r["workload"].get("output_len") == 2048
    }
    pipeline = series("llama-3.1-70b", [(pro, 2), (pro, 4), (pro, 8)])
    gb200 = [
        abs(r["error"])
        for r in rows
        if r["id"].startswith("TRT10-")
        and r["workload"]["gpu"] == "GB200"
        and r["workload"]["model"].startswith("llama-3")
    ]
    return {
        "qwen30b_pro_tp": "/".join(series("qwen3-30b-a3b", [(pro, 2), (pro, 4), (pro, 8)])) + "%",
        "qwen235b_tp": "/".join(series("qwen3-235b-a22b", big)) + "%",
        "maverick_tp": "/".join(series("llama-4-maverick", big)) + "%",
        "scout_tp": "/".join(series("llama-4-scout", [("B200", 1), ("H200", 4), ("H100", 4)])) + "%",
        "maverick_published": f"{mav['H100']['published']:,.0f} against {mav['H200']['published']:,.0f}",
        "maverick_published_ratio": f"{mav['H200']['published'] / mav['H100']['published']:.1f}×",
        "maverick_predicted_ratio": f"{mav['H200']['predicted'] / mav['H100']['predicted']:.1f}×",
        "gb200_dense": _pct(statistics.median(gb200)),
        "pro_70b_one": f"{-100 * median('llama-3.1-70b', pro, 1):.0f}%",
        "pipeline_70b": f"{pipeline[0]}%, {pipeline[1]}% and {pipeline[2]}%",
        "pipeline_405b": _signed(median("llama-3.1-405b", pro, 8)) + "%",
        "falcon_a100": f"{by_id['LITGPT-002']['predicted']:.1f}",
        "mlc_70b_eager": f"{100 * by_id['MLC-012']['error']:+.1f}%",
    }


# --- lab mode -------------------------------------------------------------------------------------


def lab(run: Runner) -> Figures:
    table = [
        "| policy | its metric | gpuplan | equal split | first come, first served |",
        "|---|---|---|---|---|",
    ]
    for policy, metric, label in (
        ("fair", "average_jct_s", "average job completion time"),
        ("makespan", "makespan_s", "time until all are done"),
    ):
        d = run.json("lab", "allocate", "examples/lab.yaml", "--policy", policy)
        ours = d["equal_split"][metric] / d["gain_vs_equal_split"]
        table.append(
            f"| {policy} | {label} | {_hours(ours)} "
            f"| {_hours(d['equal_split'][metric])} ({d['gain_vs_equal_split']:.2f}x longer) "
            f"| {_hours(d['fcfs'][metric])} ({d['gain_vs_fcfs']:.2f}x) |"
        )
    weights = run.json("lab", "slurm-config", "examples/lab.yaml")["speed_weights"]
    return {"table": "\n".join(table), "billing": " : ".join(f"{w:.3g}" for w in weights.values())}


# --- single commands quoted in prose ------------------------------------------------------------


def chart(run: Runner) -> Figures:
    rows = {r["gpu"]: r for r in run.json("chart", "relative")["rows"]}
    return {
        "h100_fp8": f"{rows['H100 SXM5 80GB']['speedup_8bit_vs_16bit']:.2f}×",
        "a100_fp8": f"{rows['A100 SXM4 80GB']['speedup_8bit_vs_16bit']:.2f}×",
    }


def rentbuy(run: Runner) -> Figures:
    d = run.json("rent-vs-buy", "a100 80gb", "--hours-per-month", "200", "--years", "3")
    demand, spot = d["rent"]["on_demand"], d["rent"]["spot"]
    return {
        "a100_price": f"${d['purchase']['usd']:,.0f}",
        "a100_demand_hours": f"{demand['break_even_hours_per_month']:.0f}",
        "a100_demand_share": f"{100 * demand['break_even_share_of_month']:.0f}%",
        "a100_demand_rate": f"${demand['usd_per_hour']:.2f}/h",
        "a100_demand_from": demand["price_source"].split()[0],
        "a100_spot_hours": f"{spot['break_even_hours_per_month']:.0f}",
        "a100_spot_rate": f"${spot['usd_per_hour']:.2f}/h",
    }


def chat(run: Runner) -> Figures:
    options = run.json("plan", "examples/chat-7b.yaml", "--top", "1000")["options"]
    first, second = options[0], options[1]
    h100 = min(o["usd_per_hour"] for o in options if o["gpu"].startswith("H100") and o["usd_per_hour"])
    return {
        "first": f"{first['gpu']} and {second['gpu']} at ${first['usd_per_hour']:.2f}/h",
        "h100_ratio": f"{h100 / first['usd_per_hour']:.0f}×",
    }


def stream(run: Runner) -> Figures:
    argv = ("plan", "examples/stream-4k.yaml", "--set", "resolution=1080p", "--set", "objective=energy", "--top", "1")
    best = run.json(*argv)["options"][0]
    watts = 1000 * best["energy_kwh"] / best["num_gpus"] / best["hours"]
    return {"energy_1080p": f"the {best['gpu']} comes first ({best['per_gpu']:.0f} {best['unit']} in {watts:.0f} W)"}


def usecases(run: Runner) -> Figures:
    """`gpuplan gpus --use-cases`: the recommendation of a few well-known cards."""
    rows = {r["name"]: r["recommendation"] for r in run.json("gpus", "--use-cases")}
    cards = [("L4", "L4"), ("L40", "L40"), ("A100", "A100 SXM4 80GB"), ("H100", "H100 SXM5 80GB")]
    return {"examples": "; ".join(f"{short} — {rows[name]}" for short, name in cards)}


def replicas(run: Runner) -> Figures:
    """A batch generation job on 8 H100s: the plan's layout against one tensor-parallel copy."""
    job = ("llama-3.1-8b", "--set", "tokens=1e9", "--set", "batch_size=512")
    best = next(o for o in run.json("plan", *job, "--gpus", "H100")["options"] if o["num_gpus"] == 8)
    tp8 = run.json("estimate", *job, "--gpu", "H100", "--num-gpus", "8", "--set", "tp=8")["time"]
    tp = best["layout"]["tp"]
    return {
        "h100_layout": f"{8 // tp} replicas of TP{tp}",
        "h100_gain": f"{best['throughput'] / tp8['output_tokens_per_s']:.1f}x",
    }


def torchtune(run: Runner) -> Figures:
    """torchtune's Llama 3.1 8B full fine-tune with PagedAdamW8bit on one RTX 4090 (row TTS-001)."""
    sets = [
        "task=finetune", "batch_size=2", "seq_len=2048", "activation_checkpointing=full",
        "optimizer=paged-adamw-8bit", "master_weights=none", "optimizer_in_backward=true", "compile=true",
        "loss_impl=chunked",
    ]  # fmt: skip
    e = run.json("estimate", "llama-3.1-8b", "--gpu", "4090", *(a for s in sets for a in ("--set", s)))
    return {"spill": f"{e['memory']['paged_spill_bytes'] / 2**30:.1f} GiB", "rate": f"{e['time']['tokens_per_s']:,.0f}"}


def golden(run: Runner) -> Figures:
    """The golden-file cases tests/test_golden.py keeps (tests/helpers/golden_cases.py)."""
    spec = importlib.util.spec_from_file_location("golden_cases", ROOT / "tests" / "helpers" / "golden_cases.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return {"cases": str(len(module.cases()))}


FIGURES: dict[str, Callable[[Runner], Figures]] = {}


def _register() -> None:
    from course_figures import course

    for fn in (
        catalog,
        validation,
        stacks,
        serving,
        misses,
        lab,
        chart,
        rentbuy,
        chat,
        stream,
        usecases,
        replicas,
        torchtune,
        golden,
        course,
    ):
        FIGURES[fn.__name__] = cache(fn)


_register()
