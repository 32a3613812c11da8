"""Our parameter counts against what transformers builds on the meta device (no download, no
remote code). Needs the `reference` extra (torch CPU + transformers), which `make test` installs;
skips with the reason where they are absent."""

from __future__ import annotations

from typing import Any

import pytest

from gpuplan.specs.model import family_of, model_from_config
from gpuplan.specs.models import load_model, preset_config, presets

torch = pytest.importorskip("torch", reason="torch not installed (pip install 'gpuplan[reference]')")
transformers = pytest.importorskip("transformers", reason="transformers not installed")

# which transformers head class matches our count convention, per model_type
_CLASS = {
    "bert": "BertModel",  # with pooler
    "roberta": "RobertaModel",
    "t5": "T5ForConditionalGeneration",
    "mt5": "MT5ForConditionalGeneration",
    "vit": "ViTForImageClassification",
    "resnet": "ResNetForImageClassification",
    "llama4": "Llama4ForConditionalGeneration",  # with the vision encoder, as the checkpoint
}


def _transformers_count(config: dict[str, Any]) -> int:
    cfg = dict(config)
    cfg.pop("auto_map", None)
    cfg.pop("quantization_config", None)  # fp8 checkpoint metadata; the module shapes do not change
    model_type = cfg.pop("model_type")
    hf_config = transformers.AutoConfig.for_model(model_type, **cfg)
    cls_name = _CLASS.get(model_type)
    with torch.device("meta"):
        if cls_name is None:
            model = transformers.AutoModelForCausalLM.from_config(hf_config)
        else:
            model = getattr(transformers, cls_name)(hf_config)
    count = int(sum(p.numel() for p in model.parameters()))
    # transformers 5.x ties T5/mT5 output heads to `shared` even where the config says
    # tie_word_embeddings=false (T5 v1.1 / T0 / mT0 ship a separate lm_head: the T0_3B fp32
    # checkpoint is 11.4 GB = 2.85B parameters). Count the checkpoint's real tensors.
    if config.get("tie_word_embeddings") is False:
        out, inp = model.get_output_embeddings(), model.get_input_embeddings()
        if out is not None and out.weight is inp.weight:
            count += int(out.weight.numel())
    return count


@pytest.mark.parametrize("name", sorted(presets()))
def test_preset_count_equals_transformers(name: str) -> None:
    fam = family_of(str(preset_config(presets()[name]).get("model_type")))
    if fam is not None and fam.hub_code:  # Qwen v1: the code ships with the checkpoint, not transformers
        pytest.skip(f"{name}: transformers has no {fam.model_type!r} model ({fam.hub_code}, remote code)")
    expected = _transformers_count(preset_config(presets()[name]))
    assert load_model(name).total_params == expected


# Small synthetic configs for families and options no preset covers: same check, tiny models.
SYNTHETIC: dict[str, dict[str, Any]] = {
    "gemma": {
        "model_type": "gemma", "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
        "num_key_value_heads": 1, "head_dim": 32, "intermediate_size": 128, "vocab_size": 1000,
    },
    "llama-biases": {
        "model_type": "llama", "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
        "num_key_value_heads": 2, "intermediate_size": 96, "vocab_size": 500, "attention_bias": True,
        "mlp_bias": True, "tie_word_embeddings": True,
    },
    "qwen2_moe": {
        "model_type": "qwen2_moe", "hidden_size": 64, "num_hidden_layers": 3, "num_attention_heads": 4,
        "num_key_value_heads": 2, "intermediate_size": 128, "vocab_size": 700, "num_experts": 6,
        "num_experts_per_tok": 2, "moe_intermediate_size": 32, "shared_expert_intermediate_size": 48,
        "decoder_sparse_step": 1, "mlp_only_layers": [1],
    },
    "deepseek_v2": {
        "model_type": "deepseek_v2", "hidden_size": 64, "num_hidden_layers": 3, "num_attention_heads": 4,
        "intermediate_size": 160, "moe_intermediate_size": 24, "vocab_size": 300, "q_lora_rank": None,
        "kv_lora_rank": 32, "qk_nope_head_dim": 16, "qk_rope_head_dim": 8, "v_head_dim": 16,
        "n_routed_experts": 8, "n_shared_experts": 2, "num_experts_per_tok": 2, "first_k_dense_replace": 1,
        "moe_layer_freq": 1,
    },
    "falcon-new-arch": {
        "model_type": "falcon", "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 8,
        "num_kv_heads": 2, "new_decoder_architecture": True, "parallel_attn": True, "bias": False,
        "vocab_size": 400,
    },
    "gpt_neox": {
        "model_type": "gpt_neox", "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
        "intermediate_size": 256, "vocab_size": 512,
    },
    "llama4_text-interleaved": {
        "model_type": "llama4_text", "hidden_size": 64, "num_hidden_layers": 5, "num_attention_heads": 4,
        "num_key_value_heads": 2, "head_dim": 16, "intermediate_size": 32, "intermediate_size_mlp": 96,
        "vocab_size": 300, "num_local_experts": 4, "num_experts_per_tok": 2, "interleave_moe_layer_step": 2,
    },
    "llama4_text-listed": {
        "model_type": "llama4_text", "hidden_size": 64, "num_hidden_layers": 4, "num_attention_heads": 4,
        "num_key_value_heads": 1, "intermediate_size": 48, "intermediate_size_mlp": 80, "vocab_size": 300,
        "num_local_experts": 3, "num_experts_per_tok": 1, "moe_layers": [0, 3], "tie_word_embeddings": True,
    },
    "qwen3": {
        "model_type": "qwen3", "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
        "num_key_value_heads": 2, "head_dim": 32, "intermediate_size": 96, "vocab_size": 300,
        "tie_word_embeddings": False,
    },
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(SYNTHETIC))
def test_synthetic_config_count_equals_transformers(name: str) -> None:
    cfg = SYNTHETIC[name]
    assert model_from_config(cfg, name).total_params == _transformers_count(cfg)
