"""Families added to the config.json reader: Gemma 3 (text-only and with its SigLIP vision tower),
OPT, GPT-J, Phi (1.5/2), OLMo 2, StarCoder2, GPT-BigCode, Nemotron, Granite and Cohere.

Each case is a real checkpoint's config.json (where it was read is noted beside it; Python-dict
copies are transcribed with None/True/False). Every total is the integer transformers 5.22.2
builds on the meta device, `AutoModelForCausalLM.from_config(AutoConfig.for_model(**cfg))`,
written in as a literal; `test_totals_recounted_with_transformers` recounts them (and a few
synthetic variants of each family's options) where torch and transformers are installed. The
KV-cache bytes are worked out by hand from the attention layout: layers x 2 (K, V) x KV heads x
head dim x 2 bytes, sliding windows capping their layers.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from gpuplan.errors import ModelConfigError
from gpuplan.estimators.lora import lora_param_count, lora_targets
from gpuplan.specs.model import SUPPORTED_MODEL_TYPES, ModelSpec, model_from_config
from gpuplan.specs.models import load_model

# google/gemma-3-12b-it config.json: a GitHub copy (an LTX-2 text encoder's _GEMMA3_CONFIG_DICT,
# "Source: google/gemma-3-12b-it config.json"), code-index file id 52647932717; the same text in
# a second copy (file id 70892509106 quotes 4b-it's, which differs only in the text dims).
# Its text_config is sparse: transformers' Gemma3TextConfig defaults fill the rest (vocab 262208,
# head_dim 256, sliding_window_pattern 6).
GEMMA3_12B: dict[str, Any] = {
    "architectures": ["Gemma3ForConditionalGeneration"],
    "boi_token_index": 255999,
    "eoi_token_index": 256000,
    "eos_token_id": [1, 106],
    "image_token_index": 262144,
    "initializer_range": 0.02,
    "mm_tokens_per_image": 256,
    "model_type": "gemma3",
    "text_config": {
        "hidden_size": 3840,
        "intermediate_size": 15360,
        "model_type": "gemma3_text",
        "num_attention_heads": 16,
        "num_hidden_layers": 48,
        "num_key_value_heads": 8,
        "rope_scaling": {"factor": 8.0, "rope_type": "linear"},
        "sliding_window": 1024,
    },
    "torch_dtype": "bfloat16",
    "vision_config": {
        "hidden_size": 1152,
        "image_size": 896,
        "intermediate_size": 4304,
        "model_type": "siglip_vision_model",
        "num_attention_heads": 16,
        "num_hidden_layers": 27,
        "patch_size": 14,
        "vision_use_head": False,
    },
}

# google/gemma-3-1b-it: mlc-ai/mlc-llm:python/mlc_llm/model/model_preset.py
# (MODEL_PRESETS["gemma3_1b_it"])@01ced331a9e155c5ba4e7625b027a51bee611450 (the gemma-3-1b preset)
GEMMA3_1B: dict[str, Any] = {
    "architectures": ["Gemma3ForCausalLM"], "attention_bias": False, "attention_dropout": 0.0,
    "attn_logit_softcapping": None, "bos_token_id": 2, "cache_implementation": "hybrid", "eos_token_id": [1, 106],
    "final_logit_softcapping": None, "head_dim": 256, "hidden_activation": "gelu_pytorch_tanh",
    "hidden_size": 1152, "initializer_range": 0.02, "intermediate_size": 6912, "max_position_embeddings": 32768,
    "model_type": "gemma3_text", "num_attention_heads": 4, "num_hidden_layers": 26, "num_key_value_heads": 1,
    "pad_token_id": 0, "query_pre_attn_scalar": 256, "rms_norm_eps": 1e-06, "rope_local_base_freq": 10000,
    "rope_scaling": None, "rope_theta": 1000000, "sliding_window": 512, "sliding_window_pattern": 6,
    "torch_dtype": "bfloat16", "transformers_version": "4.50.0.dev0", "use_cache": True, "vocab_size": 262144,
}  # fmt: skip

# facebook/opt-6.7b: an OPTConfig printout with _name_or_path facebook/opt-6.7b (code-index file
# id 44347156050); the same values in EasyDeL's OPT config table (file id 33040550212)
OPT_6_7B: dict[str, Any] = {
    "_remove_final_layer_norm": False, "activation_dropout": 0.0, "activation_function": "relu",
    "architectures": ["OPTForCausalLM"], "attention_dropout": 0.0, "bos_token_id": 2, "do_layer_norm_before": True,
    "dropout": 0.1, "eos_token_id": 2, "ffn_dim": 16384, "hidden_size": 4096, "init_std": 0.02, "layerdrop": 0.0,
    "max_position_embeddings": 2048, "model_type": "opt", "num_attention_heads": 32, "num_hidden_layers": 32,
    "pad_token_id": 1, "prefix": "</s>", "torch_dtype": "float16", "use_cache": True, "vocab_size": 50272,
    "word_embed_proj_dim": 4096,
}  # fmt: skip

# facebook/opt-350m (post-LN, 512-wide embeddings projected in and out): a dict with _name_or_path
# facebook/opt-350m passed to OPTConfig (code-index file id 10041950342); the same values in
# EasyDeL's table (file id 33040550212)
OPT_350M: dict[str, Any] = {
    "activation_dropout": 0.0, "activation_function": "relu", "architectures": ["OPTForCausalLM"],
    "attention_dropout": 0.0, "bos_token_id": 2, "do_layer_norm_before": False, "dropout": 0.1, "eos_token_id": 2,
    "ffn_dim": 4096, "hidden_size": 1024, "init_std": 0.02, "layerdrop": 0.0, "max_position_embeddings": 2048,
    "model_type": "opt", "num_attention_heads": 16, "num_hidden_layers": 24, "pad_token_id": 1, "prefix": "</s>",
    "torch_dtype": "float16", "transformers_version": "4.19.2", "use_cache": True, "vocab_size": 50272,
    "word_embed_proj_dim": 512,
}  # fmt: skip

# EleutherAI/gpt-j-6b: a JSON copy of its config.json (dict gptj_6b) in a public repository file,
# code-index file id 4884378620; the same shape fields in mlc-ai/mlc-llm:python/mlc_llm/model/
# model_preset.py (MODEL_PRESETS["gpt_j"])@01ced331a9e155c5ba4e7625b027a51bee611450
GPTJ_6B: dict[str, Any] = {
    "activation_function": "gelu_new", "architectures": ["GPTJForCausalLM"], "attn_pdrop": 0.0,
    "bos_token_id": 50256, "embd_pdrop": 0.0, "eos_token_id": 50256, "gradient_checkpointing": False,
    "initializer_range": 0.02, "layer_norm_epsilon": 1e-05, "model_type": "gptj", "n_embd": 4096, "n_head": 16,
    "n_inner": None, "n_layer": 28, "n_positions": 2048, "resid_pdrop": 0.0, "rotary": True, "rotary_dim": 64,
    "scale_attn_weights": True, "tie_word_embeddings": False, "tokenizer_class": "GPT2Tokenizer",
    "transformers_version": "4.18.0.dev0", "use_cache": True, "vocab_size": 50400,
}  # fmt: skip

# microsoft/phi-2: henryhmko/VLM_interpretability:phi-2/config.json@53ca1a97573e0a0133c7c3949a9caa84a44a2449
# (the phi-2 preset; auto_map dropped)
PHI_2: dict[str, Any] = {
    "_name_or_path": "microsoft/phi-2", "architectures": ["PhiForCausalLM"], "attention_dropout": 0.0,
    "bos_token_id": 50256, "embd_pdrop": 0.0, "eos_token_id": 50256, "hidden_act": "gelu_new", "hidden_size": 2560,
    "initializer_range": 0.02, "intermediate_size": 10240, "layer_norm_eps": 1e-05, "max_position_embeddings": 2048,
    "model_type": "phi", "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 32,
    "partial_rotary_factor": 0.4, "qk_layernorm": False, "resid_pdrop": 0.1, "rope_scaling": None,
    "rope_theta": 10000.0, "tie_word_embeddings": False, "torch_dtype": "float16", "transformers_version": "4.37.0",
    "use_cache": True, "vocab_size": 51200,
}  # fmt: skip

# allenai/OLMo-2-1124-7B: NVIDIA-NeMo/Megatron-Bridge:tests/unit_tests/models/olmo2/test_olmo2_bridge.py
# (fixture olmo2_7b_config_dict, "Mirror of allenai/OLMo-2-1124-7B/config.json")@57852623b64ad7f1333f2e1af0136b8fd14c4273
OLMO2_7B: dict[str, Any] = {
    "architectures": ["Olmo2ForCausalLM"], "attention_bias": False, "attention_dropout": 0.0, "eos_token_id": 100257,
    "hidden_act": "silu", "hidden_size": 4096, "initializer_range": 0.02, "intermediate_size": 11008,
    "max_position_embeddings": 4096, "model_type": "olmo2", "num_attention_heads": 32, "num_hidden_layers": 32,
    "num_key_value_heads": 32, "pad_token_id": 100277, "rms_norm_eps": 1e-06, "rope_theta": 500000.0,
    "tie_word_embeddings": False, "torch_dtype": "bfloat16", "use_cache": True, "vocab_size": 100352,
}  # fmt: skip

# bigcode/starcoder2-7b: mlc-ai/mlc-llm:python/mlc_llm/model/model_preset.py
# (MODEL_PRESETS["starcoder2"])@01ced331a9e155c5ba4e7625b027a51bee611450 (the starcoder2-7b preset)
STARCODER2_7B: dict[str, Any] = {
    "activation_function": "gelu", "architectures": ["Starcoder2ForCausalLM"], "attention_dropout": 0.1,
    "residual_dropout": 0.1, "embedding_dropout": 0.1, "attention_softmax_in_fp32": True, "bos_token_id": 0,
    "eos_token_id": 0, "hidden_act": "gelu_pytorch_tanh", "hidden_size": 4608, "initializer_range": 0.018042,
    "intermediate_size": 18432, "layer_norm_epsilon": 1e-05, "max_position_embeddings": 16384,
    "mlp_type": "default", "model_type": "starcoder2", "norm_epsilon": 1e-05, "norm_type": "layer_norm",
    "num_attention_heads": 36, "num_hidden_layers": 32, "num_key_value_heads": 4, "rope_theta": 1000000,
    "scale_attention_softmax_in_fp32": True, "scale_attn_weights": True, "sliding_window": 4096,
    "torch_dtype": "bfloat16", "transformers_version": "4.37.0.dev0", "use_bias": True, "use_cache": True,
    "vocab_size": 49152,
}  # fmt: skip

# bigcode/gpt_bigcode-santacoder (GPT-BigCode, multi-query): mlc-ai/mlc-llm:python/mlc_llm/model/model_preset.py
# (MODEL_PRESETS["gpt_bigcode"]: 24 layers, d 2048, 49,280-token vocabulary, 2,048 positions)@01ced331a9e155c5ba4e7625b027a51bee611450
SANTACODER: dict[str, Any] = {
    "activation_function": "gelu_pytorch_tanh", "architectures": ["GPTBigCodeForCausalLM"],
    "attention_softmax_in_fp32": True, "multi_query": True, "attn_pdrop": 0.1, "bos_token_id": 49152,
    "embd_pdrop": 0.1, "eos_token_id": 49152, "initializer_range": 0.02, "layer_norm_epsilon": 1e-05,
    "model_type": "gpt_bigcode", "n_embd": 2048, "n_head": 16, "n_inner": 8192, "n_layer": 24, "n_positions": 2048,
    "resid_pdrop": 0.1, "runner_max_sequence_length": None, "scale_attention_softmax_in_fp32": True,
    "scale_attn_weights": True, "summary_activation": None, "summary_first_dropout": 0.1,
    "summary_proj_to_labels": True, "summary_type": "cls_index", "summary_use_proj": True,
    "transformers_version": "4.28.0.dev0", "use_cache": True, "vocab_size": 49280,
}  # fmt: skip

# Nemotron (Minitron-4B's shape: 32 layers, d 3072, 24 heads in 8 KV groups, squared-ReLU MLP 9216,
# 256k vocabulary, half rotary): NVIDIA-NeMo/Megatron-Bridge:tests/unit_tests/models/nemotron/
# test_nemotron_bridge.py (fixture nemotron_config_dict)@2310230d3bb7687ede368c7a7481f36ca32c664e
NEMOTRON_4B: dict[str, Any] = {
    "architectures": ["NemotronForCausalLM"], "bos_token_id": 1, "eos_token_id": 2, "hidden_act": "relu2",
    "hidden_size": 3072, "initializer_range": 0.0134, "intermediate_size": 9216, "max_position_embeddings": 4096,
    "model_type": "nemotron", "norm_eps": 1e-05, "num_attention_heads": 24, "num_hidden_layers": 32,
    "num_key_value_heads": 8, "partial_rotary_factor": 0.5, "rope_theta": 10000.0, "tie_word_embeddings": False,
    "torch_dtype": "bfloat16", "use_cache": True, "vocab_size": 256000,
}  # fmt: skip

# ibm-granite/granite-3.3-8b-instruct config.json, quoted in a model-architecture report under the
# heading "# ibm-granite/granite-3.3-8b-instruct" (code-index file id 61558565367)
GRANITE_8B: dict[str, Any] = {
    "architectures": ["GraniteForCausalLM"], "attention_bias": False, "attention_dropout": 0.0,
    "attention_multiplier": 0.0078125, "bos_token_id": 0, "embedding_multiplier": 12.0, "eos_token_id": 0,
    "hidden_act": "silu", "hidden_size": 4096, "initializer_range": 0.02, "intermediate_size": 12800,
    "logits_scaling": 16.0, "max_position_embeddings": 131072, "mlp_bias": False, "model_type": "granite",
    "num_attention_heads": 32, "num_hidden_layers": 40, "num_key_value_heads": 8, "pad_token_id": 0,
    "residual_multiplier": 0.22, "rms_norm_eps": 1e-05, "rope_scaling": None, "rope_theta": 10000000.0,
    "tie_word_embeddings": True, "torch_dtype": "bfloat16", "transformers_version": "4.49.0", "use_cache": True,
    "vocab_size": 49159,
}  # fmt: skip

# CohereForAI/aya-23-8B (Cohere / Command-R architecture): mlc-ai/mlc-llm:python/mlc_llm/model/model_preset.py
# (MODEL_PRESETS["aya-23"])@01ced331a9e155c5ba4e7625b027a51bee611450
AYA_23_8B: dict[str, Any] = {
    "architectures": ["CohereForCausalLM"], "attention_bias": False, "attention_dropout": 0.0, "bos_token_id": 5,
    "eos_token_id": 255001, "hidden_act": "silu", "hidden_size": 4096, "initializer_range": 0.02,
    "intermediate_size": 14336, "layer_norm_eps": 1e-05, "logit_scale": 0.0625, "max_position_embeddings": 8192,
    "model_type": "cohere", "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 8,
    "pad_token_id": 0, "rope_theta": 10000, "torch_dtype": "float16", "transformers_version": "4.40.0.dev0",
    "use_cache": True, "use_qk_norm": False, "vocab_size": 256000,
}  # fmt: skip


NEW_TYPES = ("gemma3_text", "gemma3", "opt", "gptj", "phi", "olmo2", "starcoder2", "gpt_bigcode", "nemotron",
             "granite", "cohere")  # fmt: skip


@dataclass(frozen=True)
class Case:
    config: dict[str, Any]
    total: int  # transformers 5.22.2 on the meta device
    kv_bytes: int  # 16-bit K and V per cached token, all layers
    lora_targets: tuple[str, ...]  # PEFT's default where it has one
    lora_params: int  # rank-16 adapters on those targets: 16 x (in + out) per matrix


R = 16  # LoRA rank in the table below
CASES: dict[str, Case] = {
    # KV: 48 layers x 2 x 8 KV heads x 256; LoRA: q 3840->16x256, v 3840->8x256
    "gemma-3-12b": Case(GEMMA3_12B, 12_187_325_040, 48 * 2 * 8 * 256 * 2, ("q_proj", "v_proj"),
                        R * ((3840 + 4096) + (3840 + 2048)) * 48),
    "gemma-3-1b": Case(GEMMA3_1B, 999_885_952, 26 * 2 * 1 * 256 * 2, ("q_proj", "v_proj"),
                       R * ((1152 + 1024) + (1152 + 256)) * 26),
    "opt-6.7b": Case(OPT_6_7B, 6_658_473_984, 32 * 2 * 4096 * 2, ("q_proj", "v_proj"), R * (2 * 8192) * 32),
    "opt-350m": Case(OPT_350M, 331_196_416, 24 * 2 * 1024 * 2, ("q_proj", "v_proj"), R * (2 * 2048) * 24),
    "gpt-j-6b": Case(GPTJ_6B, 6_050_882_784, 28 * 2 * 4096 * 2, ("q_proj", "v_proj"), R * (2 * 8192) * 28),
    # PEFT's phi default adds fc1/fc2: 2560 -> 10240 and back
    "phi-2": Case(PHI_2, 2_779_683_840, 32 * 2 * 2560 * 2, ("q_proj", "v_proj", "fc1", "fc2"),
                  R * (2 * 5120 + 2 * 12800) * 32),
    "olmo-2-7b": Case(OLMO2_7B, 7_298_617_344, 32 * 2 * 4096 * 2, ("q_proj", "v_proj"), R * (2 * 8192) * 32),
    # head_dim 4608 / 36 = 128, 4 KV heads
    "starcoder2-7b": Case(STARCODER2_7B, 7_173_923_840, 32 * 2 * 4 * 128 * 2, ("q_proj", "v_proj"),
                          R * ((4608 + 4608) + (4608 + 512)) * 32),
    # multi-query: one K and one V head of 2048 / 16 = 128; c_attn projects 2048 -> 2048 + 2 x 128
    "santacoder": Case(SANTACODER, 1_124_886_528, 24 * 2 * 1 * 128 * 2, ("c_attn",), R * (2048 + 2304) * 24),
    "nemotron-4b": Case(NEMOTRON_4B, 4_190_509_056, 32 * 2 * 8 * 128 * 2, ("q_proj", "v_proj"),
                        R * ((3072 + 3072) + (3072 + 1024)) * 32),
    "granite-3.3-8b": Case(GRANITE_8B, 8_170_864_640, 40 * 2 * 8 * 128 * 2, ("q_proj", "v_proj"),
                           R * ((4096 + 4096) + (4096 + 1024)) * 40),
    "aya-23-8b": Case(AYA_23_8B, 8_028_033_024, 32 * 2 * 8 * 128 * 2, ("q_proj", "v_proj"),
                      R * ((4096 + 4096) + (4096 + 1024)) * 32),
}  # fmt: skip

# Options no real config above exercises: same transformers check, tiny models.
_TINY = {
    "hidden_size": 64,
    "num_hidden_layers": 3,
    "num_attention_heads": 4,
    "intermediate_size": 96,
    "vocab_size": 300,
}
_SIGLIP_TINY = {"hidden_size": 32, "intermediate_size": 48, "num_hidden_layers": 2, "num_attention_heads": 4,
                "image_size": 56, "patch_size": 14}  # fmt: skip
SYNTHETIC: dict[str, dict[str, Any]] = {
    "gemma3_text-all-defaults": {"model_type": "gemma3_text"},
    "gemma3_text-untied-biased": {"model_type": "gemma3_text", **_TINY, "num_key_value_heads": 2, "head_dim": 32,
                                  "tie_word_embeddings": False, "attention_bias": True},
    "gemma3-all-defaults": {"model_type": "gemma3"},
    # vision_use_head absent: SigLIP's attention-pooling head is built; the outer flag unties lm_head
    "gemma3-pooling-head-untied": {"model_type": "gemma3", "tie_word_embeddings": False, "mm_tokens_per_image": 4,
                                   "text_config": {"model_type": "gemma3_text", **_TINY, "head_dim": 32},
                                   "vision_config": {**_SIGLIP_TINY, "num_channels": 1}},
    "opt-untied-no-bias-no-affine": {"model_type": "opt", **_TINY, "ffn_dim": 128, "max_position_embeddings": 50,
                                     "word_embed_proj_dim": 32, "tie_word_embeddings": False, "enable_bias": False,
                                     "layer_norm_elementwise_affine": False},
    "opt-removed-final-norm": {"model_type": "opt", **_TINY, "ffn_dim": 128, "max_position_embeddings": 50,
                               "_remove_final_layer_norm": True},
    "gptj-tied-n_inner": {"model_type": "gptj", "n_embd": 64, "n_layer": 2, "n_head": 4, "vocab_size": 300,
                          "n_inner": 100, "tie_word_embeddings": True},
    "phi-gqa-qk-layernorm-tied": {"model_type": "phi", **_TINY, "num_key_value_heads": 2, "qk_layernorm": True,
                                  "tie_word_embeddings": True},
    "olmo2-gqa-biased-tied": {"model_type": "olmo2", **_TINY, "num_key_value_heads": 2, "attention_bias": True,
                              "tie_word_embeddings": True},
    "starcoder2-no-bias-untied": {"model_type": "starcoder2", **_TINY, "num_key_value_heads": 2, "use_bias": False,
                                  "tie_word_embeddings": False},
    "gpt_bigcode-mha-untied": {"model_type": "gpt_bigcode", "n_embd": 64, "n_layer": 2, "n_head": 4,
                               "vocab_size": 300, "n_positions": 40, "multi_query": False,
                               "tie_word_embeddings": False},
    "nemotron-biases-head_dim": {"model_type": "nemotron", **_TINY, "num_key_value_heads": 2, "head_dim": 24,
                                 "attention_bias": True, "mlp_bias": True, "tie_word_embeddings": True},
    "granite-biases": {"model_type": "granite", **_TINY, "num_key_value_heads": 2, "attention_bias": True,
                       "mlp_bias": True},
    "cohere-qk-norm-biased-untied": {"model_type": "cohere", **_TINY, "num_key_value_heads": 2, "use_qk_norm": True,
                                     "attention_bias": True, "tie_word_embeddings": False},
}  # fmt: skip


def _model(name: str) -> ModelSpec:
    return model_from_config(CASES[name].config, name)


@pytest.mark.parametrize("name", sorted(CASES))
def test_total_equals_transformers_count(name: str) -> None:
    m = _model(name)
    assert m.total_params == CASES[name].total
    assert sum(m.params_by_role().values()) == m.total_params
    assert m.kind == "decoder" and not m.is_moe and m.active_params == m.total_params


def _transformers_count(config: dict[str, Any]) -> int:
    torch = pytest.importorskip("torch", reason="torch not installed (pip install 'gpuplan[reference]')")
    transformers = pytest.importorskip("transformers", reason="transformers not installed")
    cfg = dict(config)
    model_type = cfg.pop("model_type")
    hf_config = transformers.AutoConfig.for_model(model_type, **cfg)
    with torch.device("meta"):
        model = transformers.AutoModelForCausalLM.from_config(hf_config)
    return int(sum(p.numel() for p in model.parameters()))


@pytest.mark.filterwarnings("ignore:`torch.jit.script` is deprecated:DeprecationWarning")  # gpt_bigcode's import
@pytest.mark.parametrize(
    ("name", "config"), sorted([(n, c.config) for n, c in CASES.items()] + list(SYNTHETIC.items()))
)
def test_totals_recounted_with_transformers(name: str, config: dict[str, Any]) -> None:
    """transformers' own model (Gemma3ForConditionalGeneration for `gemma3`, vision tower included)."""
    assert model_from_config(config, name).total_params == _transformers_count(config)


def test_every_new_family_is_supported_and_has_a_real_config() -> None:
    assert set(NEW_TYPES) <= set(SUPPORTED_MODEL_TYPES)
    assert {c.config["model_type"] for c in CASES.values()} == set(NEW_TYPES)


@pytest.mark.parametrize("name", sorted(CASES))
def test_kv_bytes_per_token_follow_the_attention_layout(name: str) -> None:
    m = _model(name)
    assert m.kv_bytes_per_token() == CASES[name].kv_bytes
    assert m.kv_bytes_per_token(1.0) == CASES[name].kv_bytes / 2


def test_attention_kinds() -> None:
    kinds = {name: _model(name).attention_type for name in CASES}
    assert kinds["santacoder"] == "mqa"
    assert {kinds[n] for n in ("opt-6.7b", "gpt-j-6b", "phi-2", "olmo-2-7b")} == {"mha"}
    gqa = ("gemma-3-12b", "starcoder2-7b", "nemotron-4b", "granite-3.3-8b", "aya-23-8b")
    assert {kinds[n] for n in gqa} == {"gqa"}
    assert kinds["gemma-3-1b"] == "mqa"  # one KV head


def test_gemma3_local_global_pattern() -> None:
    """Five sliding-window layers, then a global one (sliding_window_pattern 6, Gemma 3 report sec. 2.2)."""
    big = _model("gemma-3-12b")
    assert [a.window for a in big.attention_layers] == ([1024] * 5 + [None]) * 8
    per_layer = 2 * 8 * 256 * 2
    assert big.kv_bytes_per_token(past_windows=True) == 8 * per_layer  # only the 8 global layers keep growing
    assert big.kv_cache_bytes(32768) == (8 * 32768 + 40 * 1024) * per_layer
    assert big.kv_cache_bytes(512) == 48 * 512 * per_layer
    small = _model("gemma-3-1b")
    assert [i for i, a in enumerate(small.attention_layers) if a.window is None] == [5, 11, 17, 23]
    assert small.kv_cache_bytes(32768) == (4 * 32768 + 22 * 512) * 2 * 1 * 256 * 2
    # layer_types, where given, wins over the pattern
    types = ["full_attention", "sliding_attention"] * 13
    mixed = model_from_config({**GEMMA3_1B, "layer_types": types}, "x")
    assert [a.window for a in mixed.attention_layers] == [None, 512] * 13


def test_sliding_windows_only_where_the_family_has_them() -> None:
    sc2 = _model("starcoder2-7b")  # every layer attends within 4096 tokens
    assert {a.window for a in sc2.attention_layers} == {4096}
    assert sc2.kv_cache_bytes(16384) == 4096 * sc2.kv_bytes_per_token()
    # OLMo 2, Granite, Cohere, Nemotron and Phi attend to everything whatever the config says
    for name in ("olmo-2-7b", "granite-3.3-8b", "aya-23-8b", "nemotron-4b", "phi-2"):
        m = model_from_config({**CASES[name].config, "sliding_window": 128}, name)
        assert {a.window for a in m.attention_layers} == {None}


def test_gemma3_vision_tower_counts_in_memory_not_per_token() -> None:
    """Gemma3ForConditionalGeneration = Gemma 3 text decoder + SigLIP So400m tower + projector.

    The tower and projector count in the total (they are in memory), but run per image, so the
    per-token FLOPs, LoRA targets and KV cache are the text decoder's alone."""
    full = _model("gemma-3-12b")
    text = model_from_config(GEMMA3_12B["text_config"], "gemma-3-12b text")  # sparse: class defaults fill in
    assert text.model_type == "gemma3_text" and text.total_params == 11_766_034_176  # Gemma3ForCausalLM on meta
    d, ff, layers, patches = 1152, 4304, 27, (896 // 14) ** 2
    tower = (
        3 * 14 * 14 * d + d  # patch embedding (a 14x14 stride-14 convolution with bias)
        + patches * d  # position embedding
        + layers * (4 * (d * d + d) + 2 * d * ff + ff + d + 2 * 2 * d)  # q/k/v/out, fc1/fc2, 2 LayerNorms
        + 2 * d  # post_layernorm; no pooling head (vision_use_head false)
    )  # fmt: skip
    projector = d * 3840 + d  # mm_input_projection_weight and mm_soft_emb_norm
    assert full.total_params - text.total_params == tower + projector == 421_290_864
    assert full.params_by_role()["other"] == tower + projector
    assert full.matmul_flops_per_token() == text.matmul_flops_per_token()
    assert full.kv_bytes_per_token() == text.kv_bytes_per_token()
    assert [g.name for g in lora_targets(full, "all-linear")] == [g.name for g in lora_targets(text, "all-linear")]
    assert full.tie_word_embeddings and full.vocab_size == 262_208 and full.head_dim == 256


@pytest.mark.parametrize("name", sorted(CASES))
def test_lora_targets_and_flops_are_sane(name: str) -> None:
    m, case = _model(name), CASES[name]
    assert lora_param_count(m, list(case.lora_targets), R) == case.lora_params
    # all-linear adapts the blocks' linears, never the output head
    chosen = lora_targets(m, "all-linear")
    assert chosen and all(g.role in ("attention", "mlp") and g.count == m.num_layers for g in chosen)
    # forward FLOPs per token at a short context: about 2 x the weights a token multiplies (PaLM
    # App. B): all but the input embeddings, with a tied output head counted as a matmul
    tied_head = m.hidden_size * m.vocab_size if m.tie_word_embeddings else 0
    if name == "opt-350m":
        tied_head = 512 * m.vocab_size  # the head works at word_embed_proj_dim
    assert m.flops_per_token(1) == pytest.approx(2 * (m.total_params - m.embedding_params + tied_head), rel=0.05)
    assert m.flops_per_token(4096) > m.flops_per_token(1)


def test_gptj_matmul_flops_exactly() -> None:
    """2 x the weights of every per-token matmul: all but the embedding, the LayerNorms and biases."""
    m = _model("gpt-j-6b")
    d, ff, layers, vocab = 4096, 16384, 28, 50400
    norms, biases = (layers + 1) * 2 * d, layers * (ff + d) + vocab  # fc_in/fc_out and lm_head biases
    assert m.matmul_flops_per_token() == 2 * (m.total_params - vocab * d - norms - biases)
    by_name = {g.name: g for g in m.groups}
    assert by_name["lm_head"].linear == (d, vocab) and by_name["lm_head.bias"].total == vocab
    assert "attn.q_proj.bias" not in by_name and by_name["mlp.fc_in.bias"].total == layers * ff


def test_opt_layouts() -> None:
    """opt-6.7b: pre-LN with a final LayerNorm; opt-350m: post-LN, 512-wide embeddings projected
    to 1024 and back (project_in/out, no bias), tied head of 512 x 50272; both learn 2048 + 2
    positions (OPTLearnedPositionalEmbedding's offset)."""
    big, small = _model("opt-6.7b"), _model("opt-350m")
    b = {g.name: g for g in big.groups}
    s = {g.name: g for g in small.groups}
    assert b["embed_positions"].total == 2050 * 4096 and s["embed_positions"].total == 2050 * 1024
    assert "decoder.final_layer_norm" in b and "decoder.final_layer_norm" not in s
    assert "project_in" not in b
    assert s["project_in"].linear == (512, 1024) and s["project_out"].linear == (1024, 512)
    assert s["embed_tokens"].total == 50272 * 512
    assert s["lm_head (tied to the embedding)"].linear == (512, 50272)
    assert s["fc1"].linear == (1024, 4096) and "fc1.bias" in s and "self_attn.out_proj.bias" in s
    assert small.max_position_embeddings == 2048


def test_parallel_and_norm_layouts() -> None:
    norms = {name: _model(name).params_by_role()["norm"] for name in CASES}
    assert norms["phi-2"] == (32 + 1) * 2 * 2560  # one LayerNorm per block (parallel) + final, with biases
    assert norms["gpt-j-6b"] == (28 + 1) * 2 * 4096
    assert norms["aya-23-8b"] == (32 + 1) * 4096  # Cohere: one weight-only LayerNorm per block
    assert norms["olmo-2-7b"] == 32 * (2 * 4096 + 2 * 4096) + 4096  # 2 post-norms + q/k norms over 4096
    assert norms["nemotron-4b"] == (2 * 32 + 1) * 2 * 3072  # LayerNorm1P with bias
    assert norms["gemma-3-1b"] == 26 * (4 * 1152 + 2 * 256) + 1152  # 4 norms + per-head q/k norms
    assert norms["starcoder2-7b"] == (2 * 32 + 1) * 2 * 4608
    phi = {g.name: g for g in _model("phi-2").groups}
    assert phi["self_attn.dense"].linear == (2560, 2560) and phi["lm_head.bias"].total == 51200
    sc2 = {g.name: g for g in _model("starcoder2-7b").groups}
    assert sc2["mlp.c_fc"].linear == (4608, 18432) and "mlp.c_fc.bias" in sc2 and "self_attn.o_proj.bias" in sc2
    nemo = {g.name: g for g in _model("nemotron-4b").groups}
    assert "mlp.gate_proj" not in nemo and nemo["mlp.up_proj"].linear == (3072, 9216)


def test_presets_of_new_families() -> None:
    for name in ("gemma-3-1b", "phi-2", "starcoder2-7b"):
        assert load_model(name).total_params == CASES[name].total
    assert load_model("microsoft/phi-2").model_type == "phi"
    assert load_model("google/gemma-3-1b-it").model_type == "gemma3_text"


def test_gemma3_config_json_from_a_file(tmp_path: Path) -> None:
    """A Gemma 3 checkpoint folder loads: its sparse text_config builds from the class defaults."""
    (tmp_path / "config.json").write_text(json.dumps(GEMMA3_12B))
    m = load_model(str(tmp_path))
    assert m.kv_bytes_per_token() == 48 * 2 * 8 * 256 * 2
    assert m.matmul_flops_per_token() == _model("gemma-3-12b").matmul_flops_per_token()


def test_gemma3_config_json_from_a_file_counts_the_vision_tower(tmp_path: Path) -> None:
    """A Gemma 3 folder is read whole (parse_config_text keeps wrappers the reader builds), so it
    counts what Gemma3ForConditionalGeneration builds: text decoder, SigLIP tower and projector."""
    (tmp_path / "config.json").write_text(json.dumps(GEMMA3_12B))
    assert load_model(str(tmp_path)).total_params == 12_187_325_040


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({"model_type": "gemma3", "text_config": [1, 2]}, "config key 'text_config' must be an object"),
        ({"model_type": "gemma3", "vision_config": {"vision_use_head": "no"}}, "'vision_use_head' must be true"),
        ({"model_type": "gemma3", "vision_config": {"patch_size": 0}}, "'patch_size' must be positive"),
        ({"model_type": "gemma3", "vision_config": {"hidden_size": 100, "num_attention_heads": 3}}, "multiple of"),
        ({**GEMMA3_1B, "sliding_window_pattern": 0}, "'sliding_window_pattern' must be positive"),
        ({"model_type": "opt", **_TINY, "max_position_embeddings": 8}, "lacks 'ffn_dim'"),
        ({"model_type": "opt", **_TINY, "num_attention_heads": 5, "ffn_dim": 8, "max_position_embeddings": 8},
         "hidden size 64 must be a multiple of num_attention_heads=5"),
        ({"model_type": "gptj", "n_embd": 64, "n_layer": 2, "n_head": 0, "vocab_size": 10}, "'n_head' must be positive"),
        ({"model_type": "gpt_bigcode", "n_embd": 64, "n_layer": 2, "n_head": 4, "vocab_size": 10},
         "lacks 'n_positions' / 'max_position_embeddings'"),
        ({"model_type": "starcoder2", **_TINY, "num_key_value_heads": 3}, "multiple of num_key_value_heads=3"),
        ({"model_type": "cohere", **_TINY, "use_qk_norm": "yes"}, "'use_qk_norm' must be true or false"),
        ({"model_type": "phi", **_TINY, "qk_layernorm": 1}, "'qk_layernorm' must be true or false"),
    ],
)  # fmt: skip
def test_bad_configs_give_one_clear_line(config: dict[str, Any], message: str) -> None:
    with pytest.raises(ModelConfigError, match=message) as info:
        model_from_config(config, "bad")
    assert "\n" not in str(info.value)


@pytest.mark.parametrize(("preset", "leaves"), [("gemma-3-1b", {"q_proj", "v_proj"}),
                                               ("phi-2", {"q_proj", "v_proj", "fc1", "fc2"}),
                                               ("starcoder2-7b", {"q_proj", "v_proj"})])  # fmt: skip
def test_default_lora_targets_of_the_new_families(preset: str, leaves: set[str]) -> None:
    """PEFT 0.21's default target modules (phi: q/v and the MLP; Gemma 3 and StarCoder2 have no
    PEFT entry and take q/v): `lora_targets: default` resolves for every new family."""
    from gpuplan.estimators.lora import lora_targets

    m = load_model(preset)
    assert {g.name.rsplit(".", 1)[-1] for g in lora_targets(m, "default")} == leaves


def test_every_transformer_family_has_lora_defaults_and_an_fsdp_wrap_class() -> None:
    """A family the reader supports must also work with `task: lora` (PEFT's default targets, or
    q/v where PEFT has none) and get FSDP's transformer auto-wrap class in launch files; a CNN has
    neither (LoRA adapts attention, FSDP wraps ResNet by size). Both are columns of the family
    table (tests/test_families.py checks the rest of it)."""
    from gpuplan.estimators.lora import default_targets
    from gpuplan.specs.model import family_of

    families = set(SUPPORTED_MODEL_TYPES) - {"resnet"}
    assert not [t for t in families if not default_targets(t)]
    assert not [t for t in families if not (f := family_of(t)) or not f.fsdp_layer]
    # PEFT 0.21's TRANSFORMERS_MODELS_TO_LORA_TARGET_MODULES_MAPPING["llama4"]
    assert default_targets("llama4") == ("q_proj", "v_proj")
    llama4 = family_of("llama4")
    assert llama4 is not None and llama4.fsdp_layer == "Llama4TextDecoderLayer"  # transformers' _no_split_modules
