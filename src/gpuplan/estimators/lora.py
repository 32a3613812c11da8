"""LoRA adapters: which linear layers they adapt and how many parameters they add.

LoRA (Hu et al. 2021, sec. 4.1) adds A (in x r) and B (r x out) beside a frozen W (in x out):
r x (in + out) trainable parameters per adapted matrix. The default targets per family are
PEFT's (peft/utils/constants.py, TRANSFORMERS_MODELS_TO_LORA_TARGET_MODULES_MAPPING);
"all-linear" adapts every linear layer of the blocks, not the output head (PEFT's
`target_modules="all-linear"`, which also excludes the head).
"""

from __future__ import annotations

from typing import Final

from gpuplan.errors import InvalidSettingError
from gpuplan.specs.model import ModelSpec, ParamGroup

DEFAULT_TARGETS: Final[dict[str, tuple[str, ...]]] = {
    "llama": ("q_proj", "v_proj"),
    "mistral": ("q_proj", "v_proj"),
    "mixtral": ("q_proj", "v_proj"),
    "qwen2": ("q_proj", "v_proj"),
    "qwen2_moe": ("q_proj", "v_proj"),
    "qwen3": ("q_proj", "v_proj"),
    "qwen3_moe": ("q_proj", "v_proj"),
    "gemma": ("q_proj", "v_proj"),
    "gemma2": ("q_proj", "v_proj"),
    # PEFT 0.21 TRANSFORMERS_MODELS_TO_LORA_TARGET_MODULES_MAPPING; Gemma 3 / OLMo 2 / StarCoder2 /
    # Nemotron / Granite / Cohere have no PEFT entry: their q_proj/v_proj play the same part
    "gemma3_text": ("q_proj", "v_proj"),
    "gemma3": ("q_proj", "v_proj"),
    "opt": ("q_proj", "v_proj"),
    "gptj": ("q_proj", "v_proj"),
    "phi": ("q_proj", "v_proj", "fc1", "fc2"),
    "gpt_bigcode": ("c_attn",),
    "olmo2": ("q_proj", "v_proj"),
    "starcoder2": ("q_proj", "v_proj"),
    "nemotron": ("q_proj", "v_proj"),
    "granite": ("q_proj", "v_proj"),
    "cohere": ("q_proj", "v_proj"),
    # PEFT targets Phi-3's fused qkv_proj; gpuplan lists q/k/v separately (same weights)
    "phi3": ("q_proj", "k_proj", "v_proj"),
    "gpt2": ("c_attn",),
    "gpt_neox": ("query_key_value",),
    "falcon": ("query_key_value",),
    "RefinedWeb": ("query_key_value",),
    "RefinedWebModel": ("query_key_value",),
    "llama4": ("q_proj", "v_proj"),
    "llama4_text": ("q_proj", "v_proj"),  # PEFT's llama4 entry; the text config alone has none
    # no PEFT entry for gpt-oss (PEFT asks for target_modules): q/v as for its Llama-style kin
    "gpt_oss": ("q_proj", "v_proj"),
    "bloom": ("query_key_value",),
    "mpt": ("Wqkv",),
    "bert": ("query", "value"),
    "roberta": ("query", "value"),
    "t5": ("q", "v"),
    "mt5": ("q", "v"),
    "vit": ("query", "value"),
    # no PEFT default for DeepSeek's MLA; its query and KV up-projections play q/v's part
    "deepseek_v2": ("q_proj", "q_b_proj", "kv_b_proj"),
    "deepseek_v3": ("q_proj", "q_b_proj", "kv_b_proj"),
}

_BLOCK_ROLES: Final = ("attention", "mlp", "expert")


def _leaf(name: str) -> str:
    return name.rsplit(".", 1)[-1]


def lora_targets(model: ModelSpec, targets: str | list[str]) -> list[ParamGroup]:
    """The linear groups LoRA adapts for `targets` ("default", "all-linear" or module names)."""
    linears = [g for g in model.linear_layers() if g.numel > 0]
    if targets == "all-linear":
        chosen = [g for g in linears if g.role in _BLOCK_ROLES]
    else:
        names = DEFAULT_TARGETS.get(model.model_type) if targets == "default" else tuple(targets)
        if names is None:
            names = ()
        chosen = [g for g in linears if _leaf(g.name) in names or g.name in names]
        if not chosen:
            known = sorted({_leaf(g.name) for g in linears})
            raise InvalidSettingError(
                f"The 'lora_targets' {list(names) or targets!r} match no linear layer of {model.name}. "
                f"Its linear layers: {', '.join(known)} (or use 'all-linear')."
            )
    return chosen


def adapter_params(targets: list[ParamGroup], rank: int) -> int:
    """Trainable LoRA parameters: r x (in + out) per adapted matrix (Hu et al. 2021)."""
    return sum(rank * (g.linear[0] + g.linear[1]) * g.count for g in targets if g.linear is not None)


def lora_param_count(model: ModelSpec, targets: str | list[str], rank: int) -> int:
    """Trainable LoRA parameters for `targets` ("default", "all-linear" or module names)."""
    return adapter_params(lora_targets(model, targets), rank)
