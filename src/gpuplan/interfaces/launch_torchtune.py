"""torchtune's recipe configs for the models gpuplan has presets for: the real config names, so a
`tune run ... --config NAME` line names a file torchtune ships (a model or task it has none for is
refused in one line).

Source: pytorch/torchtune:recipes/configs@bd2a0fc7c31430972728494fa01aaeeb0ebf1ba1 (the folders
llama2, llama3_1, llama3_2, llama3_3, llama4, mistral, phi3, qwen2_5, qwen3, gemma2 and the
<size>_<full|lora|qlora>[_single_device].yaml files in them; `tune ls` lists the same names).
"""

from __future__ import annotations

from typing import Final

from gpuplan.errors import InvalidSettingError

TORCHTUNE_COMMIT: Final = "bd2a0fc7c31430972728494fa01aaeeb0ebf1ba1"

# gpuplan preset -> torchtune's "<folder>/<size>" config prefix
TUNE_PREFIX: Final[dict[str, str]] = {
    "llama-2-7b": "llama2/7B",
    "llama-2-13b": "llama2/13B",
    "llama-2-70b": "llama2/70B",
    "llama-3.1-8b": "llama3_1/8B",
    "llama-3.1-70b": "llama3_1/70B",
    "llama-3.1-405b": "llama3_1/405B",
    "llama-3.2-1b": "llama3_2/1B",
    "llama-3.2-3b": "llama3_2/3B",
    "llama-3.3-70b": "llama3_3/70B",
    "llama-4-scout": "llama4/scout_17B_16E",
    "llama-4-maverick": "llama4/maverick_17B_128E",
    "mistral-7b": "mistral/7B",
    "phi-3-mini": "phi3/mini",
    "qwen2.5-0.5b": "qwen2_5/0.5B",
    "qwen2.5-7b": "qwen2_5/7B",
    "qwen2.5-14b": "qwen2_5/14B",
    "qwen2.5-32b": "qwen2_5/32B",
    "qwen2.5-72b": "qwen2_5/72B",
    "qwen3-0.6b": "qwen3/0.6B",
    "qwen3-1.7b": "qwen3/1.7B",
    "qwen3-8b": "qwen3/8B",
    "qwen3-32b": "qwen3/32B",
    "gemma-2-9b": "gemma2/9B",
    "gemma-2-27b": "gemma2/27B",
}

# the fine-tuning configs torchtune ships for those prefixes (at TORCHTUNE_COMMIT)
TUNE_CONFIGS: Final = frozenset(
    [
        "llama2/7B_full",
        "llama2/7B_lora",
        "llama2/7B_lora_single_device",
        "llama2/7B_qlora",
        "llama2/7B_qlora_single_device",
        "llama2/13B_full",
        "llama2/13B_lora",
        "llama2/13B_qlora_single_device",
        "llama2/70B_lora",
        "llama2/70B_qlora",
        "llama3_1/8B_full",
        "llama3_1/8B_full_single_device",
        "llama3_1/8B_lora",
        "llama3_1/8B_lora_single_device",
        "llama3_1/8B_qlora_single_device",
        "llama3_1/70B_full",
        "llama3_1/70B_lora",
        "llama3_1/405B_qlora",
        "llama3_2/1B_full",
        "llama3_2/1B_full_single_device",
        "llama3_2/1B_lora",
        "llama3_2/1B_lora_single_device",
        "llama3_2/1B_qlora_single_device",
        "llama3_2/3B_full",
        "llama3_2/3B_full_single_device",
        "llama3_2/3B_lora",
        "llama3_2/3B_lora_single_device",
        "llama3_2/3B_qlora_single_device",
        "llama3_3/70B_full",
        "llama3_3/70B_lora",
        "llama3_3/70B_qlora",
        "llama4/maverick_17B_128E_full",
        "llama4/scout_17B_16E_full",
        "llama4/scout_17B_16E_lora",
        "mistral/7B_full",
        "mistral/7B_lora",
        "mistral/7B_lora_single_device",
        "mistral/7B_qlora_single_device",
        "phi3/mini_full",
        "phi3/mini_lora",
        "phi3/mini_lora_single_device",
        "phi3/mini_qlora_single_device",
        "qwen2_5/0.5B_full",
        "qwen2_5/0.5B_full_single_device",
        "qwen2_5/0.5B_lora",
        "qwen2_5/0.5B_lora_single_device",
        "qwen2_5/7B_full",
        "qwen2_5/7B_full_single_device",
        "qwen2_5/7B_lora",
        "qwen2_5/7B_lora_single_device",
        "qwen2_5/14B_lora_single_device",
        "qwen2_5/32B_lora",
        "qwen2_5/72B_lora",
        "qwen3/0.6B_full",
        "qwen3/0.6B_full_single_device",
        "qwen3/0.6B_lora",
        "qwen3/0.6B_lora_single_device",
        "qwen3/1.7B_full",
        "qwen3/1.7B_full_single_device",
        "qwen3/1.7B_lora",
        "qwen3/1.7B_lora_single_device",
        "qwen3/8B_full",
        "qwen3/8B_full_single_device",
        "qwen3/8B_lora",
        "qwen3/8B_lora_single_device",
        "qwen3/32B_lora",
        "gemma2/9B_full",
        "gemma2/9B_lora",
        "gemma2/9B_lora_single_device",
        "gemma2/9B_qlora_single_device",
        "gemma2/27B_full",
        "gemma2/27B_lora",
        "gemma2/27B_lora_single_device",
        "gemma2/27B_qlora_single_device",
    ]
)


def tune_config(model: str, kind: str, single: bool) -> str:
    """torchtune's config for `model` (a gpuplan preset), `kind` full, lora or qlora, on one device
    (`single`) or distributed; one line naming what torchtune ships where it has no such config."""
    prefix = TUNE_PREFIX.get(model)
    if prefix is None:
        raise InvalidSettingError(
            f"torchtune ships no recipe config for {model} (pytorch/torchtune recipes/configs); "
            "use --format axolotl, llama-factory or accelerate, or a model torchtune has configs for."
        )
    name = f"{prefix}_{kind}" + ("_single_device" if single else "")
    if name not in TUNE_CONFIGS:
        have = sorted(c for c in TUNE_CONFIGS if c.startswith(prefix + "_"))
        where = "one GPU" if single else "several GPUs"
        raise InvalidSettingError(
            f"torchtune ships no {kind} config for {model} on {where} (it has {', '.join(have)}); "
            "change the task or GPU count, or use --format axolotl, llama-factory or accelerate."
        )
    return name
