"""config.json -> ModelSpec: the family's builder lists the parameter tensors the reference
implementation (transformers) creates, so totals are exact; the shape is then checked against
bounds no real model comes near. Nothing from a model repository is executed: the config is plain
JSON."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from gpuplan.errors import InvalidSettingError, ModelConfigError
from gpuplan.safeio import check_numbers, escape_controls
from gpuplan.specs.model.config import (
    MAX_CONTEXT,
    MAX_EXPERTS,
    MAX_FFN,
    MAX_HEAD_DIM,
    MAX_HIDDEN,
    MAX_PARAMS,
    MAX_VOCAB,
    Cfg,
)
from gpuplan.specs.model.families import SUPPORTED_MODEL_TYPES, family_of
from gpuplan.specs.model.groups import Built, Shape, attention_kind
from gpuplan.specs.model.record import Family
from gpuplan.specs.model.spec import ModelSpec


def model_from_config(config: Mapping[str, Any], name: str = "model") -> ModelSpec:
    """A ModelSpec from a parsed config.json (a dict). Raises ModelConfigError on bad input."""
    # the name comes from a folder, a hub id or a request: escape control characters once, here,
    # so no table, header or message prints a raw ESC sequence (a normal name is unchanged)
    name = escape_controls(name)
    if not isinstance(config, Mapping):
        raise ModelConfigError(f"{name}: config.json must hold a JSON object, not {type(config).__name__}.")
    model_type = config.get("model_type")
    if not isinstance(model_type, str) or not model_type:
        raise ModelConfigError(f"{name}: config.json has no 'model_type'; is this a Hugging Face model config?")
    try:  # NaN, infinity or a 300-digit integer anywhere (a pasted config can hold them): one line naming the key
        check_numbers(config, name)
    except InvalidSettingError as exc:
        raise ModelConfigError(str(exc)) from None
    fam = family_of(model_type)
    if fam is None:
        raise ModelConfigError(
            f"{name}: model_type {model_type!r} is not supported. Supported: {', '.join(SUPPORTED_MODEL_TYPES)}."
        )
    return _spec(name, fam, fam.build(Cfg(config, name), fam), config)


def _key_of(config: Mapping[str, Any], *keys: str) -> str:
    """The first of `keys` the config gives (the one a message names), else the first."""
    return next((k for k in keys if config.get(k) is not None), keys[0])


def _check_shape(name: str, s: Shape, moe: Mapping[str, int], config: Mapping[str, Any]) -> None:
    """One ModelConfigError line for a shape no model has (zero head_dim or context, top-k experts
    out of range, sizes beyond the bounds in config.py), naming the key the config used."""

    def bad(key: str, value: object, rule: str) -> ModelConfigError:
        return ModelConfigError(f"{name}: config key {key!r} = {value!r} {rule}.")

    if not 1 <= s.d <= MAX_HIDDEN:
        raise bad(_key_of(config, "hidden_size", "n_embd", "d_model"), s.d, f"must be 1-{MAX_HIDDEN:,}")
    if not 1 <= s.head_dim <= MAX_HEAD_DIM:
        key = _key_of(config, "head_dim", "d_kv")
        raise bad(key if key in config else "head_dim (hidden size / heads)", s.head_dim, f"must be 1-{MAX_HEAD_DIM:,}")
    if s.ff > MAX_FFN:
        raise bad(
            _key_of(config, "intermediate_size", "n_inner", "ffn_dim", "d_ff"), s.ff, f"must be at most {MAX_FFN:,}"
        )
    if s.vocab > MAX_VOCAB:
        raise bad("vocab_size", s.vocab, f"must be at most {MAX_VOCAB:,}")
    if s.max_pos is not None and not 1 <= s.max_pos <= MAX_CONTEXT:
        key = _key_of(config, "max_position_embeddings", "n_positions", "max_seq_len")
        if key not in config and "image_size" in config:  # a ViT's context is its patches (+ the class token)
            raise bad("image_size", config["image_size"], f"gives {s.max_pos:,} tokens; at most {MAX_CONTEXT:,}")
        raise bad(key, s.max_pos, f"must be 1-{MAX_CONTEXT:,} (the longest context the model takes)")
    experts, k = moe.get("experts", 0), moe.get("k", 0)
    if experts:
        if experts > MAX_EXPERTS:
            key = _key_of(config, "num_local_experts", "num_experts", "n_routed_experts")
            raise bad(key, experts, f"must be at most {MAX_EXPERTS:,}")
        if not 1 <= k <= experts:
            key = _key_of(config, "num_experts_per_tok", "experts_per_token")
            raise bad(key, k, f"must be 1 to the number of experts ({experts})")


def _spec(name: str, fam: Family, b: Built, config: Mapping[str, Any]) -> ModelSpec:
    s, g, moe = b.shape, b.groups, b.moe
    if fam.kv == "mla":
        attention_type = "mla"
    elif fam.kind == "cnn":
        attention_type = "none"
    else:
        attention_type = attention_kind(s.heads, s.kv_heads)
    if any(p.numel < 0 for p in g.items):
        raise ModelConfigError(f"{name}: the config gives negative or non-finite tensor sizes.")
    if fam.kind != "cnn":
        _check_shape(name, s, moe, config)
    total = sum(p.total for p in g.items)
    if total > MAX_PARAMS or not all(math.isfinite(f) for f in b.conv_flops):
        raise ModelConfigError(
            f"{name}: the config describes {total:.3g} parameters, beyond any model (at most {MAX_PARAMS:.0e}); "
            "check its sizes (hidden, layers, intermediate, experts, vocabulary)."
        )
    return ModelSpec(
        name=name,
        model_type=fam.model_type,
        kind=fam.kind,
        hidden_size=s.d,
        num_layers=s.layers,
        num_heads=s.heads,
        num_kv_heads=s.kv_heads,
        head_dim=s.head_dim,
        intermediate_size=s.ff,
        vocab_size=s.vocab,
        max_position_embeddings=s.max_pos,
        tie_word_embeddings=s.tied,
        attention_type=attention_type,
        groups=tuple(g.items),
        attention_layers=tuple(g.attn),
        num_experts=moe.get("experts", 0),
        experts_per_token=moe.get("k", 0),
        num_shared_experts=moe.get("shared", 0),
        moe_layer_ids=tuple(range(s.layers) if g.moe_layers is None else g.moe_layers) if moe.get("experts") else (),
        conv_flops_per_sample=b.conv_flops[0],
        winograd_flops_per_sample=b.conv_flops[1],
        image_size=b.image_size,
        config=dict(config),
    )
