"""Validation with `framework:` in place of the rows' explicit software keys (issue 27, part 1).

Each bundled training row whose source names its stack (NeMo / Megatron-Bridge / DGX Cloud recipes,
Megatron-LM, torchtitan, torchtune, LitGPT, MosaicML llm-foundry, Hugging Face transformers / PEFT /
accelerate) is run twice: as its `workload` column says, and with `framework: NAME` added and the
software keys that framework sets removed from the column, so the framework's defaults stand in for
them. Layout and run choices (zero, sharding, offload, checkpointing, optimizer, batch) stay as the
row gives them unless --all is passed, which removes every key the framework sets.

    PYTHONPATH=src python bench/framework_validation.py [--all]

Prints, per framework and kind of figure (speed or memory), the rows, the median absolute error with
the explicit keys and with the framework's defaults.
"""

from __future__ import annotations

import argparse
import re
import statistics
from collections import defaultdict

from gpuplan.planner import validation
from gpuplan.planner.validation_columns import Row
from gpuplan.specs import frameworks
from gpuplan.specs.gpu import bundled_catalog

# the keys that say which software runs, not how the user laid out or sized the job
SOFTWARE_KEYS = {
    "attention_impl", "compile", "loss_impl", "tp_comm_overlap", "sequence_parallel", "master_weights",
    "activation_offloading",
}  # fmt: skip
# a row's stack, from its source columns (first match wins: NeMo rows also name Megatron)
SOURCES = (
    ("nemo", r"NeMo|Megatron-Bridge|dgxc|DGX Cloud"),
    ("megatron", r"Megatron-LM"),
    ("torchtitan", r"torchtitan"),
    ("torchtune", r"torchtune"),
    ("litgpt", r"litgpt|lit-gpt|LitGPT"),
    ("llm-foundry", r"llm-foundry|MosaicML|mosaicml"),
    ("unsloth", r"unsloth"),
    ("axolotl", r"axolotl"),
    ("llama-factory", r"LLaMA-Factory"),
    ("deepspeed", r"DeepSpeed"),
    ("hf-trainer", r"transformers|accelerate|PEFT|peft|trl"),
)
TRAINING = re.compile(r"\btask=(pretrain|finetune|lora|qlora)\b")


def stack_of(row: Row) -> str | None:
    text = f"{row['source']} {row['source_ref']}"
    return next((name for name, pattern in SOURCES if re.search(pattern, text)), None)


def with_framework(row: Row, name: str, strip: set[str]) -> Row:
    """The row with `framework=NAME` and without the keys in `strip` in its workload column."""
    parts = [p for p in row["workload"].split("; ") if p.split("=", 1)[0] not in strip]
    return Row({**row.fields, "workload": "; ".join([*parts, f"framework={name}"])})


def _median(errors: list[float]) -> str:
    return f"{statistics.median(abs(e) for e in errors):.1%}" if errors else "—"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--all", action="store_true", help="remove every key the framework sets, layout ones too")
    args = ap.parse_args()
    cat = bundled_catalog()
    groups: dict[str, list[Row]] = defaultdict(list)
    for row in validation.bundled_rows():
        name = stack_of(row) if TRAINING.search(row["workload"]) else None
        if name:
            groups[name].append(row)
    print("| framework | figure | rows | explicit keys | framework defaults | skipped (explicit/framework) |")
    print("|---|---|---|---|---|---|")
    for name, rows in groups.items():
        keys = {d.key for d in frameworks.frameworks()[name].defaults}
        strip = keys if args.all else keys & SOFTWARE_KEYS
        explicit, ex_skip = validation.run_rows(rows, cat)
        framework, fw_skip = validation.run_rows([with_framework(r, name, strip) for r in rows], cat)
        for figure, unit in (("speed", False), ("memory", True)):
            a = [r.error for r in explicit if r.unit != "fits" and (r.unit == "bytes") == unit]
            b = [r.error for r in framework if r.unit != "fits" and (r.unit == "bytes") == unit]
            if a or b:
                print(f"| {name} | {figure} | {len(a)} | {_median(a)} | {_median(b)} | {len(ex_skip)}/{len(fw_skip)} |")


if __name__ == "__main__":
    main()
