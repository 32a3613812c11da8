"""The figures of docs/course-planning.md's prose and tables (group `course` of
docs/readme_figures.py), each from a gpuplan command's --json document."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from readme_blocks import Runner

RUNS = 200  # the guide's choice: 20 groups x 10 runs each
FULL, LORA, QLORA = "examples/course-full-1b.yaml", "examples/course-lora-3b.yaml", "examples/course-qlora-8b.yaml"
GIB = 2**30
# the guide's shell example and what it prints
PIPE = """```sh
gpuplan estimate examples/course-full-1b.yaml --gpu 4090 --num-gpus 2 --set zero=3 --json \\
  | python3 -c 'import json,sys; c=json.load(sys.stdin)["cost"]; print(200*c["usd"], 200*c["gpu_hours"])'
# {usd:.1f} {hours:.1f}
```"""

# the bill's rows: variant, hardware, workload file, GPU, count, --set values
BILL: list[tuple[str, str, str, str, int, tuple[str, ...]]] = [
    ("full fine-tune, 1B", "1x A100 40GB", FULL, "a100 40gb", 1, ()),
    ("full fine-tune, 1B", "2x RTX 4090 (ZeRO-3)", FULL, "4090", 2, ("zero=3",)),
    ("full fine-tune, 1B", "2x RTX 3090 (ZeRO-3)", FULL, "3090", 2, ("zero=3",)),
    ("full fine-tune, 1B, 8-bit AdamW", "1x RTX 4090", FULL, "4090", 1, ("optimizer=adamw-8bit",)),
    ("LoRA, 3B", "1x RTX 4090", LORA, "4090", 1, ()),
    ("QLoRA, 8B", "1x RTX 4090", QLORA, "4090", 1, ()),
    ("QLoRA, 8B", "1x L4", QLORA, "l4", 1, ()),
]


def _estimate(run: Runner, path: str, gpu: str, num_gpus: int = 1, sets: tuple[str, ...] = ()) -> Any:
    argv = ["estimate", path, "--gpu", gpu, "--num-gpus", str(num_gpus)]
    for s in sets:
        argv += ["--set", s]
    return run.json(*argv)


def _duration(seconds: float) -> str:
    return f"{seconds / 60:.1f} min" if seconds < 7200 else f"{seconds / 3600:.1f} h"


def _bill(run: Runner) -> tuple[str, list[float]]:
    table = [
        "| variant | hardware per group | per run | 200 runs | GPU-hours for the class |",
        "|---|---|---|---|---|",
    ]
    totals = []
    for variant, hardware, path, gpu, n, sets in BILL:
        e = _estimate(run, path, gpu, n, sets)
        usd, hours = e["cost"]["usd"], e["cost"]["gpu_hours"]
        totals.append(RUNS * usd)
        per_run = f"${usd:.2f}, {_duration(e['time']['time_to_train_s'])}"
        table.append(f"| {variant} | {hardware} | {per_run} | ${RUNS * usd:,.0f} | {RUNS * hours:,.0f} |")
    return "\n".join(table), totals


def _offer(run: Runner, gpu: str) -> Any:
    """The cheapest on-demand offer for `gpu` (rent-vs-buy's rent side; the purchase price is moot)."""
    return run.json("rent-vs-buy", gpu, "--price", "1")["rent"]["on_demand"]


def _rates(run: Runner) -> dict[str, str]:
    """The cheapest on-demand price of each card the guide names, with the cloud for some."""
    out = {}
    for key, gpu in (("3090", "3090"), ("4090", "4090"), ("a100", "a100 40gb"), ("l4", "l4"), ("t4", "t4")):
        offer = _offer(run, gpu)
        out[f"rate_{key}"] = f"${offer['usd_per_hour']:.2f}/h"
        out[f"cloud_{key}"] = offer["price_source"].split()[0]
    return out


def _fit_figures(run: Runner) -> dict[str, str]:
    full = _estimate(run, FULL, "3090")["memory"]
    adam8 = {g: _estimate(run, FULL, g, 1, ("optimizer=adamw-8bit",))["memory"] for g in ("3090", "4090")}
    return {
        "full_needs": f"{full['per_gpu_bytes'] / GIB:.0f} GiB",
        "adam8_needs": f"{adam8['4090']['per_gpu_bytes'] / GIB:.2f} GiB",
        "adam8_top_3090": f"{adam8['3090']['per_gpu_bytes_high'] / GIB:.2f} GiB",
        "adam8_top_4090": f"{adam8['4090']['per_gpu_bytes_high'] / GIB:.2f} GiB",
        "usable_24gb": f"{adam8['4090']['capacity_bytes'] / GIB:.2f} GiB",
    }


def _ownership(run: Runner, qlora_hours: float) -> dict[str, str]:
    light = run.json("rent-vs-buy", "4090", "--hours-per-month", "10", "--years", "3")
    heavy = run.json("rent-vs-buy", "4090", "--hours-per-month", "200", "--years", "3")
    rent = heavy["rent"]
    return {
        "qlora_class_hours": f"{qlora_hours:,.0f}",
        "qlora_per_card_month": f"{qlora_hours:,.0f} / 4 / 12 ≈ {qlora_hours / 48:.0f}",
        "rent_factor": f"{light['own']['total_usd'] / light['rent']['on_demand']['total_usd']:.0f}",
        "demand_break_even": f"{rent['on_demand']['break_even_hours_per_month']:.0f}",
        "demand_share": f"{100 * rent['on_demand']['break_even_share_of_month']:.0f}%",
        "spot_break_even": f"{rent['spot']['break_even_hours_per_month']:.0f}",
    }


def course(run: Runner) -> dict[str, str]:
    table, totals = _bill(run)
    pair = _estimate(run, FULL, "4090", 2, ("zero=3",))["cost"]
    rate_4090 = _offer(run, "4090")["usd_per_hour"]
    dev_hours = 8 * 20 * 2  # the guide's example: 8 h a day for 20 days, two cards
    qlora = _estimate(run, QLORA, "4090")["cost"]["gpu_hours"] * RUNS
    return {
        "bill": table,
        "bill_range": f"${min(totals):,.0f}-${max(totals):,.0f}",
        "pipe_block": PIPE.format(usd=RUNS * pair["usd"], hours=RUNS * pair["gpu_hours"]),
        "dev_rental": (
            f"2x RTX 4090 at ${rate_4090:.2f}/h: {dev_hours} GPU-hours, ${dev_hours * rate_4090:,.0f} per group, "
            f"${20 * dev_hours * rate_4090:,.0f} for 20 groups"
        ),
        **_rates(run),
        **_fit_figures(run),
        **_ownership(run, qlora),
    }
