"""The family table (gpuplan.specs.model.families): complete and consistent with itself, with the
builders, and, where they are installed, with PEFT's default LoRA targets and transformers' layer
classes and config defaults."""

from __future__ import annotations

import dataclasses
import importlib
from typing import Any

import pytest

from gpuplan.estimators.lora import default_targets, lora_targets
from gpuplan.specs.model import FAMILIES, SUPPORTED_MODEL_TYPES, Family, family_of, model_from_config
from gpuplan.specs.model.builders.llama import build_llama_like
from gpuplan.specs.model.record import KINDS, KV_LAYOUTS, NORMS

# One tiny config every builder reads (each takes the keys of its own family)
TINY: dict[str, Any] = {
    "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16,
    "intermediate_size": 128, "vocab_size": 256, "max_position_embeddings": 128,
    "n_embd": 64, "n_layer": 2, "n_head": 4, "n_positions": 128,  # GPT-2's names
    "d_model": 64, "n_layers": 2, "n_heads": 4,  # MPT's
    "ffn_dim": 128,  # OPT's
    "ffn_hidden_size": 128, "kv_channels": 16,  # ChatGLM's (Qwen v1 reads kv_channels too)
    "num_layers": 2, "num_heads": 4, "d_ff": 128, "d_kv": 16,  # T5's
    "kv_lora_rank": 16, "q_lora_rank": 32, "qk_nope_head_dim": 8, "qk_rope_head_dim": 8, "v_head_dim": 16,  # MLA
    "num_local_experts": 4, "num_experts": 4, "n_routed_experts": 4, "num_experts_per_tok": 2,
    "moe_intermediate_size": 32,
    "hidden_sizes": [16, 32], "depths": [1, 1],  # ResNet's
    "vision_config": {"hidden_size": 32, "intermediate_size": 48, "num_hidden_layers": 1, "num_attention_heads": 4},
}  # fmt: skip
TINY["text_config"] = {k: v for k, v in TINY.items() if k != "vision_config"}
TRANSFORMERS = [t for t in SUPPORTED_MODEL_TYPES if FAMILIES[t].kind != "cnn"]
# the families transformers ships (the hub families' modeling code is the checkpoint's own)
IN_TRANSFORMERS = [t for t in TRANSFORMERS if not FAMILIES[t].hub_code]


def _tiny(model_type: str, **changes: Any) -> dict[str, Any]:
    return {**TINY, **changes, "model_type": model_type}


def test_one_record_per_supported_model_type() -> None:
    assert len(FAMILIES) == len(SUPPORTED_MODEL_TYPES)  # the table refuses a model_type twice
    assert set(FAMILIES) == set(SUPPORTED_MODEL_TYPES)
    assert all(FAMILIES[t].model_type == t and family_of(t) is FAMILIES[t] for t in FAMILIES)
    assert family_of("llama4_vision_model") is None
    # messages list the transformers sorted, then the CNN
    assert SUPPORTED_MODEL_TYPES[-1] == "resnet"
    assert list(SUPPORTED_MODEL_TYPES[:-1]) == sorted(SUPPORTED_MODEL_TYPES[:-1])


@pytest.mark.parametrize("model_type", SUPPORTED_MODEL_TYPES)
def test_every_record_is_complete(model_type: str) -> None:
    f = FAMILIES[model_type]
    assert callable(f.build)
    assert f.kind in KINDS and f.norm in NORMS and f.kv in KV_LAYOUTS
    if f.build is build_llama_like:
        assert f.layer is not None, "the Llama-lineage builder reads the record's layer"
    else:
        assert f.layer is None, "only the Llama-lineage builder reads a layer"
    if f.kind == "cnn":  # LoRA adapts attention, FSDP wraps a CNN by size
        assert not f.lora_targets and f.fsdp_layer is None
    else:
        assert f.lora_targets, "every transformer has default LoRA targets (PEFT's, or q/v's kin)"
        assert f.fsdp_layer, "every transformer has FSDP's transformer auto-wrap class"


@pytest.mark.parametrize("model_type", SUPPORTED_MODEL_TYPES)
def test_the_builder_reads_a_tiny_config_as_the_record_says(model_type: str) -> None:
    f = FAMILIES[model_type]
    m = model_from_config(_tiny(model_type), model_type)
    assert (m.model_type, m.kind) == (model_type, f.kind)
    assert (m.attention_type == "mla") == (f.kv == "mla")
    if f.kv == "none":
        assert m.kv_bytes_per_token() == 0
    if f.kind == "decoder" and f.model_type != "mpt":  # MPT always ties
        assert m.tie_word_embeddings == f.tied, "tie_word_embeddings defaults to the record's tied"
    # a window (and Llama 4's chunk) caps layers only where the KV layout reads it
    windows = {"sliding_window": 16, "use_sliding_window": True, "attention_chunk_size": 16}
    cfg = _tiny(model_type, **windows, text_config={**TINY["text_config"], **windows})
    capped = any(a.window is not None for a in model_from_config(cfg, model_type).attention_layers)
    assert capped == (f.kv not in ("full", "mla", "none")), f.kv


@pytest.mark.parametrize("model_type", TRANSFORMERS)
def test_every_default_lora_target_is_a_linear_layer_of_the_family(model_type: str) -> None:
    """Each default target names a linear layer the builder makes (DeepSeek's q_proj only without
    q_lora_rank), and `lora_targets: default` resolves."""
    names = default_targets(model_type)
    assert names == FAMILIES[model_type].lora_targets
    leaves: set[str] = set()
    for cfg in (_tiny(model_type), {k: v for k, v in _tiny(model_type).items() if k != "q_lora_rank"}):
        m = model_from_config(cfg, model_type)
        assert lora_targets(m, "default")
        leaves |= {g.name.rsplit(".", 1)[-1] for g in m.linear_layers()}
    assert set(names) <= leaves, sorted(set(names) - leaves)


def test_the_columns_agree_with_each_other() -> None:
    for t, f in FAMILIES.items():
        layer = f.layer or (f.text.layer if f.text else None)
        if f.megatron.llama:  # --swiglu --normalization RMSNorm: a gated MLP and RMSNorm
            assert f.kind == "decoder" and f.norm == "rmsnorm", t
            assert layer is None or len(layer.mlp) == 3, t
        if f.megatron.qk_layernorm:  # a norm over each head's q and k
            assert layer is not None and layer.qk_norm == "head", t
        if f.norm_upcasts:
            assert f.norm == "rmsnorm", t
        if layer is not None and layer.norm_bias:
            assert f.norm == "layernorm", t
        if f.kv not in ("full", "mla", "none"):  # windows and chunks: the Llama-lineage reader's
            assert layer is not None, t
        if f.kv == "none":
            assert f.kind in ("encoder", "vision-transformer", "cnn"), t


@pytest.mark.parametrize("model_type", [t for t, f in FAMILIES.items() if f.text is not None])
def test_a_multimodal_wrapper_has_its_text_decoders_facts(model_type: str) -> None:
    f = FAMILIES[model_type]
    assert f.text is not None and f.text is FAMILIES[f.text.model_type]
    same = ("kind", "norm", "tied", "kv", "fsdp_layer", "megatron", "norm_upcasts")
    assert {k: getattr(f, k) for k in same} == {k: getattr(f.text, k) for k in same}


@pytest.mark.parametrize("model_type", [t for t, f in FAMILIES.items() if f.alias_of])
def test_an_alias_is_its_familys_record(model_type: str) -> None:
    f = FAMILIES[model_type]
    assert f.alias_of in FAMILIES
    assert dataclasses.replace(f, model_type=f.alias_of, alias_of=None) == FAMILIES[f.alias_of]


def test_default_lora_targets_are_pefts_where_peft_has_them() -> None:
    constants = pytest.importorskip("peft.utils.constants", reason="peft not installed")
    mapping: dict[str, Any] = constants.TRANSFORMERS_MODELS_TO_LORA_TARGET_MODULES_MAPPING
    listed = [t for t in FAMILIES if t in mapping]
    assert len(listed) >= 20  # the mapping is where the table says it is
    for t in listed:
        assert FAMILIES[t].lora_targets == tuple(mapping[t]), t


def _transformers_module(f: Family, kind: str) -> Any:
    """transformers.models.<family>.<kind>_<family>: the model_type's own (or its alias's)."""
    from transformers.models.auto.configuration_auto import model_type_to_module_name

    name = model_type_to_module_name(f.alias_of or f.model_type)
    return importlib.import_module(f"transformers.models.{name}.{kind}_{name}")


@pytest.mark.parametrize("model_type", IN_TRANSFORMERS)
def test_fsdp_layer_classes_exist_in_transformers(model_type: str) -> None:
    """The class FSDP's transformer auto-wrap names is in the family's modeling module and in a
    model's _no_split_modules (what transformers itself keeps whole)."""
    pytest.importorskip("transformers", reason="transformers not installed")
    f = FAMILIES[model_type]
    modeling = _transformers_module(f, "modeling")
    assert isinstance(getattr(modeling, str(f.fsdp_layer), None), type), f.fsdp_layer
    no_split = {
        name
        for v in vars(modeling).values()
        if isinstance(v, type) and v.__module__ == modeling.__name__
        for name in getattr(v, "_no_split_modules", None) or ()
    }
    assert f.fsdp_layer in no_split, sorted(no_split)


@pytest.mark.parametrize("model_type", [t for t in IN_TRANSFORMERS if FAMILIES[t].kind == "decoder"])
def test_decoder_tie_defaults_are_the_config_classes(model_type: str) -> None:
    """tied is what the transformers config class fills in when config.json leaves
    tie_word_embeddings out (checked for the decoders: transformers 5's MT5Config forces True
    where mT5 checkpoints say false, and the encoders have no head)."""
    pytest.importorskip("transformers", reason="transformers not installed")
    f = FAMILIES[model_type]
    configuration = _transformers_module(f, "configuration")
    classes: list[Any] = [
        v
        for v in vars(configuration).values()
        if isinstance(v, type) and v.__module__ == configuration.__name__ and getattr(v, "model_type", None)
    ]
    cls = next(c for c in classes if c.model_type == (f.alias_of or f.model_type))
    assert cls().tie_word_embeddings is f.tied
