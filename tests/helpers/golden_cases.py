"""The golden-file cases: CLI invocations whose output must not change unless a change means to.

Each case is a name and the argv of `gpuplan`; its stdout, stderr and exit code are stored under
tests/golden/. They cover every `--json` face on the bundled examples (estimate, fit, plan, model,
gpus, compare, chart, validate, rent-vs-buy, lab) and every launch format, so a refactor that moves
code between modules is checked to be byte-identical. Regenerate on purpose with
`GPUPLAN_UPDATE_GOLDEN=1 pytest tests/test_golden.py` and review the diff.
"""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
GOLDEN = ROOT / "tests" / "golden"

# the examples that describe one LLM job (lab.yaml is a lab file; stream-4k is graphics)
LLM_EXAMPLES = [
    "chat-7b",
    "course-full-1b",
    "course-lora-3b",
    "course-qlora-8b",
    "lora-4090",
    "pretrain-1b",
    "pretrain-70b-cluster",
    "serve-70b",
    "serve-gpt-oss-20b",
]
# examples that name their GPU or cluster; the others get one for `launch`
HAS_GPU = {"lora-4090", "pretrain-70b-cluster", "serve-70b", "serve-gpt-oss-20b"}
LAUNCH_GPU = {"chat-7b": "L4", "course-qlora-8b": "T4"}
# the course's QLoRA (15.15 GiB a GPU) fits a T4 only with ECC off, when it shows all 16 GiB (15 with ECC on)
LAUNCH_SETS = {"course-qlora-8b": ["--set", "ecc=false"]}
LAUNCH_FORMATS = ["torchrun", "accelerate", "deepspeed", "fsdp", "slurm", "skypilot", "vllm"]


def _ex(name: str) -> str:
    return f"examples/{name}.yaml"


def cases() -> list[tuple[str, list[str]]]:
    """(case name, argv) for every golden case; paths are relative to the repository root."""
    out: list[tuple[str, list[str]]] = []
    for ex in LLM_EXAMPLES:
        out.append((f"estimate-{ex}.json", ["estimate", _ex(ex), "--json"]))
        out.append((f"fit-{ex}.json", ["fit", _ex(ex), "--json"]))
        out.append((f"plan-{ex}.json", ["plan", _ex(ex), "--json"]))
        out.append((f"estimate-{ex}.txt", ["estimate", _ex(ex)]))
        out.append((f"fit-{ex}.txt", ["fit", _ex(ex)]))
        gpu = [] if ex in HAS_GPU else ["--set", f"gpu={LAUNCH_GPU.get(ex, 'A100 SXM4 80GB')}"]
        gpu += LAUNCH_SETS.get(ex, [])
        for fmt in LAUNCH_FORMATS:
            out.append((f"launch-{ex}-{fmt}.txt", ["launch", _ex(ex), "--format", fmt, *gpu]))
    # single-GPU estimate and fit on a chosen card where the example names none
    out.append(("estimate-chat-7b-l4.json", ["estimate", _ex("chat-7b"), "--set", "gpu=L4", "--json"]))
    out.append(
        ("estimate-pretrain-1b-a100.json", ["estimate", _ex("pretrain-1b"), "--set", "gpu=A100 SXM4 80GB", "--json"])
    )
    out.append(
        (
            "fit-70b-qlora.json",
            [
                "fit",
                "llama-3.1-70b",
                "--task",
                "qlora",
                "--batch-size",
                "1",
                "--seq-len",
                "4096",
                "--checkpointing",
                "full",
                "--json",
            ],
        )
    )
    out.append(("estimate-serve-70b-awq.json", ["estimate", _ex("serve-70b"), "--set", "weight_dtype=awq", "--json"]))
    out.append(("estimate-lora-4090-tokens.json", ["estimate", _ex("lora-4090"), "--set", "tokens=5e7", "--json"]))
    out.append(("plan-pretrain-70b-top5.txt", ["plan", _ex("pretrain-70b-cluster"), "--top", "5"]))
    out.append(("plan-chat-7b-top8.txt", ["plan", _ex("chat-7b"), "--top", "8"]))
    out.append(("plan-pretrain-1b-top8.txt", ["plan", _ex("pretrain-1b"), "--top", "8"]))
    out.append(
        (
            "launch-pretrain-1b-slurm-2x8.txt",
            ["launch", _ex("pretrain-1b"), "--format", "slurm", "--cluster", "2x8:A100 SXM4 80GB"],
        )
    )
    out.append(
        ("plan-pretrain-1b-cluster.json", ["plan", _ex("pretrain-1b"), "--cluster", "2x8:A100 SXM4 80GB", "--json"])
    )
    out.append(
        ("launch-lora-4090-x2-fsdp.txt", ["launch", _ex("lora-4090"), "--format", "fsdp", "--set", "num_gpus=2"])
    )
    # the answer first: a job that does not fit gets its verdict and verified fixes, and no launch file
    ft = ["llama-3.1-8b", "--set", "task=finetune", "--set", "gpu=4090"]
    out.append(("estimate-8b-finetune-4090.json", ["estimate", *ft, "--json"]))
    out.append(("estimate-8b-finetune-4090.txt", ["estimate", *ft]))
    out.append(("fit-8b-finetune-4090.txt", ["fit", *ft]))
    out.append(("launch-8b-finetune-4090-refused.txt", ["launch", *ft, "--format", "slurm"]))
    out.append(("launch-8b-finetune-4090-forced.txt", ["launch", *ft, "--format", "slurm", "--force"]))
    out.append(
        ("launch-serve-70b-b16-refused.txt", ["launch", _ex("serve-70b"), "--format", "vllm", "--set", "batch_size=16"])
    )
    # graphics
    out.append(("plan-stream-4k.json", ["plan", _ex("stream-4k"), "--json"]))
    out.append(("plan-stream-4k.txt", ["plan", _ex("stream-4k")]))
    # catalog, models, charts
    out.append(("gpus.json", ["gpus", "--json"]))
    out.append(("gpus-use-cases.json", ["gpus", "--use-cases", "--json"]))
    out.append(("gpus-show-h100.json", ["gpus", "show", "H100", "--json"]))
    out.append(("compare.json", ["compare", "H100", "A100", "L4", "L40", "V100", "--json"]))
    out.append(("models.json", ["models", "--json"]))
    for m in ["llama-3.1-8b", "mixtral-8x7b", "t5-base", "bert-base-uncased", "gpt-oss-20b"]:
        out.append((f"model-{m}.json", ["model", m, "--json"]))
    out.append(("chart-relative.json", ["chart", "relative", "--json"]))
    out.append(("validate.json", ["validate", "--json"]))
    out.append(("rent-vs-buy-4090.json", ["rent-vs-buy", "4090", "--json"]))
    out.append(("rent-vs-buy-h100.json", ["rent-vs-buy", "H100", "--hours-per-month", "500", "--json"]))
    # lab mode
    out.append(("lab-check.json", ["lab", "check", _ex("lab"), "--json"]))
    for policy in ["fair", "makespan", "cost"]:
        out.append((f"lab-allocate-{policy}.json", ["lab", "allocate", _ex("lab"), "--policy", policy, "--json"]))
    out.append(("lab-slurm-config.txt", ["lab", "slurm-config", _ex("lab")]))
    return out
